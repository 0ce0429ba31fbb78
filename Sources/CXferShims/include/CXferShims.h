#ifndef CXFERSHIMS_H
#define CXFERSHIMS_H

/// Atomically exchanges two paths (Linux renameat2 RENAME_EXCHANGE).
/// Returns 0 on success, -1 with errno set otherwise (ENOSYS/EINVAL where unsupported).
int cxfer_exchange_paths(const char *a, const char *b);

/// Flushes the whole file system holding `fd` (Linux syncfs; fsync of `fd` elsewhere).
int cxfer_syncfs(int fd);

#endif
