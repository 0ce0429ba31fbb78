#define _GNU_SOURCE
#include "CXferShims.h"
#include <errno.h>
#include <fcntl.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
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

int cxfer_syncfs(int fd) {
#if defined(__linux__)
    return syncfs(fd);
#else
    (void)fd;
    errno = ENOSYS;
    return -1;
#endif
}
