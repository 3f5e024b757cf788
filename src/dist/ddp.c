/* src/dist/ddp.c: DistributedDataParallel: the start-up checks and broadcast, and the gradient
 * buckets all-reduced during backward.
 *
 * The buckets follow torch.nn.parallel.DistributedDataParallel's layout: parameters taken in
 * reverse order of registration (backward produces the last layer's gradients first), a bucket
 * closed when the next parameter would take it over bucket_mb MiB. Each bucket owns a float32
 * buffer of its size (as DDP's flat bucket views), so that several can be in flight at once.
 *
 * The overlap (DDP's Reducer): ct_ddp_new registers a post-accumulate-grad hook on every parameter
 * (autograd.h). When a parameter's gradient is final for the pass, its hook marks it ready; when
 * the last parameter of a bucket is ready, the hook packs the bucket and starts its all-reduce with
 * MPI_Iallreduce, while backward goes on to the earlier layers. Buckets start in index order only
 * (a ready bucket waits for the ones before it), so every rank starts the same collectives in the
 * same order, as MPI requires. Open MPI has no progress thread by default, so each hook also tests
 * the all-reduces in flight, which moves them on during backward. ct_ddp_sync_grads starts the
 * buckets no hook started (grad sync was off during backward, or no backward ran since), waits for
 * all of them (each wait bounded by ct_dist_timeout()), scales by 1/world and unpacks into the
 * gradients. With grad sync off (no_sync) the hooks do nothing and ct_ddp_sync_grads leaves the
 * gradients alone. */
#include "dist/dist_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int64_t numel;
  float *buf;      /* (numel) the packed gradients */
  ct__dist_op *op; /* the all-reduce in flight or done, NULL before it starts */
  int pending;     /* parameters not yet ready in this pass */
} bucket;

typedef struct {
  struct ct_ddp *d;
  int i; /* parameter index, registration order */
} hook_ctx;

struct ct_ddp {
  ct_module *m;
  int np;             /* parameters */
  ct_tensor **params; /* (np) borrowed from m, registration order */
  int *order;         /* (np) parameter indices, reverse registration order, bucket after bucket */
  int nb;             /* buckets */
  int *start;         /* (nb + 1) bucket b is order[start[b] .. start[b + 1]) */
  int *bucket_of;     /* (np) by parameter index */
  int *ready;         /* (np) the parameter's hook fired in this pass */
  bucket *b;          /* (nb) */
  hook_ctx *hc;       /* (np) the hooks' ctx; hooked[i] says whether i's is registered */
  int *hooked;
  int next;           /* the next bucket to start */
  int grad_sync;      /* 0 while ct_ddp_set_grad_sync(d, 0): no all-reduce */
  ct_status hook_status; /* the first error in a hook since the last sync, and its message */
  char hook_msg[512];
  ct_ddp_stats stats;
  ct_tensor **bufs;   /* (nbuf) m's buffers, borrowed, registration order: ct_ddp_forward broadcasts them */
  int nbuf;
  int local_buffers;  /* ct_ddp_opts.local_buffers */
  int fwd_sync;       /* torch's require_forward_param_sync: the last forward ran with grad and grad sync */
  ct__ddp_nccl *nccl; /* every parameter on one CUDA device with NCCL built in: the buckets live there
                       * and NCCL reduces them (ddp_nccl.c); NULL: the host buffers and MPI */
  int nccl_started;   /* buckets NCCL started in this pass */
  int progress_thread; /* ct_ddp_opts.progress_thread */
  int progressing;    /* the progress thread runs for this pass's all-reduces (ct__dist_progress_begin) */
  ct_tensor **grads;  /* (np) scratch: one bucket's gradients for the NCCL calls */
};

static void grad_hook(ct_tensor *leaf, void *ctx);

