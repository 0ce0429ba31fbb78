#ifndef XFER_CZSTD_SHIM_H
#define XFER_CZSTD_SHIM_H
#include <zstd.h>
#include <zstd_errors.h>
#endif
