#ifndef XFER_CFUSE3_SHIM_H
#define XFER_CFUSE3_SHIM_H
// libfuse 3's low-level API (Debian: libfuse3-dev), at the 3.12 level of the API.
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdlib.h>

// What Swift cannot reach directly: a macro, bit fields and a variadic argument list.

/// Runs the session's multi-threaded loop with at most `max_idle` idle worker threads.
static inline int cxfer_fuse_loop(struct fuse_session *se, unsigned int max_idle) {
    struct fuse_loop_config *config = fuse_loop_cfg_create();
    if (config == NULL) return -1;
    fuse_loop_cfg_set_clone_fd(config, 0);
    fuse_loop_cfg_set_max_threads(config, max_idle);
    fuse_loop_cfg_set_idle_threads(config, max_idle);
    int result = fuse_session_loop_mt(se, config);
    fuse_loop_cfg_destroy(config);
    return result;
}

/// A session over `ops` with the mount options `argv` (argv[0] the program's name).
static inline struct fuse_session *cxfer_fuse_session_new(
    int argc, char **argv, const struct fuse_lowlevel_ops *ops, void *userdata) {
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_session *se = fuse_session_new(&args, ops, sizeof(*ops), userdata);
    return se;
}

/// Sets whether an opened file's pages cached by an earlier open are kept.
static inline void cxfer_fuse_set_keep_cache(struct fuse_file_info *fi, int keep) {
    fi->keep_cache = keep ? 1 : 0;
}

/// The file handle of an open file.
static inline uint64_t cxfer_fuse_fh(const struct fuse_file_info *fi) { return fi->fh; }
static inline void cxfer_fuse_set_fh(struct fuse_file_info *fi, uint64_t fh) { fi->fh = fh; }
static inline int cxfer_fuse_flags(const struct fuse_file_info *fi) { return fi->flags; }

/// Asks the kernel for writes of up to `largest` bytes, read-ahead of at most `readahead`, and
/// asynchronous reads.
static inline void cxfer_fuse_configure(
    struct fuse_conn_info *conn, unsigned int largest, unsigned int readahead) {
    conn->max_readahead = readahead;
    conn->max_write = largest;
    if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
    if (conn->capable & FUSE_CAP_EXPORT_SUPPORT) conn->want |= FUSE_CAP_EXPORT_SUPPORT;
}
#endif