void ct_ddp_free(ct_ddp *d) {
  if (!d) return;
  if (d->progressing) ct__dist_progress_end();
  for (int i = 0; d->hooked && i < d->np; i++)
    if (d->hooked[i]) ct_tensor_remove_post_accumulate_grad_hook(d->params[i], grad_hook, &d->hc[i]);
  for (int k = 0; d->b && k < d->nb; k++) {
    bucket *b = &d->b[k];
    /* An all-reduce started and never waited for (backward without a sync): wait for it, bounded,
     * since MPI writes into the buffer; one that cannot complete keeps its buffer (the job ends). */
    if (b->op && !ct__dist_op_release(b->op)) {
      if (ct__dist_wait(b->op, "ct_ddp_free") != CT_OK || !ct__dist_op_release(b->op)) continue;
    }
    free(b->buf);
  }
  ct__ddp_nccl_free(d->nccl);
  free(d->grads);
  free(d->params), free(d->order), free(d->start), free(d->bucket_of), free(d->ready), free(d->b), free(d->hc);
  free(d->hooked), free(d->bufs);
  free(d);
}

int ct_ddp_num_buckets(const ct_ddp *d) {
  if (!d) return ct__null_status("ct_ddp_num_buckets", "d"), -1;
  return d->nb;
}

ct_status ct_ddp_set_grad_sync(ct_ddp *d, int enabled) {
  if (!d) return ct__null_status("ct_ddp_set_grad_sync", "d");
  d->grad_sync = enabled != 0;
  return CT_OK;
}

ct_status ct_ddp_get_stats(const ct_ddp *d, ct_ddp_stats *out) {
  if (!d) return ct__null_status("ct_ddp_get_stats", "d");
  if (!out) return ct__null_status("ct_ddp_get_stats", "out");
  *out = d->stats;
  return CT_OK;
}

/* "float32 (6, 4)" from a signature row: dtype, ndim, dims. */
static void sig_str(const int64_t *sig, char *out, size_t cap) {
  if (sig[0] < 0) {
    snprintf(out, cap, "absent");
    return;
  }
  size_t len = (size_t)snprintf(out, cap, "%s (", ct_dtype_name((ct_dtype)sig[0]));
  for (int k = 0; k < sig[1] && len < cap; k++)
    len += (size_t)snprintf(out + len, cap - len, "%s%lld", k ? ", " : "", (long long)sig[2 + k]);
  if (len < cap) snprintf(out + len, cap - len, ")");
}

#define SIG (2 + CT_MAX_DIMS)

/* Ranks that disagree fail here, every one of them with the same message, rather than hang in an
 * all-reduce later: gather every rank's parameter count and bucket_mb, then every parameter's dtype
 * and shape, and name the first parameter that differs with each rank's version of it.
 * named/nt: this rank's tensors (parameters and buffers), for the parameter's name. */
