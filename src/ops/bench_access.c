/* src/ops/bench_access.c: the backend's matmul kernel for `cuttle bench gemm` (bench_access.h). */
#include "ops/bench_access.h"
#include "backend/backend.h"

ct_status ct__matmul_kernel_into(ct_tensor *c, ct_tensor *a, ct_tensor *b) {
  if (!c || !a || !b) return ct__error(CT_EINVAL, "matmul kernel: %s is NULL", !c ? "c" : !a ? "a" : "b");
  const ct_backend *be = a->storage->backend;
#ifdef CT_KERNEL_CALL /* the kernel table of src/core/backend.h */
  return CT_KERNEL_CALL(be, matmul, "matmul kernel", a, c, a, b);
#else /* the flat vtable it replaces; this branch goes when the kernel table is in */
  return be->matmul ? be->matmul(c, a, b) : ct__error(CT_EUNSUPPORTED, "matmul kernel: the %s backend has none", be->name);
#endif
}
