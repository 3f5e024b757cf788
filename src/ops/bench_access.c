/* src/ops/bench_access.c: the backend's matmul kernel for `cuttle bench gemm` (bench_access.h). */
#include "ops/bench_access.h"
#include "core/backend.h"

ct_status ct__matmul_kernel_into(ct_tensor *c, ct_tensor *a, ct_tensor *b) {
  if (!c || !a || !b) return ct__error(CT_EINVAL, "matmul kernel: %s is NULL", !c ? "c" : !a ? "a" : "b");
  return CT_KERNEL_CALL(a->storage->backend, matmul, "matmul kernel", a, c, a, b);
}
