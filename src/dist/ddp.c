/* src/dist/ddp.c: DistributedDataParallel: the start-up broadcast and the gradient buckets.
 *
 * The buckets follow torch.nn.parallel.DistributedDataParallel's layout: parameters taken in
 * reverse order of registration (backward produces the last layer's gradients first), a bucket
 * closed when the next parameter would take it over bucket_mb MiB. Each bucket owns nothing but a
 * range of `order`; one float32 staging buffer as large as the largest bucket serves them all.
 * ct_ddp_sync_grads packs a bucket's gradients into it, sums it over the ranks with one blocking
 * MPI_Allreduce, scales by 1/world and unpacks. Overlapping these all-reduces with backward
 * (MPI_Iallreduce from a gradient hook) is the next increment of issue 10. */
#include "dist/dist_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ct_ddp {
  ct_module *m;
  int np;             /* parameters */
  ct_tensor **params; /* (np) borrowed from m, registration order */
  int *order;         /* (np) parameter indices, reverse registration order, bucket after bucket */
  int nb;             /* buckets */
  int *start;         /* (nb + 1) bucket b is order[start[b] .. start[b + 1]) */
  float *buf;         /* staging for the largest bucket */
};

void ct_ddp_free(ct_ddp *d) {
  if (!d) return;
  free(d->params), free(d->order), free(d->start), free(d->buf);
  free(d);
}

int ct_ddp_num_buckets(const ct_ddp *d) {
  if (!d) return ct__null_status("ct_ddp_num_buckets", "d"), -1;
  return d->nb;
}

ct_ddp *ct_ddp_new(ct_module *m, const ct_ddp_opts *opts) {
  ct_ddp_opts o = {0};
  if (opts) o = *opts;
  if (!m) CT_FAIL_NULL(CT_EINVAL, "ct_ddp_new: module m is NULL");
  if (!(o.bucket_mb >= 0) || isinf(o.bucket_mb))
    CT_FAIL_NULL(CT_EINVAL, "ct_ddp_new: bucket_mb must be a finite number >= 0 (0 means 25); got %g", o.bucket_mb);
  if (ct__dist_need_init("ct_ddp_new") != CT_OK) return NULL;
  double mb = o.bucket_mb > 0 ? o.bucket_mb : 25.0;
  int64_t cap_elems = (int64_t)(mb * 1024.0 * 1024.0 / sizeof(float));
  if (cap_elems < 1) cap_elems = 1;

  int np = ct_module_named_tensors(m, 0, NULL, 0);
  int nt = ct_module_named_tensors(m, 1, NULL, 0);
  if (np < 0 || nt < 0) return ct__error_prefix("ct_ddp_new: "), NULL;
  /* through the library's allocator (src/core/alloc.c): CT_ENOMEM with what and how many bytes, and
   * a point for the fault-injection tests */
  ct_ddp *d = ct__calloc(1, sizeof *d, "ct_ddp_new: the DDP state");
  ct_named_tensor *named = d ? ct__calloc((size_t)(nt > 0 ? nt : 1), sizeof *named, "ct_ddp_new: the tensor list") : NULL;
  ct_tensor **all = named ? ct__calloc((size_t)(nt > 0 ? nt : 1), sizeof *all, "ct_ddp_new: the tensor list") : NULL;
  if (all) d->params = ct__calloc((size_t)(np > 0 ? np : 1), sizeof *d->params, "ct_ddp_new: the parameter list");
  if (d && d->params) d->order = ct__calloc((size_t)(np > 0 ? np : 1), sizeof *d->order, "ct_ddp_new: the bucket order");
  if (d && d->order) d->start = ct__calloc((size_t)np + 1, sizeof *d->start, "ct_ddp_new: the bucket bounds");
  if (!d || !d->start) {
    ct_ddp_free(d), free(named), free(all);
    return NULL;
  }
  d->m = m, d->np = np;
  ct_module_named_tensors(m, 1, named, nt);
  int64_t total = 0, biggest = 0, cur = 0;
  for (int i = 0, k = 0; i < nt; i++) {
    all[i] = named[i].tensor;
    if (named[i].is_buffer) continue;
    if (ct_tensor_dtype(named[i].tensor) != CT_F32) {
      ct__error(CT_EDTYPE, "ct_ddp_new: parameter %s is %s; the gradient buckets hold float32 parameters", named[i].name,
                ct_dtype_name(ct_tensor_dtype(named[i].tensor)));
      ct_ddp_free(d), free(named), free(all);
      return NULL;
    }
    d->params[k++] = named[i].tensor;
  }
  /* Buckets in reverse registration order. */
  for (int j = 0; j < np; j++) {
    int i = np - 1 - j;
    int64_t n = ct_tensor_numel(d->params[i]);
    if (cur > 0 && cur + n > cap_elems) {
      d->start[++d->nb] = j;
      cur = 0;
    }
    d->order[j] = i;
    cur += n, total += n;
    if (cur > biggest) biggest = cur;
  }
  if (np > 0) d->start[++d->nb] = np;

  /* Ranks that disagree fail here, all of them, rather than hang in an all-reduce later. */
  int64_t mx[3] = {np, total, d->nb}, mn[3] = {np, total, d->nb};
  ct_status s = ct__dist_allreduce_i64(mx, 3, 1, "ct_ddp_new");
  if (s == CT_OK) s = ct__dist_allreduce_i64(mn, 3, 0, "ct_ddp_new");
  if (s == CT_OK && memcmp(mx, mn, sizeof mx) != 0)
    s = ct__error(CT_EINVAL,
                  "ct_ddp_new: the ranks hold different models: parameters %lld..%lld, elements %lld..%lld, buckets "
                  "%lld..%lld across ranks (this rank, %d: %d, %lld, %d); every rank must build the same model with the "
                  "same bucket_mb",
                  (long long)mn[0], (long long)mx[0], (long long)mn[1], (long long)mx[1], (long long)mn[2],
                  (long long)mx[2], ct_dist_rank(), np, (long long)total, d->nb);
  if (s == CT_OK) {
    d->buf = ct__malloc((size_t)(biggest > 0 ? biggest : 1) * sizeof(float), "ct_ddp_new: the bucket buffer");
    if (!d->buf) s = ct_last_status();
  }
  if (s == CT_OK) {
    ct_no_grad_begin(); /* writing into leaves that require grad */
    s = ct_dist_broadcast(all, nt, 0);
    ct_no_grad_end();
    if (s != CT_OK) ct__error_prefix("ct_ddp_new: broadcasting rank 0's parameters and buffers: ");
  }
  free(named), free(all);
  if (s != CT_OK) {
    ct_ddp_free(d);
    return NULL;
  }
  return d;
}