static ct_status check_ranks(int np, double mb, const ct_named_tensor *named, int nt) {
  const char *op = "ct_ddp_new";
  int world = ct_dist_world_size(), rank = ct_dist_rank();
  int64_t head[2], *heads = ct__calloc((size_t)world * 2, sizeof *heads, "ct_ddp_new: the ranks' parameter counts");
  if (!heads) return ct_last_status();
  memcpy(&head[1], &mb, sizeof mb);
  head[0] = np;
  ct_status s = ct__dist_allgather_i64(head, 2, heads, op, "start-up check of the parameter counts");
  int64_t maxnp = 0;
  for (int r = 0; s == CT_OK && r < world; r++) maxnp = heads[2 * r] > maxnp ? heads[2 * r] : maxnp;
  int64_t *mine = NULL, *all = NULL;
  if (s == CT_OK) {
    mine = ct__calloc((size_t)(maxnp > 0 ? maxnp : 1) * SIG, sizeof *mine, "ct_ddp_new: the parameter shapes");
    all = mine ? ct__calloc((size_t)world * (size_t)(maxnp > 0 ? maxnp : 1) * SIG, sizeof *all,
                            "ct_ddp_new: the ranks' parameter shapes") : NULL;
    if (!all) s = ct_last_status();
  }
  if (s == CT_OK) {
    for (int64_t i = 0; i < maxnp; i++) mine[i * SIG] = -1;
    for (int i = 0, k = 0; i < nt; i++) {
      if (named[i].is_buffer) continue;
      ct_tensor *t = named[i].tensor;
      int64_t *row = mine + (int64_t)k++ * SIG;
      row[0] = ct_tensor_dtype(t), row[1] = ct_tensor_ndim(t);
      for (int j = 0; j < ct_tensor_ndim(t); j++) row[2 + j] = ct_tensor_shape(t)[j];
    }
    s = ct__dist_allgather_i64(mine, (int)(maxnp * SIG), all, op, "start-up check of the parameter shapes");
  }
  /* The first parameter whose signature differs between ranks. */
  int64_t bad = -1;
  for (int64_t i = 0; s == CT_OK && i < maxnp && bad < 0; i++)
    for (int r = 1; r < world && bad < 0; r++)
      if (memcmp(all + (r * maxnp + i) * SIG, all + i * SIG, SIG * sizeof *all) != 0) bad = i;
  if (s == CT_OK && bad >= 0) {
    char msg[1024], one[160];
    const char *name = "";
    for (int i = 0, k = 0; i < nt; i++)
      if (!named[i].is_buffer && k++ == bad) name = named[i].name;
    size_t len = *name ? (size_t)snprintf(msg, sizeof msg, "parameter %lld in registration order (\"%s\" on this rank) is",
                                          (long long)bad, name)
                       : (size_t)snprintf(msg, sizeof msg, "parameter %lld in registration order is", (long long)bad);
    for (int r = 0; r < world && len < sizeof msg; r++) {
      if (r >= 8 && r < world - 1) { /* first 8 ranks and the last */
        if (r == 8) len += (size_t)snprintf(msg + len, sizeof msg - len, "; ...");
        continue;
      }
      sig_str(all + (r * maxnp + bad) * SIG, one, sizeof one);
      len += (size_t)snprintf(msg + len, sizeof msg - len, "%s %s on rank %d", r ? "," : "", one, r);
    }
    char counts[256];
    size_t cl = 0;
    int differ = 0;
    for (int r = 1; r < world; r++) differ |= heads[2 * r] != heads[0];
    counts[0] = 0;
    for (int r = 0; differ && r < world && r < 8 && cl < sizeof counts; r++)
      cl += (size_t)snprintf(counts + cl, sizeof counts - cl, "%s%lld on rank %d", r ? ", " : "; parameter counts: ",
                             (long long)heads[2 * r], r);
    s = ct__error(CT_EINVAL, "ct_ddp_new: the ranks hold different models: %s%s (this is rank %d); every rank must build "
                  "the same model, with the same layers, shapes and dtypes in the same order", msg, counts, rank);
  }
  for (int r = 1; s == CT_OK && r < world; r++)
    if (memcmp(&heads[2 * r + 1], &heads[1], sizeof(int64_t)) != 0) {
      double a, b;
      memcpy(&a, &heads[1], sizeof a), memcpy(&b, &heads[2 * r + 1], sizeof b);
      s = ct__error(CT_EINVAL, "ct_ddp_new: the ranks ask for different buckets: bucket_mb %g on rank 0, %g on rank %d "
                    "(this is rank %d); every rank must pass the same bucket_mb", a, b, r, rank);
    }
  free(heads), free(mine), free(all);
  return s;
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
  size_t np1 = (size_t)(np > 0 ? np : 1);
  ct_ddp *d = ct__calloc(1, sizeof *d, "ct_ddp_new: the DDP state");
  ct_named_tensor *named = d ? ct__calloc((size_t)(nt > 0 ? nt : 1), sizeof *named, "ct_ddp_new: the tensor list") : NULL;
  ct_tensor **all = named ? ct__calloc((size_t)(nt > 0 ? nt : 1), sizeof *all, "ct_ddp_new: the tensor list") : NULL;
  if (all) d->params = ct__calloc(np1, sizeof *d->params, "ct_ddp_new: the parameter list");
  if (d && d->params) d->order = ct__calloc(np1, sizeof *d->order, "ct_ddp_new: the bucket order");
  if (d && d->order) d->start = ct__calloc((size_t)np + 1, sizeof *d->start, "ct_ddp_new: the bucket bounds");
  if (d && d->start) d->bucket_of = ct__calloc(np1, sizeof *d->bucket_of, "ct_ddp_new: the bucket of each parameter");
  if (d && d->bucket_of) d->ready = ct__calloc(np1, sizeof *d->ready, "ct_ddp_new: the ready flags");
  if (d && d->ready) d->hc = ct__calloc(np1, sizeof *d->hc, "ct_ddp_new: the gradient hooks");
  if (d && d->hc) d->hooked = ct__calloc(np1, sizeof *d->hooked, "ct_ddp_new: the gradient hooks");
  if (d && d->hooked) d->bufs = ct__calloc((size_t)(nt - np > 0 ? nt - np : 1), sizeof *d->bufs, "ct_ddp_new: the buffer list");
  if (!d || !d->bufs) {
    ct_ddp_free(d), free(named), free(all);
    return NULL;
  }
  d->m = m, d->np = np, d->grad_sync = 1, d->progress_thread = o.progress_thread != 0;
  d->local_buffers = o.local_buffers != 0, d->fwd_sync = 1;
  ct_module_named_tensors(m, 1, named, nt);
  int64_t cur = 0;
  for (int i = 0, k = 0; i < nt; i++) {
    all[i] = named[i].tensor;
    if (!named[i].is_buffer) d->params[k++] = named[i].tensor;
    else d->bufs[d->nbuf++] = named[i].tensor;
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
    d->bucket_of[i] = d->nb;
    cur += n;
  }
  if (np > 0) d->start[++d->nb] = np;

  ct_status s = check_ranks(np, mb, named, nt);
  for (int i = 0; s == CT_OK && i < np; i++)
    if (ct_tensor_dtype(d->params[i]) != CT_F32) {
      const char *name = "?";
      for (int t = 0, k = 0; t < nt; t++)
        if (!named[t].is_buffer && k++ == i) name = named[t].name;
      s = ct__error(CT_EDTYPE, "ct_ddp_new: parameter %s is %s; the gradient buckets hold float32 parameters", name,
                    ct_dtype_name(ct_tensor_dtype(d->params[i])));
    }
  if (s == CT_OK) {
    d->b = ct__calloc((size_t)(d->nb > 0 ? d->nb : 1), sizeof *d->b, "ct_ddp_new: the buckets");
    if (!d->b) s = ct_last_status();
  }
  for (int k = 0; s == CT_OK && k < d->nb; k++) {
    for (int j = d->start[k]; j < d->start[k + 1]; j++) d->b[k].numel += ct_tensor_numel(d->params[d->order[j]]);
    d->b[k].pending = d->start[k + 1] - d->start[k];
    size_t bytes = (size_t)(d->b[k].numel > 0 ? d->b[k].numel : 1) * sizeof(float);
    d->b[k].buf = ct__malloc(bytes, "ct_ddp_new: a bucket's buffer");
    if (!d->b[k].buf) s = ct_last_status();
  }
  if (s == CT_OK && np > 0 && ct_tensor_device(d->params[0]).kind == CT_CUDA) {
    int64_t *numel = ct__calloc((size_t)(d->nb > 0 ? d->nb : 1), sizeof *numel, "ct_ddp_new: the bucket sizes");
    d->grads = numel ? ct__calloc(np1, sizeof *d->grads, "ct_ddp_new: a bucket's gradient list") : NULL;
    if (!d->grads) s = ct_last_status();
    for (int k = 0; s == CT_OK && k < d->nb; k++) numel[k] = d->b[k].numel;
    if (s == CT_OK) s = ct__ddp_nccl_new(d->params, np, numel, d->nb, &d->nccl);
    free(numel);
  }
  if (s == CT_OK) {
    ct_no_grad_begin(); /* writing into leaves that require grad */
    /* torch's _sync_module_states: the buffers too, unless broadcast_buffers=False */
    s = d->local_buffers ? ct_dist_broadcast(d->params, np, 0) : ct_dist_broadcast(all, nt, 0);
    ct_no_grad_end();
    if (s != CT_OK) ct__error_prefix("ct_ddp_new: broadcasting rank 0's parameters and buffers: ");
  }
  /* A parameter that does not require grad gets no hook; its bucket then starts in ct_ddp_sync_grads. */
  for (int i = 0; s == CT_OK && i < np; i++) {
    d->hc[i] = (hook_ctx){d, i};
    if (!ct_requires_grad(d->params[i])) continue;
    s = ct_tensor_register_post_accumulate_grad_hook(d->params[i], grad_hook, &d->hc[i]);
    if (s == CT_OK) d->hooked[i] = 1;
  }
  free(named), free(all);
  if (s != CT_OK) {
    ct_ddp_free(d);
    return NULL;
  }
  return d;
}

