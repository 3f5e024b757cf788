/* src/dist/data_parallel.c: one process, several devices (cuttle/data_parallel.h): the replicas,
 * their worker threads, the split of a batch, the sum of the gradients onto devices[0] and the
 * broadcast of the parameters back. Needs no MPI.
 *
 * Threads. ct_data_parallel_new starts one worker per device; each waits on dp->go for a new
 * generation of work (a step or a broadcast), does its replica's part in its own scope, records its
 * status and message (errors are thread-local), and counts itself done under dp->lock; the caller's
 * thread waits on dp->done until every worker has. The job's inputs (x, y, the host copies of a
 * broadcast) are written before the generation is bumped under the lock, and the workers' results
 * are read after the last one has counted itself done under it, so the lock orders them both ways.
 * While a job runs the caller's thread touches nothing the workers use.
 *
 * What the replicas share is read-only during a job (x, y, the host copies) or is the library's
 * own process-wide state, which is made for several threads: reference counts are atomic
 * (core/tensor.c), the ledger's counters are atomic (core/ledger.c), the OpenCL backend keeps one
 * context per device with its own lock around the program, the kernel table and each
 * clSetKernelArg/enqueue pair, and one lock per allocator (backend/opencl/context.c, allocator.c),
 * the pinned pool has its lock (pinned.c), and errors, scopes and grad mode are per thread. The
 * default generator's offset is advanced atomically (core/create.c), for a Dropout in a replica.
 *
 * Packing. What crosses between devices travels packed: the tensors of one dtype copied (on their
 * own device) into one flat buffer, so that a step costs one staged copy per replica and dtype
 * rather than one per tensor (each is a blocking transfer through host memory between two
 * OpenCL or CUDA devices). Packing and unpacking are copies, so the values arrive bit for bit.
 *
 * The gradient sum. After its backward, worker k >= 1 packs its gradients, copies the pack to
 * devices[0] (ct_to with CT_COPY, counted in the ledger) and drops its own gradients; the caller's
 * thread then adds them, replica after replica in index order (a fixed order, so a run is
 * reproducible), into m's gradients in place, one kernel per parameter and replica.
 *
 * The broadcast. The caller's thread packs m's parameters and buffers on devices[0] and reads the
 * pack to the host once; each worker k >= 1 copies it to its device and unpacks it there. */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include "core/internal.h"
#include "nn/module.h"
#include "ops/ops_internal.h"

#define CT_DP_MAX_DEVICES 64

enum { JOB_STEP = 1, JOB_BROADCAST = 2 };

typedef struct ct_data_parallel ct_data_parallel;

typedef struct {
  ct_data_parallel *dp;
  int k;
  ct_device dev;
  ct_module *module;   /* k == 0: the caller's m; else owned */
  ct_tensor **tensors; /* (nt) borrowed from module: parameters and buffers in ct_module_named_tensors order */
  ct_tensor **list;    /* (nt) scratch: the tensors of one pack */
  ct_dtype *grad_dt;   /* (nt) k >= 1: this step's gradient's dtype, CT_DTYPE_COUNT for none */
  ct_tensor *moved[CT_DTYPE_COUNT]; /* k >= 1: this step's packed gradients on devices[0], by dtype; owned until summed */
  pthread_t thread;
  int started;
  /* the job's results */
  ct_status status;
  char msg[1024];
  double loss;
  int64_t start, size; /* this step's shard: rows [start, start + size) */
} replica;

struct ct_data_parallel {
  ct_module *m;
  int n;
  replica *r;
  ct_data_parallel_opts opts;
  int nt;         /* parameters and buffers of m */
  int *is_buffer; /* (nt) */
  char (*names)[192];
  /* the job, guarded by lock */
  pthread_mutex_t lock;
  pthread_cond_t go, done;
  uint64_t generation;
  int pending, quit, job;
  ct_tensor *x, *y;
  int64_t batch;
  int want_loss;
  ct_tensor *host[CT_DTYPE_COUNT]; /* a broadcast's packs of m's tensors on the host, by dtype */
};

/* ---- packs: n contiguous-or-not tensors of one dtype and one device in one flat buffer */

