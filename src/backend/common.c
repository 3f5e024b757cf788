/* src/backend/common.c: the helpers every device backend shares (common.h says what and why). */
#include <string.h>
#include "backend/common.h"

/* A temporary's storage is the caller's; its memory goes back through ct__be_tmp_free. */
static void tmp_release(ct_storage *s) { (void)s; }

ct_status ct__be_tmp_new(ct__be_tmp *tmp, ct_device dev, int ndim, const int64_t *shape, ct_dtype dt) {
  memset(tmp, 0, sizeof *tmp);
  const ct_backend *be = ct__backend(dev.kind);
  if (!be) return ct__error(CT_EDEVICE, "a temporary on a device kind %d that this build has no backend for", (int)dev.kind);
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  size_t nbytes = (size_t)n * ct_dtype_size(dt);
  /* through the core's device fault-injection point, as every tensor's memory, so that the tests
   * that fail each allocation in turn reach the launchers' temporaries too */
  void *p = ct__device_alloc(be, dev, nbytes ? nbytes : 1);
  if (!p) return ct_last_status();
  tmp->s.refs = 1;
  tmp->s.data = p;
  tmp->s.nbytes = nbytes;
  tmp->s.device = dev;
  tmp->s.backend = be;
  tmp->s.release = tmp_release;
  tmp->t.refs = 1;
  tmp->t.ndim = ndim;
  for (int d = 0; d < ndim; d++) tmp->t.shape[d] = shape[d];
  ct__contiguous_strides(ndim, shape, tmp->t.stride);
  tmp->t.dtype = dt;
  tmp->t.device = dev;
  tmp->t.storage = &tmp->s;
  tmp->owned = 1;
  return CT_OK;
}

ct_status ct__be_tmp_cast(ct__be_tmp *tmp, ct_tensor *t, ct_dtype dt) {
  if (t->dtype == dt && ct_tensor_is_contiguous(t)) {
    memset(tmp, 0, sizeof *tmp);
    tmp->t = *t; /* a borrowed header: same storage, nothing to free */
    return CT_OK;
  }
  CT_TRY(ct__be_tmp_new(tmp, t->device, t->ndim, t->shape, dt));
  const ct_backend *be = tmp->s.backend;
  ct_status s = CT_KERNEL_CALL(be, copy, "a contiguous temporary", t, &tmp->t, t);
  if (s != CT_OK) ct__be_tmp_free(tmp);
  return s;
}

ct_status ct__be_tmp_contiguous(ct__be_tmp *tmp, ct_tensor *t) { return ct__be_tmp_cast(tmp, t, t->dtype); }

void ct__be_tmp_free(ct__be_tmp *tmp) {
  if (tmp->owned && tmp->s.data) tmp->s.backend->free(tmp->s.device.index, tmp->s.data, tmp->s.nbytes);
  tmp->owned = 0;
  tmp->s.data = NULL;
}

int64_t ct__be_chunk(int64_t n, int64_t item_bytes, int64_t budget) {
  int64_t k = item_bytes > 0 ? budget / item_bytes : n;
  if (k < 1) k = 1;
  return k < n ? k : n;
}