/* The gradient as a CPU float32 contiguous pointer, or NULL when it must go through ct_to_host /
 * ct_copy_ (another device, or strided). */
static float *direct(ct_tensor *g) {
  if (ct_tensor_device(g).kind != CT_CPU || ct_tensor_dtype(g) != CT_F32 || !ct_tensor_is_contiguous(g)) return NULL;
  return ct_tensor_data(g);
}

/* Copy a bucket's share src (the sum over the ranks) into gradient g, times scale (1 / world: the
 * mean), in one pass. */
static ct_status unpack(ct_tensor *g, float *src, float scale) {
  float *p = direct(g);
  int64_t n = ct_tensor_numel(g);
  if (p) {
    for (int64_t i = 0; i < n; i++) p[i] = src[i] * scale;
    return CT_OK;
  }
  for (int64_t i = 0; i < n; i++) src[i] *= scale;
  ct_tensor *h = ct_from_host(src, ct_tensor_ndim(g), ct_tensor_shape(g), CT_F32, CT_DEVICE_CPU);
  if (!h) return ct_last_status();
  ct__untrack(h);
  ct_status s = ct_copy_(g, h);
  ct_tensor_free(h);
  return s;
}

/* Pack bucket k's gradients and start its all-reduce. op names the caller in errors. */
static ct_status launch_nccl(ct_ddp *d, int k, int from_hook, const char *op);