/* Element offset .. offset + numel(like) of the 1-D flat as a tensor of like's shape (a view). */
static ct_tensor *unpack_view(ct_tensor *flat, int64_t offset, ct_tensor *like) {
  ct_tensor *part = ct_narrow(flat, 0, offset, ct_tensor_numel(like));
  ct_tensor *v = part ? ct_view(part, ct_tensor_ndim(like), ct_tensor_shape(like)) : NULL;
  ct_tensor_free(part);
  return v;
}

/* A new 1-D tensor on ts[0]'s device holding ts[0], ts[1], ... one after the other (n >= 1). */
static ct_tensor *pack(int n, ct_tensor *const *ts) {
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += ct_tensor_numel(ts[i]);
  ct_tensor *flat = ct_empty(1, &total, ct_tensor_dtype(ts[0]), ct_tensor_device(ts[0]));
  ct_status s = flat ? CT_OK : ct_last_status();
  for (int64_t i = 0, off = 0; i < n && s == CT_OK; off += ct_tensor_numel(ts[i]), i++) {
    ct_tensor *v = unpack_view(flat, off, ts[i]);
    s = v ? ct_copy_(v, ts[i]) : ct_last_status();
    ct_tensor_free(v);
  }
  if (s != CT_OK) ct_tensor_free(flat), flat = NULL;
  return flat;
}

/* ---- replicas: the same layers with their own tensors on another device */

static void free_replica_module(ct_module *c) { ct_module_free(c); }

/* A copy of src on dev: same kind and settings, each tensor copied with ct_to (a new leaf that
 * requires grad where src's does). NULL with the error set. */
static ct_module *clone(ct_module *src, ct_device dev) {
  ct_module *c = ct__module_alloc(src->kind);
  if (!c) return NULL;
  /* every setting as it is (training flag, sizes, options, a user module's forward and ctx); the
   * owned lists start empty and fill below, and a replica borrows its source's ctx (no free_ctx) */
  *c = *src;
  c->n_slots = c->cap_slots = 0, c->slot_name = NULL, c->slot = NULL, c->slot_is_buffer = NULL;
  c->n_children = c->cap_children = 0, c->child_name = NULL, c->children = NULL;
  c->type_name = NULL, c->free_ctx = NULL;
  if (src->type_name && !(c->type_name = strdup(src->type_name)))
    return ct__error(CT_ENOMEM, "out of memory copying a module's type name"), free_replica_module(c), NULL;
  for (int i = 0; i < src->n_slots; i++) {
    ct_no_grad_begin();
    ct_tensor *t = ct_to(src->slot[i], dev, CT_COPY);
    ct_no_grad_end();
    if (!t) return free_replica_module(c), NULL;
    if (ct_requires_grad(src->slot[i]) && ct_requires_grad_(t, 1) != CT_OK) {
      ct_tensor_free(t);
      return free_replica_module(c), NULL;
    }
    if (ct__module_add(c, src->slot_name[i], t, src->slot_is_buffer[i]) != CT_OK) return free_replica_module(c), NULL;
  }
  for (int i = 0; i < src->n_children; i++) {
    ct_module *ch = clone(src->children[i], dev);
    if (!ch || ct__module_add_child(c, src->child_name[i], ch) != CT_OK) return free_replica_module(c), NULL;
  }
  return c;
}

/* The replica takes m's training flags, module by module. */
static void sync_training(ct_module *dst, const ct_module *src) {
  dst->training = src->training;
  for (int i = 0; i < src->n_children && i < dst->n_children; i++) sync_training(dst->children[i], src->children[i]);
}

/* ---- the worker threads */

static void record_error(replica *r, ct_status s) {
  r->status = s < 0 ? s : CT_EBACKEND;
  snprintf(r->msg, sizeof r->msg, "%s", ct_last_error()[0] ? ct_last_error() : "failed without a message");
}

/* Replica k's forward, loss and backward on its shard; for k >= 1 its gradients then go to
 * devices[0]. Runs on the replica's thread. */