/* The gradient of parameter i as a CPU float32 contiguous pointer, or NULL when it must go through
 * ct_to_host / ct_copy_ (another device, or strided). */
static float *direct(ct_tensor *g) {
  if (ct_tensor_device(g).kind != CT_CPU || ct_tensor_dtype(g) != CT_F32 || !ct_tensor_is_contiguous(g)) return NULL;
  return ct_tensor_data(g);
}

static ct_status unpack(ct_tensor *g, const float *src) {
  float *p = direct(g);
  int64_t n = ct_tensor_numel(g);
  if (p) {
    memcpy(p, src, (size_t)n * sizeof(float));
    return CT_OK;
  }
  ct_tensor *h = ct_from_host(src, ct_tensor_ndim(g), ct_tensor_shape(g), CT_F32, CT_DEVICE_CPU);
  if (!h) return ct_last_status();
  ct__untrack(h);
  ct_status s = ct_copy_(g, h);
  ct_tensor_free(h);
  return s;
}

ct_status ct_ddp_sync_grads(ct_ddp *d) {
  if (!d) return ct__null_status("ct_ddp_sync_grads", "d");
  ct_status s = ct__dist_need_init("ct_ddp_sync_grads");
  int world = ct_dist_world_size();
  for (int b = 0; s == CT_OK && b < d->nb; b++) {
    int64_t off = 0;
    for (int j = d->start[b]; s == CT_OK && j < d->start[b + 1]; j++) {
      ct_tensor *g = ct_grad(d->params[d->order[j]]);
      if (!g) {
        ct_clear_error();
        return ct__error(CT_EAUTOGRAD,
                         "ct_ddp_sync_grads: parameter %d (registration order) has no gradient on rank %d; every "
                         "parameter must take part in every step (DDP's find_unused_parameters is not supported)",
                         d->order[j], ct_dist_rank());
      }
      int64_t n = ct_tensor_numel(g);
      const float *p = direct(g);
      if (p) memcpy(d->buf + off, p, (size_t)n * sizeof(float));
      else s = ct_to_host(g, d->buf + off, (size_t)n * sizeof(float), CT_F32);
      off += n;
    }
    if (s == CT_OK) s = ct__dist_allreduce_sum(d->buf, off, CT_F32, "ct_ddp_sync_grads");
    float inv = 1.0f / (float)world;
    for (int64_t i = 0; s == CT_OK && i < off; i++) d->buf[i] *= inv;
    off = 0;
    for (int j = d->start[b]; s == CT_OK && j < d->start[b + 1]; j++) {
      ct_tensor *g = ct_grad(d->params[d->order[j]]);
      s = unpack(g, d->buf + off);
      off += ct_tensor_numel(g);
    }
  }
  return s;
}