static ct_status launch(ct_ddp *d, int k, int from_hook, const char *op) {
  if (d->nccl) return launch_nccl(d, k, from_hook, op);
  bucket *b = &d->b[k];
  int64_t off = 0;
  for (int j = d->start[k]; j < d->start[k + 1]; j++) {
    ct_tensor *g = ct_grad(d->params[d->order[j]]);
    if (!g) {
      ct_clear_error();
      return ct__error(CT_EAUTOGRAD,
                       "%s: parameter %d (registration order) has no gradient on rank %d; every parameter must take "
                       "part in every step (DDP's find_unused_parameters is not supported)",
                       op, d->order[j], ct_dist_rank());
    }
    int64_t n = ct_tensor_numel(g);
    const float *p = direct(g);
    if (p) memcpy(b->buf + off, p, (size_t)n * sizeof(float));
    else {
      ct_status s = ct_to_host(g, b->buf + off, (size_t)n * sizeof(float), CT_F32);
      if (s != CT_OK) return s;
    }
    off += n;
  }
  char what[64];
  snprintf(what, sizeof what, "all-reduce of bucket %d", k);
  ct_status s = ct__dist_iallreduce_sum(b->buf, b->numel, CT_F32, op, what, &b->op);
  if (s != CT_OK) return s;
  if (from_hook) d->stats.buckets_started_in_backward++;
  else d->stats.buckets_started_in_sync++;
  if (from_hook && d->progress_thread && !d->progressing) ct__dist_progress_begin(), d->progressing = 1;
  return CT_OK;
}

/* Bucket k's gradients into d->grads, for NCCL: CT_EAUTOGRAD when one is missing. */
static ct_status bucket_grads(ct_ddp *d, int k, const char *op) {
  for (int j = d->start[k]; j < d->start[k + 1]; j++) {
    d->grads[j - d->start[k]] = ct_grad(d->params[d->order[j]]);
    if (!d->grads[j - d->start[k]]) {
      ct_clear_error();
      return ct__error(CT_EAUTOGRAD, "%s: parameter %d (registration order) has no gradient on rank %d; every parameter "
                                     "must take part in every step", op, d->order[j], ct_dist_rank());
    }
  }
  return CT_OK;
}