static ct_status run_step(ct_data_parallel *dp, replica *r) {
  if (r->size == 0) return CT_OK;
  ct_status s = ct_scope_begin();
  if (s != CT_OK) return s;
  ct_tensor *xs = ct_narrow(dp->x, 0, r->start, r->size), *ys = ct_narrow(dp->y, 0, r->start, r->size);
  ct_tensor *xk = xs ? ct_to(xs, r->dev, 0) : NULL, *yk = ys ? ct_to(ys, r->dev, 0) : NULL;
  /* the replica's own autocast region (regions are per thread), around forward and loss only */
  int ac = dp->opts.autocast && xk && yk;
  if (ac && ct_autocast_begin(r->dev.kind, dp->opts.autocast_dtype, 1) != CT_OK) xk = NULL;
  ct_tensor *out = xk && yk ? ct_module_forward(r->module, xk) : NULL;
  ct_tensor *loss = NULL;
  if (out) loss = dp->opts.loss ? dp->opts.loss(out, yk, r->k, dp->opts.loss_ctx) : ct_cross_entropy(out, yk, CT_REDUCTION_MEAN, 0);
  if (ac && xk) ct_autocast_end(); /* cannot fail: this thread's region is open */
  if (!loss) s = ct_last_status() != CT_OK ? ct_last_status() : ct__error(CT_EINVAL, "the loss function returned NULL without an error");
  else if (ct_tensor_numel(loss) != 1 || !ct_dtype_is_floating(ct_tensor_dtype(loss))) {
    char a[96];
    s = ct__error(CT_EINVAL, "the loss must be a one-element floating tensor (the mean over the shard), got shape %s of %s",
                  ct_shape_str(loss, a, sizeof a), ct_dtype_name(ct_tensor_dtype(loss)));
  }
  ct_tensor *w = s == CT_OK ? ct_mul_scalar(loss, (double)r->size / (double)dp->batch) : NULL;
  if (s == CT_OK) s = w ? ct_backward(w) : ct_last_status();
  if (s == CT_OK && dp->want_loss) {
    r->loss = ct_item(w);
    if (isnan(r->loss) && ct_last_status() != CT_OK) s = ct_last_status();
  }
  if (r->k > 0) {
    ct_no_grad_begin();
    for (int i = 0; i < dp->nt; i++) {
      ct_tensor *g = dp->is_buffer[i] ? NULL : ct_grad(r->tensors[i]); /* NULL: a parameter the forward did not use */
      r->grad_dt[i] = g ? ct_tensor_dtype(g) : CT_DTYPE_COUNT;
    }
    for (int dt = 0; dt < CT_DTYPE_COUNT && s == CT_OK; dt++) {
      int n = 0;
      for (int i = 0; i < dp->nt; i++)
        if (r->grad_dt[i] == (ct_dtype)dt) r->list[n++] = ct_grad(r->tensors[i]);
      if (n == 0) continue;
      ct_tensor *flat = pack(n, r->list);
      ct_tensor *c = flat ? ct_to(flat, dp->r[0].dev, 0) : NULL; /* flat itself when on devices[0] */
      if (!c) s = ct__error_prefix("copying the gradients to the first device");
      else ct__untrack(c), r->moved[dt] = c;
      ct_tensor_free(flat);
    }
    for (int i = 0; i < dp->nt; i++)
      if (!dp->is_buffer[i]) ct_zero_grad(r->tensors[i]);
    ct_no_grad_end();
  }
  ct_scope_end();
  return s;
}

/* Replica k >= 1 takes the host packs of m's tensors: one copy to its device per dtype, then
 * unpacked there. */
static ct_status run_broadcast(ct_data_parallel *dp, replica *r) {
  if (r->k == 0) return CT_OK;
  ct_status s = CT_OK;
  ct_no_grad_begin();
  for (int dt = 0; dt < CT_DTYPE_COUNT && s == CT_OK; dt++) {
    if (!dp->host[dt]) continue;
    ct_tensor *flat = ct_to(dp->host[dt], r->dev, 0);
    if (!flat) s = ct__error_prefix("copying the parameters and buffers");
    for (int64_t i = 0, off = 0; flat && i < dp->nt && s == CT_OK; i++) {
      if (ct_tensor_dtype(r->tensors[i]) != (ct_dtype)dt) continue;
      ct_tensor *v = unpack_view(flat, off, r->tensors[i]);
      s = v ? ct_copy_(r->tensors[i], v) : ct_last_status();
      if (s != CT_OK) ct__error_prefix("unpacking %s", dp->names[i]);
      off += ct_tensor_numel(r->tensors[i]);
      ct_tensor_free(v);
    }
    ct_tensor_free(flat);
  }
  ct_no_grad_end();
  return s;
}

