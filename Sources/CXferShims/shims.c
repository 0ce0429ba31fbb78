#define _GNU_SOURCE
#include "CXferShims.h"
#include <errno.h>
#include <sqlite3.h>
#include <fcntl.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#if defined(__linux__)
#include <sys/syscall.h>
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#endif

int cxfer_exchange_paths(const char *a, const char *b) {
    return cxfer_exchange_at(AT_FDCWD, a, AT_FDCWD, b);
}

int cxfer_exchange_at(int afd, const char *a, int bfd, const char *b) {
#if defined(__linux__) && defined(SYS_renameat2)
    return (int)syscall(SYS_renameat2, afd, a, bfd, b, RENAME_EXCHANGE);
#else
    errno = ENOSYS;
    return -1;
#endif
}

#if defined(__linux__) && defined(SYS_openat2)
/* struct open_how and the RESOLVE_ flags (linux/openat2.h), spelled out so the build does not
   depend on the kernel headers' version. */
struct cxfer_open_how {
    uint64_t flags;
    uint64_t mode;
    uint64_t resolve;
};
#define CXFER_RESOLVE_NO_MAGICLINKS 0x02
#define CXFER_RESOLVE_NO_SYMLINKS 0x04
#define CXFER_RESOLVE_BENEATH 0x08
#endif

int cxfer_open_beneath(int dirfd, const char *path, int flags, unsigned int mode) {
#if defined(__linux__) && defined(SYS_openat2)
    struct cxfer_open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)(unsigned int)flags;
    how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
    how.resolve = CXFER_RESOLVE_BENEATH | CXFER_RESOLVE_NO_SYMLINKS | CXFER_RESOLVE_NO_MAGICLINKS;
    long fd = -1;
    /* EAGAIN: a rename raced the resolution; a few retries, then the caller's error. */
    for (int attempt = 0; attempt < 16; attempt++) {
        fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
        if (fd >= 0 || (errno != EINTR && errno != EAGAIN)) break;
    }
    return (int)fd;
#else
    (void)dirfd; (void)path; (void)flags; (void)mode;
    errno = ENOSYS;
    return -1;
#endif
}

int cxfer_start_writeback(int fd) {
#if defined(__linux__)
    return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int cxfer_trim_heap(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}

int cxfer_fix_mmap_threshold(int bytes) {
#if defined(__GLIBC__)
    return mallopt(M_MMAP_THRESHOLD, bytes);
#else
    (void)bytes;
    return 0;
#endif
}

int cxfer_keep_heap_top(int bytes, int arenas) {
#if defined(__GLIBC__)
    return mallopt(M_TRIM_THRESHOLD, bytes) && mallopt(M_ARENA_MAX, arenas);
#else
    (void)bytes;
    (void)arenas;
    return 0;
#endif
}

int cxfer_syncfs(int fd) {
#if defined(__linux__)
    return syncfs(fd);
#else
    (void)fd;
    errno = ENOSYS;
    return -1;
#endif
}

int cxfer_open_spill_file(const char *dir, int *in_memory) {
    int fd = -1;
#if defined(__linux__) && defined(O_TMPFILE)
    fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
    if (fd < 0) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/.xfer-spill-XXXXXX", dir) >= (int)sizeof path) {
            errno = ENAMETOOLONG;
            return -1;
        }
        fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0) return -1;
        unlink(path);
    }
    *in_memory = 0;
#if defined(__linux__)
    struct statfs info;
    if (fstatfs(fd, &info) == 0) {
        /* TMPFS_MAGIC, RAMFS_MAGIC (linux/magic.h) */
        if ((unsigned long)info.f_type == 0x01021994UL || (unsigned long)info.f_type == 0x858458f6UL) *in_memory = 1;
    }
#endif
    return fd;
}

int cxfer_reserve_file(int fd, long long offset, long long length) {
#if defined(__linux__)
    if (fallocate(fd, 0, (off_t)offset, (off_t)length) == 0) return 0;
    if (errno != EOPNOTSUPP && errno != ENOSYS) return errno;
#endif
    return posix_fallocate(fd, (off_t)offset, (off_t)length);
}

void *cxfer_map_file(int fd, size_t length) {
    void *address = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return address == MAP_FAILED ? NULL : address;
}

void *cxfer_remap_file(int fd, void *address, size_t old_length, size_t new_length) {
#if defined(__linux__) && defined(MREMAP_MAYMOVE)
    (void)fd;
    void *moved = mremap(address, old_length, new_length, MREMAP_MAYMOVE);
    return moved == MAP_FAILED ? NULL : moved;
#else
    void *fresh = mmap(NULL, new_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fresh == MAP_FAILED) return NULL;
    munmap(address, old_length);
    return fresh;
#endif
}

int cxfer_release_mapped(void *address, size_t length) {
    return madvise(address, length, MADV_DONTNEED);
}

int cxfer_sqlite_no_checkpoint_on_close(void *db) {
    return sqlite3_db_config((sqlite3 *)db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}