/* Pack bucket k on the device and start NCCL's mean of it on the communicator's stream. */
static ct_status launch_nccl(ct_ddp *d, int k, int from_hook, const char *op) {
  ct_status s = bucket_grads(d, k, op);
  if (s == CT_OK) s = ct__ddp_nccl_launch(d->nccl, k, d->grads, d->start[k + 1] - d->start[k]);
  if (s != CT_OK) return s;
  d->nccl_started++;
  if (from_hook) d->stats.buckets_started_in_backward++;
  else d->stats.buckets_started_in_sync++;
  return CT_OK;
}

/* ct_ddp_sync_grads' NCCL path: start the buckets no hook started, wait once (bounded), unpack the
 * means (NCCL averaged them: no scaling). */
static ct_status sync_nccl(ct_ddp *d, const char *op) {
  ct_status s = CT_OK;
  while (s == CT_OK && d->next < d->nb) s = launch(d, d->next++, 0, op);
  double w0 = ct__dist_now();
  if (s == CT_OK) s = ct__ddp_nccl_wait(d->nccl);
  d->stats.wait_s += ct__dist_now() - w0;
  for (int k = 0; s == CT_OK && k < d->nb; k++) {
    s = bucket_grads(d, k, op);
    if (s == CT_OK) s = ct__ddp_nccl_unpack(d->nccl, k, d->grads, d->start[k + 1] - d->start[k]);
  }
  d->nccl_started = 0;
  return s;
}

/* Start, in index order, every bucket whose parameters are all ready. */
static ct_status launch_ready(ct_ddp *d, const char *op) {
  ct_status s = CT_OK;
  while (s == CT_OK && d->next < d->nb && d->b[d->next].pending == 0) s = launch(d, d->next++, 1, op);
  return s;
}

/* Move the all-reduces in flight on (Open MPI progresses only inside MPI calls). */
static ct_status progress(ct_ddp *d, const char *op) {
  ct_status s = CT_OK;
  for (int k = 0; s == CT_OK && k < d->next; k++) {
    int done = 0;
    if (d->b[k].op && !ct__dist_op_done(d->b[k].op)) {
      s = ct__dist_test(d->b[k].op, &done, op);
      if (done) d->stats.buckets_done_in_backward++;
    }
  }
  return s;
}

static void grad_hook(ct_tensor *leaf, void *ctx) {
  (void)leaf;
  hook_ctx *hc = ctx;
  ct_ddp *d = hc->d;
  const char *op = "ct_ddp_sync_grads (a gradient hook during backward)";
  if (!d->grad_sync || d->hook_status != CT_OK) return;
  ct_status s = CT_OK;
  if (d->ready[hc->i])
    s = ct__error(CT_EAUTOGRAD, "%s: the gradient of parameter %d (registration order) was completed twice without "
                  "ct_ddp_sync_grads in between; call ct_ddp_sync_grads after every backward, or turn grad sync off "
                  "(ct_ddp_set_grad_sync) for the backward passes that accumulate", op, hc->i);
  else {
    d->ready[hc->i] = 1;
    d->b[d->bucket_of[hc->i]].pending--;
    s = launch_ready(d, op);
    if (s == CT_OK) s = progress(d, op);
  }
  if (s != CT_OK) {
    d->hook_status = s;
    snprintf(d->hook_msg, sizeof d->hook_msg, "%s", ct_last_error());
  }
}

/* Forget this step: no parameter ready, no bucket started. */
static void reset_step(ct_ddp *d) {
  if (d->progressing) ct__dist_progress_end(), d->progressing = 0;
  memset(d->ready, 0, (size_t)d->np * sizeof *d->ready);
  for (int k = 0; k < d->nb; k++) d->b[k].pending = d->start[k + 1] - d->start[k];
  d->next = 0;
  d->hook_status = CT_OK;
  d->hook_msg[0] = 0;
}

