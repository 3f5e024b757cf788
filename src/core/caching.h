/* src/core/caching.h: what the caching allocators of the device backends (CUDA, OpenCL) share,
 * so that their size classes and their out-of-memory messages agree: the rounding of a request to
 * the block size that is cached, for device memory and for pinned host memory, and byte counts in
 * words. Header-only (static inline), for the C sources and for nvcc alike. */
#ifndef CUTTLE_BACKEND_CACHING_H
#define CUTTLE_BACKEND_CACHING_H

#include <stddef.h>
#include <stdio.h>

#define CT_KIB ((size_t)1024)
#define CT_MIB (CT_KIB * CT_KIB)

/* Device blocks: multiples of 512 bytes up to 1 MiB, then of 2 MiB, as PyTorch's CUDA caching
 * allocator rounds (c10/cuda/CUDACachingAllocator.cpp: kMinBlockSize = 512, kRoundLarge = 2 MiB), so that
 * freed blocks are reused by requests of nearby sizes. 0 bytes is one block. */
static inline size_t ct__cache_round(size_t n) {
  if (n == 0) n = 1;
  if (n <= CT_MIB) return (n + 511) & ~(size_t)511;
  return (n + 2 * CT_MIB - 1) / (2 * CT_MIB) * (2 * CT_MIB);
}

/* Pinned host blocks: whole pages (4 KiB) up to 1 MiB, then whole MiB. */
static inline size_t ct__cache_round_pinned(size_t n) {
  if (n == 0) n = 1;
  if (n <= CT_MIB) return (n + 4 * CT_KIB - 1) / (4 * CT_KIB) * (4 * CT_KIB);
  return (n + CT_MIB - 1) / CT_MIB * CT_MIB;
}

/* n bytes as "1.50 GiB" / "12.00 MiB" / "3.00 KiB" / "17 bytes" into buf; returns buf. */
static inline const char *ct__bytes_human(size_t n, char *buf, size_t len) {
  if (n >= 1024 * CT_MIB) snprintf(buf, len, "%.2f GiB", (double)n / (double)(1024 * CT_MIB));
  else if (n >= CT_MIB) snprintf(buf, len, "%.2f MiB", (double)n / (double)CT_MIB);
  else if (n >= CT_KIB) snprintf(buf, len, "%.2f KiB", (double)n / (double)CT_KIB);
  else snprintf(buf, len, "%zu bytes", n);
  return buf;
}

#endif
