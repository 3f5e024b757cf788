/* src/dist/ddp_nccl.c: DDP's gradient buckets on a CUDA device, all-reduced by NCCL (issue 10,
 * part 7). ddp.c calls these when every parameter lives on one CUDA device and cuttle was built
 * with NCCL and MPI; otherwise ct__ddp_nccl_new gives NULL and ddp.c reduces on the host.
 *
 * The communicator is bootstrapped over MPI, as llm.c's multi-GPU trainer does: rank 0 makes an
 * ncclUniqueId, ct_dist_broadcast sends its bytes to every rank, and each rank joins with its rank
 * and its device. Each bucket is a flat float32 tensor on the device: the gradients are copied
 * into it (device to device, on the compute stream), NCCL averages it in place (ncclAvg) on the
 * communicator's own stream, ordered after the packing and before later compute by events
 * (src/backend/cuda/nccl.cu), and the mean is copied back into the gradients. The host waits once
 * per step, bounded by ct_dist_timeout(); NCCL cannot say which rank is missing, so that error
 * names the wait, not the rank.
 *
 * Compiled and linked wherever NCCL is found; never run (no machine here has a GPU). */
#include "dist/dist_internal.h"

#include <stdlib.h>
#include <string.h>

#if defined(CUTTLE_WITH_NCCL) && defined(CUTTLE_WITH_MPI)
#include "backend/cuda/nccl.h"

struct ct__ddp_nccl {
  ct__nccl_comm *comm;
  int nb;
  ct_tensor **flat; /* (nb) float32 buckets on the device */
};

void ct__ddp_nccl_free(ct__ddp_nccl *n) {
  if (!n) return;
  for (int k = 0; n->flat && k < n->nb; k++) ct_tensor_free(n->flat[k]);
  free(n->flat);
  ct__nccl_comm_free(n->comm);
  free(n);
}

ct_status ct__ddp_nccl_new(ct_tensor *const *params, int np, const int64_t *bucket_numel, int nb, ct__ddp_nccl **out) {
  *out = NULL;
  if (np == 0) return CT_OK;
  ct_device dev = ct_tensor_device(params[0]);
  if (dev.kind != CT_CUDA) return CT_OK;
  for (int i = 1; i < np; i++)
    if (!ct_device_eq(ct_tensor_device(params[i]), dev)) return CT_OK; /* the host path copies each */
  /* the bootstrap: rank 0's unique id to every rank, over MPI */
  int64_t idn = CT_NCCL_ID_BYTES;
  ct_tensor *id = ct_zeros(1, &idn, CT_U8, CT_DEVICE_CPU);
  if (!id) return ct_last_status();
  ct__untrack(id);
  ct_status s = ct_dist_rank() == 0 ? ct__nccl_unique_id(ct_tensor_data(id)) : CT_OK;
  if (s == CT_OK) s = ct_dist_broadcast(&id, 1, 0);
  ct__ddp_nccl *n = s == CT_OK ? ct__calloc(1, sizeof *n, "ct_ddp_new: the NCCL buckets") : NULL;
  if (s == CT_OK && !n) s = ct_last_status();
  if (s == CT_OK) {
    n->nb = nb;
    n->comm = ct__nccl_comm_new(ct_tensor_data(id), ct_dist_world_size(), ct_dist_rank(), dev.index);
    if (!n->comm) s = ct_last_status();
  }
  ct_tensor_free(id);
  if (s == CT_OK && !(n->flat = ct__calloc((size_t)(nb > 0 ? nb : 1), sizeof *n->flat, "ct_ddp_new: the NCCL buckets")))
    s = ct_last_status();
  for (int k = 0; s == CT_OK && k < nb; k++) {
    n->flat[k] = ct_zeros(1, &bucket_numel[k], CT_F32, dev);
    if (!n->flat[k]) s = ct_last_status();
    else ct__untrack(n->flat[k]);
  }
  if (s != CT_OK) {
    ct__ddp_nccl_free(n);
    return s;
  }
  *out = n;
  return CT_OK;
}

/* dst = src element for element, both float32 on the device (a view of the bucket and a gradient,
 * or the reverse), reshaped to one dimension. */
static ct_status copy_flat(ct_tensor *bucket, int64_t off, ct_tensor *g, int into_bucket) {
  int64_t n = ct_tensor_numel(g);
  ct_tensor *part = ct_narrow(bucket, 0, off, n);
  ct_tensor *gflat = part ? ct_reshape(g, 1, &n) : NULL;
  ct_status s = gflat ? (into_bucket ? ct_copy_(part, gflat) : ct_copy_(gflat, part)) : ct_last_status();
  ct_tensor_free(gflat), ct_tensor_free(part);
  return s;
}

ct_status ct__ddp_nccl_launch(ct__ddp_nccl *n, int k, ct_tensor *const *grads, int count) {
  int64_t off = 0;
  ct_status s = CT_OK;
  ct_no_grad_begin();
  for (int j = 0; s == CT_OK && j < count; j++) {
    s = copy_flat(n->flat[k], off, grads[j], 1);
    off += ct_tensor_numel(grads[j]);
  }
  ct_no_grad_end();
  if (s != CT_OK) return s;
  /* The bucket's device address (ct_tensor_data gives NULL for a tensor off the CPU). */
  return ct__nccl_all_reduce(n->comm, ct__ptr(n->flat[k]), ct_tensor_numel(n->flat[k]), CT_F32, 1);
}

ct_status ct__ddp_nccl_wait(ct__ddp_nccl *n) { return ct__nccl_wait(n->comm, ct_dist_timeout()); }

ct_status ct__ddp_nccl_unpack(ct__ddp_nccl *n, int k, ct_tensor *const *grads, int count) {
  int64_t off = 0;
  ct_status s = CT_OK;
  ct_no_grad_begin();
  for (int j = 0; s == CT_OK && j < count; j++) {
    s = copy_flat(n->flat[k], off, grads[j], 0);
    off += ct_tensor_numel(grads[j]);
  }
  ct_no_grad_end();
  return s;
}

#else /* no NCCL: ddp.c never gets a handle */

void ct__ddp_nccl_free(ct__ddp_nccl *n) { (void)n; }

ct_status ct__ddp_nccl_new(ct_tensor *const *params, int np, const int64_t *bucket_numel, int nb, ct__ddp_nccl **out) {
  (void)params, (void)np, (void)bucket_numel, (void)nb;
  *out = NULL;
  return CT_OK;
}

ct_status ct__ddp_nccl_launch(ct__ddp_nccl *n, int k, ct_tensor *const *grads, int count) {
  (void)n, (void)k, (void)grads, (void)count;
  return ct__error(CT_EUNSUPPORTED, "ct_ddp: cuttle was built without NCCL");
}

ct_status ct__ddp_nccl_wait(ct__ddp_nccl *n) {
  (void)n;
  return ct__error(CT_EUNSUPPORTED, "ct_ddp: cuttle was built without NCCL");
}

ct_status ct__ddp_nccl_unpack(ct__ddp_nccl *n, int k, ct_tensor *const *grads, int count) {
  (void)n, (void)k, (void)grads, (void)count;
  return ct__error(CT_EUNSUPPORTED, "ct_ddp: cuttle was built without NCCL");
}

#endif