static void *worker(void *arg) {
  replica *r = arg;
  ct_data_parallel *dp = r->dp;
  uint64_t seen = 0;
  pthread_mutex_lock(&dp->lock);
  for (;;) {
    while (dp->generation == seen && !dp->quit) pthread_cond_wait(&dp->go, &dp->lock);
    if (dp->quit) break;
    seen = dp->generation;
    int job = dp->job;
    pthread_mutex_unlock(&dp->lock);
    ct_clear_error();
    ct_status s = job == JOB_STEP ? run_step(dp, r) : run_broadcast(dp, r);
    r->status = CT_OK;
    if (s != CT_OK) record_error(r, s);
    pthread_mutex_lock(&dp->lock);
    if (--dp->pending == 0) pthread_cond_signal(&dp->done);
  }
  pthread_mutex_unlock(&dp->lock);
  return NULL;
}

/* Run job on every worker and wait for all of them; then the first failure, reported by op in the
 * caller's thread. */
static ct_status run_job(ct_data_parallel *dp, int job, const char *op) {
  pthread_mutex_lock(&dp->lock);
  dp->job = job;
  dp->pending = dp->n;
  dp->generation++;
  pthread_cond_broadcast(&dp->go);
  while (dp->pending > 0) pthread_cond_wait(&dp->done, &dp->lock);
  pthread_mutex_unlock(&dp->lock);
  for (int k = 0; k < dp->n; k++) {
    replica *r = &dp->r[k];
    if (r->status == CT_OK) continue;
    char d[32];
    return ct__error(r->status, "%s: replica %d on %s: %s", op, k, ct_device_str(r->dev, d, sizeof d), r->msg);
  }
  return CT_OK;
}

/* ---- the public functions */

static void stop_workers(ct_data_parallel *dp) {
  pthread_mutex_lock(&dp->lock);
  dp->quit = 1;
  pthread_cond_broadcast(&dp->go);
  pthread_mutex_unlock(&dp->lock);
  for (int k = 0; k < dp->n; k++)
    if (dp->r[k].started) pthread_join(dp->r[k].thread, NULL), dp->r[k].started = 0;
}

void ct_data_parallel_free(ct_data_parallel *dp) {
  if (!dp) return;
  stop_workers(dp);
  for (int k = 0; k < dp->n; k++) {
    replica *r = &dp->r[k];
    for (int dt = 0; dt < CT_DTYPE_COUNT; dt++) ct_tensor_free(r->moved[dt]);
    free(r->tensors), free(r->list), free(r->grad_dt);
    if (k > 0) ct_module_free(r->module);
  }
  free(dp->r), free(dp->is_buffer), free(dp->names);
  pthread_cond_destroy(&dp->go), pthread_cond_destroy(&dp->done), pthread_mutex_destroy(&dp->lock);
  free(dp);
}

