/* src/core/dispatch.c: the kernel table's names, the error for a kernel a backend lacks, and the
 * supports query (core/backend.h): what lets the ops call any backend without a NULL check of their
 * own, and ask what it takes as it is instead of reading a flag per case. */
#include <stdio.h>

#include "core/backend.h"

const char *const ct__kernel_names[CT_K_COUNT] = {
#define CT_KERNEL(name, params) [CT_K_##name] = #name,
#include "core/kernels.def"
    [CT_K_pool2d_max_relu] = "pool2d_max_relu",
};

int ct__has_kernel(const ct_backend *be, ct_kernel_id k) {
  if (!be) return 0;
  switch (k) {
#define CT_KERNEL(name, params) \
  case CT_K_##name:             \
    return be->kernels.name != NULL;
#include "core/kernels.def"
    default:
      return 0;
  }
}

int ct__supports(const ct_backend *be, ct_kernel_id k, ct_dtype dt, ct_memory_format fmt) {
  if (!be || k < 0 || k >= CT_K_COUNT) return 0;
  /* a capability is a variant of a kernel: it needs that kernel first */
  ct_kernel_id base = k == CT_K_pool2d_max_relu ? CT_K_pool2d : k;
  if (!ct__has_kernel(be, base)) return 0;
  if (!be->supports) return k < CT_K_KERNEL_COUNT; /* kernels: every dtype; capabilities: none */
  return be->supports(k, dt, fmt) != 0;
}

/* dense channels_last strides (H W C, 1, W C, C) of a 4-D t, as cuttle/tensor.h defines them (ops
 * has the public query; core cannot call up into it) */
static int channels_last(const ct_tensor *t) {
  if (t->ndim != 4) return 0;
  int64_t C = t->shape[1], H = t->shape[2], W = t->shape[3];
  return t->stride[1] == 1 && t->stride[3] == C && t->stride[2] == W * C && t->stride[0] == H * W * C;
}

ct_status ct__kernel_missing(const ct_backend *be, ct_kernel_id k, const char *op, const ct_tensor *t) {
  char dev[32] = "?";
  const char *dt = "?", *fmt = "?";
  if (t) {
    ct_device_str(t->device, dev, sizeof dev);
    dt = ct_dtype_name(t->dtype);
    fmt = ct_tensor_is_contiguous(t) ? "contiguous" : channels_last(t) ? "channels_last" : "strided";
  }
  const char *kn = k >= 0 && k < CT_K_COUNT ? ct__kernel_names[k] : "?";
  return ct__error(CT_EUNSUPPORTED,
                   "%s: the %s backend has no %s kernel (%s, %s, on %s); copy the tensors to a device that has it "
                   "(ct_to), such as the CPU",
                   op ? op : "?", be ? be->name : "?", kn, dt, fmt, dev);
}
