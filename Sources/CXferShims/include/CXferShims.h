#ifndef CXFERSHIMS_H
#define CXFERSHIMS_H

/// Atomically exchanges two paths (Linux renameat2 RENAME_EXCHANGE).
/// Returns 0 on success, -1 with errno set otherwise (ENOSYS/EINVAL where unsupported).
int cxfer_exchange_paths(const char *a, const char *b);

/// Atomically exchanges `a` in directory `afd` with `b` in directory `bfd` (renameat2
/// RENAME_EXCHANGE). Returns 0, or -1 with errno (ENOSYS/EINVAL where unsupported).
int cxfer_exchange_at(int afd, const char *a, int bfd, const char *b);

/// Opens `path` (relative, several components) beneath the directory `dirfd` without
/// following any symlink and without leaving `dirfd` (Linux openat2 with RESOLVE_BENEATH |
/// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS). Returns the descriptor, or -1 with errno;
/// ENOSYS where the kernel has no openat2 (the caller then walks component by component).
int cxfer_open_beneath(int dirfd, const char *path, int flags, unsigned int mode);

/// Starts writeback of all of `fd`'s dirty pages without waiting (Linux sync_file_range with
/// SYNC_FILE_RANGE_WRITE). Returns 0, or -1 with errno (ENOSYS where unsupported).
int cxfer_start_writeback(int fd);

/// Makes the file system holding `fd` durable (Linux syncfs). Returns 0, or -1 with errno
/// (ENOSYS where unsupported).
int cxfer_syncfs(int fd);

/// Fixes glibc's mmap threshold at `bytes` (mallopt M_MMAP_THRESHOLD), which also stops glibc
/// from raising it after each large free: blocks of that size or more are then mapped alone and
/// given back when freed, instead of staying resident in the heap. Returns 1, or 0 where the
/// C library has no such setting.
int cxfer_fix_mmap_threshold(int bytes);
int cxfer_trim_heap(void);

#endif