ct_data_parallel *ct_data_parallel_new(ct_module *m, int n, const ct_device *devices, const ct_data_parallel_opts *opts) {
  static const char op[] = "ct_data_parallel_new";
  if (!m) return ct__null_arg(op, "m");
  if (!devices) return ct__null_arg(op, "devices");
  if (n < 1 || n > CT_DP_MAX_DEVICES)
    CT_FAIL_NULL(CT_EINVAL, "%s: n must be between 1 and %d devices, got %d", op, CT_DP_MAX_DEVICES, n);
  for (int k = 0; k < n; k++)
    if (!ct__check_device(op, devices[k])) return NULL;
  if (opts && opts->autocast && opts->autocast_dtype != CT_F16 && opts->autocast_dtype != CT_BF16)
    return ct__error(CT_EINVAL, "%s: autocast_dtype must be float16 or bfloat16; got %s", op,
                     ct_dtype_name(opts->autocast_dtype)), NULL;
  int nt = ct_module_named_tensors(m, 1, NULL, 0);
  if (nt < 0) return ct__error_prefix("%s", op), NULL;
  ct_named_tensor *named = ct__calloc((size_t)(nt > 0 ? nt : 1), sizeof *named, "ct_data_parallel_new: the tensor list");
  if (!named) return NULL;
  ct_module_named_tensors(m, 1, named, nt);
  for (int i = 0; i < nt; i++)
    if (!ct_device_eq(ct_tensor_device(named[i].tensor), devices[0])) {
      char a[32], b[32];
      ct__error(CT_EDEVICE, "%s: m's %s %s is on %s, not on devices[0] = %s; move the module there first (ct_module_to)", op,
                named[i].is_buffer ? "buffer" : "parameter", named[i].name,
                ct_device_str(ct_tensor_device(named[i].tensor), a, sizeof a), ct_device_str(devices[0], b, sizeof b));
      free(named);
      return NULL;
    }

  ct_data_parallel *dp = ct__calloc(1, sizeof *dp, "ct_data_parallel_new: the state");
  if (!dp) return free(named), NULL;
  pthread_mutex_init(&dp->lock, NULL);
  pthread_cond_init(&dp->go, NULL);
  pthread_cond_init(&dp->done, NULL);
  dp->m = m, dp->nt = nt;
  if (opts) dp->opts = *opts;
  size_t cnt = (size_t)(nt > 0 ? nt : 1);
  int ok = (dp->r = ct__calloc((size_t)n, sizeof *dp->r, "ct_data_parallel_new: the replicas")) != NULL;
  if (ok) dp->n = n; /* from here on ct_data_parallel_free walks the replicas */
  ok = ok && (dp->is_buffer = ct__calloc(cnt, sizeof *dp->is_buffer, "ct_data_parallel_new: the tensor list"));
  ok = ok && (dp->names = ct__calloc(cnt, sizeof *dp->names, "ct_data_parallel_new: the tensor names"));
  for (int i = 0; ok && i < nt; i++) {
    dp->is_buffer[i] = named[i].is_buffer;
    memcpy(dp->names[i], named[i].name, sizeof dp->names[i]);
  }
  free(named);
  for (int k = 0; ok && k < n; k++) {
    replica *r = &dp->r[k];
    r->dp = dp, r->k = k, r->dev = devices[k];
    r->module = k == 0 ? m : clone(m, devices[k]);
    if (!r->module) {
      char d[32];
      ct__error_prefix("%s: replicating the module on %s", op, ct_device_str(devices[k], d, sizeof d));
      ok = 0;
      break;
    }
    ok = (r->tensors = ct__calloc(cnt, sizeof *r->tensors, "ct_data_parallel_new: a replica's tensor list")) &&
         (r->list = ct__calloc(cnt, sizeof *r->list, "ct_data_parallel_new: a replica's tensor list")) &&
         (r->grad_dt = ct__calloc(cnt, sizeof *r->grad_dt, "ct_data_parallel_new: a replica's gradient list"));
    if (!ok) break;
    ct_named_tensor *nr = ct__calloc(cnt, sizeof *nr, "ct_data_parallel_new: the tensor list");
    if (!nr) {
      ok = 0;
      break;
    }
    int got = ct_module_named_tensors(r->module, 1, nr, nt);
    CT_ASSERT(got == nt);
    for (int i = 0; i < nt; i++) r->tensors[i] = nr[i].tensor;
    free(nr);
  }
  for (int k = 0; ok && k < n; k++) {
    int e = pthread_create(&dp->r[k].thread, NULL, worker, &dp->r[k]);
    if (e != 0) {
      ct__error(CT_EBACKEND, "%s: could not start the worker thread of replica %d: %s", op, k, strerror(e));
      ok = 0;
    } else dp->r[k].started = 1;
  }
  if (!ok) {
    ct_status s = ct_last_status();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    ct_data_parallel_free(dp);
    ct__error(s < 0 ? s : CT_ENOMEM, "%s", msg); /* the free above may not touch it, but keep it whole */
    return NULL;
  }
  return dp;
}

int ct_data_parallel_num_replicas(const ct_data_parallel *dp) {
  if (!dp) return ct__null_status("ct_data_parallel_num_replicas", "dp"), -1;
  return dp->n;
}

ct_module *ct_data_parallel_replica(ct_data_parallel *dp, int k) {
  if (!dp) return ct__null_arg("ct_data_parallel_replica", "dp");
  if (k < 0 || k >= dp->n)
    CT_FAIL_NULL(CT_EINVAL, "ct_data_parallel_replica: k must be in [0, %d) (the replicas), got %d", dp->n, k);
  return dp->r[k].module;
}

