/* src/backend/cuda/cuda_backend.h: the CUDA backend's internal functions that C code may call
 * (tests, the CLI's `cuttle smi`, the monitor). C-compatible: no CUDA types appear here, so a .c
 * file can include it without the CUDA headers. The backend vtable itself is ct__cuda_backend,
 * declared in core/backend.h. */
#ifndef CUTTLE_CUDA_BACKEND_H
#define CUTTLE_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The caching allocator's figures for CUDA device dev, in bytes:
 *  allocated   bytes in blocks handed out to tensors now (block sizes, after rounding);
 *  reserved    bytes obtained from cudaMalloc and not yet returned (allocated + cached);
 *  peak        the highest `allocated` since the device's context was created;
 *  num_mallocs cudaMalloc calls made (a cache hit makes none).
 * Any pointer may be NULL. All zero when the device's context does not exist yet. */
void ct__cuda_memory_stats(int dev, size_t *allocated, size_t *reserved, size_t *peak, uint64_t *num_mallocs);

/* Return every cached (free) block of device dev to the driver with cudaFree. Blocks in use stay. */
void ct__cuda_empty_cache(int dev);

/* Make the peak of device dev equal to its allocated bytes now. No-op without a context. */
void ct__cuda_reset_peak(int dev);

/* Process-wide switch: allow TensorFloat-32 in float32 matmul and convolution (off by default, so
 * float32 results match the CPU to float32 rounding; on, Ampere/Hopper tensor cores are used at
 * about 10-bit mantissa precision, as torch.backends.cuda.matmul.allow_tf32). */
void ct__cuda_set_allow_tf32(int allow);
int ct__cuda_allow_tf32(void);

/* The CUDA backend's Philox4x32-10 compiled for the host, for tests comparing it with ct__philox. */
void ct__cuda_philox_host(uint64_t seed, uint64_t ctr_lo, uint64_t ctr_hi, uint32_t out[4]);

#ifdef __cplusplus
}
#endif
#endif