ct_status ct_ddp_sync_grads(ct_ddp *d) {
  const char *op = "ct_ddp_sync_grads";
  if (!d) return ct__null_status(op, "d");
  ct_status s = ct__dist_need_init(op);
  if (s != CT_OK || !d->grad_sync) return s;
  double t0 = ct__dist_now();
  if (d->hook_status != CT_OK) {
    /* A hook failed. Finish the all-reduces started (bounded) and forget the step; the gradients
     * are then only partly averaged, and the caller zeroes them. When every bucket had started (a
     * second backward without a sync: the same mistake on every rank), the ranks' collectives are
     * still in step and the group stays usable. When some never started (a missing gradient, a
     * failed copy: maybe on this rank only), this rank's next collective would be matched against
     * another rank's pending bucket: the group breaks, every later collective fails at once, and
     * the program ends the job (ct_dist_abort). */
    ct_status hs = d->hook_status;
    int out_of_step = d->next < d->nb;
    char msg[sizeof d->hook_msg];
    memcpy(msg, d->hook_msg, sizeof msg);
    for (int k = 0; k < d->next; k++)
      if (d->b[k].op && ct__dist_wait(d->b[k].op, op) == CT_OK) ct__dist_op_release(d->b[k].op), d->b[k].op = NULL;
    reset_step(d);
    ct__error(hs, "%s", msg);
    return out_of_step ? ct__dist_break(hs) : hs;
  }
  if (d->nccl) {
    s = sync_nccl(d, op);
    reset_step(d);
    d->stats.steps++;
    d->stats.sync_s += ct__dist_now() - t0;
    return s == CT_OK ? s : ct__dist_break(s);
  }
  /* The buckets no hook started, in order. A failure here (a missing gradient, a failed copy) leaves
   * this rank's collectives out of step with the others': forget the step and break the group. */
  while (s == CT_OK && d->next < d->nb) s = launch(d, d->next++, 0, op);
  if (s != CT_OK) return reset_step(d), ct__dist_break(s);
  double w0 = ct__dist_now();
  for (int k = 0; s == CT_OK && k < d->nb; k++) s = ct__dist_wait(d->b[k].op, op);
  if (s != CT_OK) return reset_step(d), s; /* a failed wait has broken the group already */
  d->stats.wait_s += ct__dist_now() - w0;
  float inv = 1.0f / (float)ct_dist_world_size();
  for (int k = 0; s == CT_OK && k < d->nb; k++) {
    bucket *b = &d->b[k];
    d->stats.allreduce_s += ct__dist_op_seconds(b->op);
    ct__dist_op_release(b->op);
    b->op = NULL;
    int64_t off = 0;
    for (int j = d->start[k]; s == CT_OK && j < d->start[k + 1]; j++) {
      ct_tensor *g = ct_grad(d->params[d->order[j]]);
      s = unpack(g, b->buf + off, inv);
      off += ct_tensor_numel(g);
    }
  }
  reset_step(d);
  d->stats.steps++;
  d->stats.sync_s += ct__dist_now() - t0;
  return s;
}

/* torch's DDP forward: _pre_forward's buffer sync when require_forward_param_sync, which the
 * previous forward's _post_forward set (grad enabled and not in no_sync; true at the start), then
 * the module, then that flag for the next forward. */
ct_tensor *ct_ddp_forward(ct_ddp *d, ct_tensor *x) {
  const char *op = "ct_ddp_forward";
  if (!d || !x) return ct__null_arg(op, !d ? "d" : "x");
  if (ct__dist_need_init(op) != CT_OK) return NULL;
  if (!d->local_buffers && d->nbuf > 0 && d->fwd_sync) {
    ct_no_grad_begin();
    ct_status s = ct_dist_broadcast(d->bufs, d->nbuf, 0);
    ct_no_grad_end();
    if (s != CT_OK) return ct__error_prefix("ct_ddp_forward: broadcasting rank 0's buffers: "), NULL;
  }
  ct_tensor *y = ct_module_forward(d->m, x);
  d->fwd_sync = ct_grad_enabled() && d->grad_sync;
  return y;
}
