/* src/ops/bench_access.h: what `cuttle bench gemm` needs to time a backend's matmul kernel on its
 * own, beneath ct_matmul: no validation beyond a NULL check, no allocation, no autocast, no tape.
 * The difference between the two is the front-end's cost. The declarations name only public types,
 * so the bench (outside src/) reaches the kernel here and never through a tensor's storage or its
 * backend's table. Not a public API: nothing but the benchmarks calls it. */
#ifndef CUTTLE_OPS_BENCH_ACCESS_H
#define CUTTLE_OPS_BENCH_ACCESS_H

#include "cuttle.h"

/* c = a @ b by the matmul kernel of a's backend, as ct_matmul's batched GEMM calls it.
 * a: (B, M, K), b: (B, K, N), c: (B, M, N) contiguous; one device and one dtype (float32, float64,
 * or a half dtype the backend's matmul takes); a and b with a unit stride along one of their last
 * two dims. The caller guarantees all of this; nothing is checked but NULL (CT_EINVAL). Returns the
 * kernel's status, or CT_EUNSUPPORTED where the backend has no matmul kernel. */
ct_status ct__matmul_kernel_into(ct_tensor *c, ct_tensor *a, ct_tensor *b);

#endif
