/* src/backend/opencl/launch.c: what every kernel launcher shares (layer 3 of the folder,
 * opencl_backend.h): a tensor resolved to its (buffer, element offset) arguments (allocator.c), the
 * strided iterator's host half (core's ct__strided, laid out for kernels/a_common.cl), a scalar in
 * the kernels' REAL, and launching a kernel of the device's program (program.c) on the compute
 * queue, whose failure reports the allocator's figures when the driver ran out of memory. */
#include <string.h>
#include "backend/opencl/opencl_backend.h"

ct_status ct__ocl_buf_of(const ct_tensor *t, ct__ocl_buf *out) {
  size_t byte_off;
  ct_status s = ct__ocl_resolve(t->device.index, ct__ptr(t), &out->mem, &byte_off);
  if (s != CT_OK) return s;
  out->off = (cl_long)(byte_off / ct_dtype_size(t->dtype));
  out->dt = (cl_int)t->dtype;
  return CT_OK;
}

void ct__ocl_iter_init(ct__ocl_iter *it, int ndim, const int64_t *shape, int nops, const int64_t *const *strides) {
  ct__strided m;
  ct__strided_init(&m, ndim, shape, nops, strides);
  memset(it, 0, sizeof *it);
  for (int d = 0; d < m.ndim; d++) {
    it->size[d] = m.size[d];
    for (int k = 0; k < nops; k++) it->stride[k][d] = m.stride[k][d];
  }
  if (m.ndim == 0) it->size[0] = 1; /* one element: one dim of size 1 keeps the kernel's loop simple */
  it->ndim = m.ndim > 0 ? m.ndim : 1;
}

ct__ocl_arg ct__ocl_real_arg(int index, double v, ct__ocl_real *slot) {
  const ct__ocl_devinfo *d = ct__ocl_devinfo_get(index);
  if (d && d->fp64) {
    slot->d = v;
    return (ct__ocl_arg){sizeof(cl_double), &slot->d};
  }
  slot->f = (cl_float)v;
  return (ct__ocl_arg){sizeof(cl_float), &slot->f};
}

/* The launch of ct__ocl_launch (local NULL: the driver's choice) and ct__ocl_launch_groups (local
 * non-NULL: n is a group count, *local set to the work-group size used). */
static ct_status launch(int index, const char *name, size_t n, size_t *local, int nargs, const ct__ocl_arg *args) {
  if (n == 0) return CT_OK;
  ct__ocl_ctx *c = ct__ocl_ctx_get(index);
  if (!c) return ct_last_status();
  pthread_mutex_lock(&c->lock);
  ct__ocl_kernel_entry *ke = ct__ocl_kernel(c, name);
  cl_kernel k = ke ? ke->k : NULL;
  cl_int e = k ? CL_SUCCESS : CL_INVALID_KERNEL;
  int bad = -1;
  for (int i = 0; k && i < nargs && e == CL_SUCCESS; i++)
    if ((e = clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].value)) != CL_SUCCESS) bad = i;
  if (k && e == CL_SUCCESS && local && !ke->group) { /* asked of the driver once per kernel */
    size_t kwg = 0, l = 1;
    e = clGetKernelWorkGroupInfo(k, c->info->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
    /* a CPU device (PoCL) runs a work-group's items as loops on one thread, where 256 items and
     * their barriers cost about 3x a batch norm of 16 (resnet18 on PoCL, --profile sync); 16 still
     * runs the group reduction in CI */
    size_t cap = c->info->type & CL_DEVICE_TYPE_CPU ? 16 : CT_OCL_GROUP_MAX;
    while (e == CL_SUCCESS && l * 2 <= kwg && l * 2 <= cap) l *= 2;
    if (e == CL_SUCCESS) ke->group = l;
  }
  if (k && e == CL_SUCCESS && local) *local = ke->group, n *= ke->group;
  if (k && e == CL_SUCCESS) e = clEnqueueNDRangeKernel(c->compute, k, 1, NULL, &n, local, 0, NULL, NULL);
  pthread_mutex_unlock(&c->lock);
  if (!k) return ct_last_status();
  if (e == CL_SUCCESS) ct__ocl_exit_guard(c);
  if (e != CL_SUCCESS) {
    char what[160];
    if (bad >= 0) snprintf(what, sizeof what, "setting argument %d of kernel %s", bad, name);
    else snprintf(what, sizeof what, "launching kernel %s over %zu work-items", name, n);
    return ct__ocl_call_error(index, what, e);
  }
  return CT_OK;
}

ct_status ct__ocl_launch(int index, const char *name, size_t n, int nargs, const ct__ocl_arg *args) {
  return launch(index, name, n, NULL, nargs, args);
}

ct_status ct__ocl_launch_groups(int index, const char *name, size_t ngroups, int nargs, const ct__ocl_arg *args) {
  size_t local = 0;
  return launch(index, name, ngroups, &local, nargs, args);
}