ct_status ct_data_parallel_forward_backward(ct_data_parallel *dp, ct_tensor *x, ct_tensor *y, double *loss_out) {
  static const char op[] = "ct_data_parallel_forward_backward";
  if (!dp || !x || !y) return ct__null_status(op, !dp ? "dp" : !x ? "x" : "y");
  char a[96], b[96];
  if (ct_tensor_ndim(x) < 1 || ct_tensor_ndim(y) < 1 || ct_tensor_size(x, 0) != ct_tensor_size(y, 0))
    return ct__error(CT_EINVAL, "%s: x %s and y %s must have the same size along dim 0, the batch", op,
                     ct_shape_str(x, a, sizeof a), ct_shape_str(y, b, sizeof b));
  int64_t B = ct_tensor_size(x, 0);
  if (B < 1) return ct__error(CT_EINVAL, "%s: the batch is empty (x %s)", op, ct_shape_str(x, a, sizeof a));
  int active = B < dp->n ? (int)B : dp->n;
  int64_t base = B / active, rem = B % active, start = 0;
  for (int k = 0; k < dp->n; k++) {
    replica *r = &dp->r[k];
    r->size = k < active ? base + (k < rem) : 0;
    r->start = start, start += r->size;
    r->loss = 0;
    if (k > 0) sync_training(r->module, dp->m);
  }
  /* The workers read x and y through detached views: a batch that requires grad must not have two
   * threads' backward passes accumulate into its .grad at once. */
  dp->x = ct_detach(x), dp->y = ct_detach(y), dp->batch = B, dp->want_loss = loss_out != NULL;
  ct_status s = dp->x && dp->y ? run_job(dp, JOB_STEP, op) : ct__error_prefix("%s", op);
  ct_tensor_free(dp->x), ct_tensor_free(dp->y);
  dp->x = dp->y = NULL;
  /* The sum onto devices[0], in replica order; every pack is freed, whatever happens. */
  ct_no_grad_begin();
  for (int k = 1; k < dp->n; k++) {
    replica *r = &dp->r[k];
    for (int dt = 0; dt < CT_DTYPE_COUNT; dt++) {
      ct_tensor *flat = r->moved[dt];
      r->moved[dt] = NULL;
      for (int64_t i = 0, off = 0; flat && i < dp->nt && s == CT_OK; i++) {
        if (r->grad_dt[i] != (ct_dtype)dt) continue;
        ct_tensor *p = dp->r[0].tensors[i], *v = unpack_view(flat, off, p);
        off += ct_tensor_numel(p);
        if (!v) s = ct_last_status();
        /* replica 0 had no gradient for it (no shard, or it did not use it): a copy of this one */
        else if (!p->grad) {
          ct_tensor *c = ct_to(v, ct_tensor_device(v), CT_COPY);
          if (c) ct__untrack(c), p->grad = c;
          else s = ct_last_status();
        } else s = ct__add_into(p->grad, v);
        if (s != CT_OK) ct__error_prefix("%s: summing the gradient of %s from replica %d", op, dp->names[i], k);
        ct_tensor_free(v);
      }
      ct_tensor_free(flat);
    }
  }
  ct_no_grad_end();
  if (s == CT_OK && loss_out) {
    double sum = 0;
    for (int k = 0; k < dp->n; k++) sum += dp->r[k].loss;
    *loss_out = sum;
  }
  return s;
}

ct_status ct_data_parallel_broadcast(ct_data_parallel *dp) {
  static const char op[] = "ct_data_parallel_broadcast";
  if (!dp) return ct__null_status(op, "dp");
  if (dp->n == 1) return CT_OK;
  ct_status s = CT_OK;
  replica *r0 = &dp->r[0];
  ct_no_grad_begin();
  for (int dt = 0; dt < CT_DTYPE_COUNT && s == CT_OK; dt++) {
    int n = 0;
    for (int i = 0; i < dp->nt; i++)
      if (ct_tensor_dtype(r0->tensors[i]) == (ct_dtype)dt) r0->list[n++] = r0->tensors[i];
    if (n == 0) continue;
    ct_tensor *flat = pack(n, r0->list);
    ct_tensor *h = flat ? ct_to(flat, CT_DEVICE_CPU, 0) : NULL;
    if (!h) s = ct__error_prefix("%s: reading the parameters and buffers from the first device", op);
    else ct__untrack(h), dp->host[dt] = h;
    ct_tensor_free(flat);
  }
  ct_no_grad_end();
  if (s == CT_OK) s = run_job(dp, JOB_BROADCAST, op);
  for (int dt = 0; dt < CT_DTYPE_COUNT; dt++) ct_tensor_free(dp->host[dt]), dp->host[dt] = NULL;
  return s;
}
