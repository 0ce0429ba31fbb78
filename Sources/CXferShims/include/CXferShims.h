#ifndef CXFERSHIMS_H
#define CXFERSHIMS_H

#include <stddef.h>

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

/// Keeps up to `bytes` free at the top of each glibc heap instead of giving it back at once
/// (mallopt M_TRIM_THRESHOLD), and uses at most `arenas` heaps (M_ARENA_MAX). Returns 1, or 0
/// where the C library has no such settings.
int cxfer_keep_heap_top(int bytes, int arenas);

/// Opens an unnamed file for reading and writing in the directory `dir` (Linux O_TMPFILE; where
/// the file system has none, a named one unlinked at once): it goes when its last descriptor
/// closes. Returns the descriptor, or -1 with errno. Sets `*in_memory` to 1 when the file
/// system keeps its files in memory (tmpfs, ramfs), where a file saves no memory.
int cxfer_open_spill_file(const char *dir, int *in_memory);

/// Whether this processor has the SHA extensions `cxfer_sha256_lanes` needs (x86-64 SHA,
/// SSSE3, SSE4.1). Returns 1 or 0.
int cxfer_sha256_lanes_available(void);

/// The SHA-256 digests of `count` messages (`data[i]`, `lengths[i]` bytes) into `digests`
/// (32 bytes each, in order), two messages hashed at once. Only where
/// `cxfer_sha256_lanes_available()` is 1.
void cxfer_sha256_lanes(const unsigned char *const *data, const size_t *lengths, size_t count,
                        unsigned char *digests);

/// Reserves the blocks of `fd`'s bytes `[offset, offset + length)` (fallocate, or
/// posix_fallocate), so writes through a mapping of them cannot fail for want of space.
/// Returns 0, or an errno value.
int cxfer_reserve_file(int fd, long long offset, long long length);

/// Maps `length` bytes of `fd` from its start, shared, readable and writable. Returns the
/// address, or NULL with errno.
void *cxfer_map_file(int fd, size_t length);

/// Grows or moves a mapping made by cxfer_map_file to `new_length` bytes (Linux mremap with
/// MREMAP_MAYMOVE; elsewhere unmapped and mapped again). Returns the new address, or NULL with
/// errno (the old mapping then stays as it was).
void *cxfer_remap_file(int fd, void *address, size_t old_length, size_t new_length);

/// Drops `length` bytes of a shared file mapping at `address` from the process's resident
/// pages (madvise MADV_DONTNEED): the bytes stay in the file, and the next access reads them
/// back from the page cache. Returns 0, or -1 with errno.
int cxfer_release_mapped(void *address, size_t length);

/// Stops SQLite from checkpointing a WAL database when its connection `db` (a `sqlite3 *`)
/// closes (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE): the log stays beside the database, whole and
/// valid, and the next connection's automatic checkpoint copies it. Returns SQLite's result
/// code (0 is SQLITE_OK).
int cxfer_sqlite_no_checkpoint_on_close(void *db);

#endif
