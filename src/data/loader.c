/* src/data/loader.c: batches from a dataset, prepared ahead by worker threads.
 *
 * An epoch is a permutation of the N sample indices (from seed + epoch, or the identity without
 * shuffle) cut into batches 0..nbatches-1. Batch b is gathered and normalized into slot b % cap of
 * a ring of cap = num_workers * prefetch_factor preallocated host buffers. Workers claim batches in
 * order, never more than cap ahead of the consumer, so the queue is bounded; the consumer takes
 * them in order, so the delivered batches are the same bits for any number of workers. With
 * num_workers 0 the calling thread gathers each batch into the single slot itself.
 *
 * Tensors are only created on the consumer thread (ct_from_host copies the slot), since scopes and
 * the last error are thread-local; workers touch nothing but the dataset, the permutation and
 * their slot. One mutex guards the counters; two condition variables signal "work available"
 * (to workers) and "a slot is ready / a worker went idle" (to the consumer).
 *
 * Epoch reset and shutdown: the consumer clears `active` (workers stop claiming) and waits until
 * no worker is busy before the permutation or the slots change; ct_loader_free sets `stop`, wakes
 * everyone and joins. A worker finishes the batch in hand and then exits, so freeing mid-epoch
 * never deadlocks and leaks nothing.
 *
 * pin_memory, when a backend can pin host memory for the loader's device (ct_device_can_pin: the
 * device's own backend, CUDA or OpenCL; for the CPU the first that pins; else a no-op): each slot's
 * buffers are the storage of two pinned CPU tensors (ct_empty_pinned_for the device). Taking a
 * slot hands its tensors out (views of the batch's rows) and gives the slot two fresh pinned
 * tensors from the pinned cache, so the batch is never copied on the host. For a device other than
 * the CPU the batch is copied with CT_NON_BLOCKING (the copy stream or queue, no host wait) and the
 * host tensors are dropped at once: the pinned cache does not reuse their memory before the copy
 * ended. And the next batch is prefetched: before ct_loader_next
 * returns batch b, it takes batch b + 1 and issues its copy, so the copy overlaps the training
 * step of batch b; the device tensors wait in `pre` (owned by the loader, outside any scope) until
 * the next call hands them out. `consumed` counts slots taken from the ring (one ahead with
 * prefetch), `delivered` the batches returned. The bits are the same as without pinning.
 *
 * The distributed sampler (world_size W > 1): the epoch's permutation of the N indices is built in
 * `full`, and `perm` holds this rank's share of it, positions rank, rank + W, ... of the permutation
 * padded cyclically to W * ceil(N/W) (or cut to W * floor(N/W) with drop_last), as
 * torch.utils.data.DistributedSampler; `n` is the share's length, and batches are cut from it.
 *
 * Samples are made by ct__dataset_gather (transforms.c) with the loader's seed and the epoch, so
 * the dataset's augmentation draws the same for every sample whatever the number of workers. A
 * batch that cannot be made (an image that does not decode) carries its status and message in its
 * slot; the consumer reports it. Samples skipped under CT_DECODE_SKIP leave their batch smaller,
 * and a batch left empty is passed over. While a loader exists its dataset's `readers` count is
 * raised, which freezes the dataset's settings. */
#include <pthread.h>
#include <string.h>
#include "data/data_internal.h"

#define MAX_WORKERS 64

typedef struct {
  float *x;      /* (B, C, H, W) */
  int64_t *y;    /* (B) */
  ct_tensor *tx, *ty; /* pinned mode: the pinned tensors whose storage x and y are (untracked) */
  uint8_t *scratch; /* ct__dataset_scratch_bytes of the dataset: the u8 pixels of one sample being made */
  int64_t count; /* samples in the batch held (fewer than the batch's when samples were skipped) */
  int64_t batch; /* index of the batch held, -1 when empty */
  ct_status err; /* the batch could not be made (a file did not decode): the status, */
  char msg[1024]; /* and why, naming the file; reported by the consumer, which owns the last error */
} slot;

struct ct_loader {
  const ct_dataset *ds;
  int64_t B, nbatches;
  int64_t n;     /* samples per epoch on this rank (N without the distributed sampler) */
  int rank, world;
  int64_t *full; /* (N) the whole epoch permutation with world > 1, else NULL */
  int shuffle, drop_last, nw, cap;
  uint64_t seed;
  ct_device device;
  int pinned;    /* pin_memory and a backend that pins for device: slots are pinned tensors (see the top) */
  int prefetch;  /* pinned and device is not the CPU: batch b + 1 is copied while b trains */
  ct_tensor *pre_x, *pre_y; /* the prefetched batch on the device (untracked), or NULL */
  int64_t pre_batch;
  int64_t delivered; /* batches returned in this epoch (consumer thread only) */
  int64_t *perm; /* (N) sample order of the current epoch */
  slot *slots;   /* cap entries */

  pthread_mutex_t mu;
  pthread_cond_t work_cv, ready_cv;
  pthread_t *threads;
  int nthreads;
  /* guarded by mu */
  int64_t epoch;
  int active;                  /* the epoch's permutation is built and batches may be claimed */
  int64_t next_claim, consumed; /* batches claimed by workers / slots taken back by the consumer */
  int busy;                    /* workers gathering a batch right now */
  int stop;
};

static int64_t batch_count(const ct_loader *l, int64_t b) {
  int64_t start = b * l->B, n = l->n;
  return n - start < l->B ? n - start : l->B;
}

/* Make batch b of epoch `epoch` in slot s (any thread: touches only s, and the dataset's skip marks). */
static void fill(ct_loader *l, slot *s, int64_t b, int64_t epoch) {
  s->err = ct__dataset_gather(l->ds, l->perm + b * l->B, batch_count(l, b), l->seed, epoch, s->scratch, s->x, s->y,
                              &s->count, s->msg, sizeof s->msg);
}

static int can_claim(const ct_loader *l) {
  return l->active && l->next_claim < l->nbatches && l->next_claim < l->consumed + l->cap;
}

static void *worker(void *arg) {
  ct_loader *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->stop && !can_claim(l)) pthread_cond_wait(&l->work_cv, &l->mu);
    if (l->stop) break;
    int64_t b = l->next_claim++, epoch = l->epoch;
    slot *s = &l->slots[b % l->cap];
    l->busy++;
    pthread_mutex_unlock(&l->mu);
    fill(l, s, b, epoch);
    pthread_mutex_lock(&l->mu);
    s->batch = b;
    l->busy--;
    pthread_cond_broadcast(&l->ready_cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

/* Stop claiming and wait until no worker is inside fill(). Called with mu held. */
static void quiesce(ct_loader *l) {
  l->active = 0;
  while (l->busy > 0) pthread_cond_wait(&l->ready_cv, &l->mu);
}

/* Drop the prefetched batch, if any (consumer thread). */
static void drop_prefetched(ct_loader *l) {
  ct_tensor_free(l->pre_x), ct_tensor_free(l->pre_y);
  l->pre_x = l->pre_y = NULL;
  l->pre_batch = -1;
}

/* Two pinned tensors, x (bsz, C, H, W) float32 and y (bsz) int64, owned by the loader (untracked);
 * 0 with the error set when they cannot be had. */
static int new_pinned(const ct_loader *l, int64_t bsz, ct_tensor **tx, ct_tensor **ty) {
  const ct_dataset *ds = l->ds;
  int64_t xs[4] = {bsz, ds->oc, ds->oh, ds->ow};
  *tx = ct_empty_pinned_for(l->device, 4, xs, CT_F32);
  *ty = *tx ? ct_empty_pinned_for(l->device, 1, &bsz, CT_I64) : NULL;
  ct__untrack(*tx), ct__untrack(*ty);
  if (*tx && *ty) return 1;
  ct_tensor_free(*tx), ct_tensor_free(*ty);
  *tx = *ty = NULL;
  return 0;
}

static void release(ct_loader *l) {
  drop_prefetched(l);
  __atomic_sub_fetch(&((ct_dataset *)l->ds)->readers, 1, __ATOMIC_RELEASE);
  if (l->slots)
    for (int i = 0; i < l->cap; i++) {
      if (l->pinned) ct_tensor_free(l->slots[i].tx), ct_tensor_free(l->slots[i].ty);
      else free(l->slots[i].x), free(l->slots[i].y);
      free(l->slots[i].scratch);
    }
  free(l->slots);
  free(l->perm);
  free(l->full);
  free(l->threads);
  free(l);
}

ct_loader *ct_loader_new(const ct_dataset *ds, const ct_loader_opts *opts) {
  ct_loader_opts o = {0};
  if (opts) o = *opts;
  if (!ds) CT_FAIL_NULL(CT_EINVAL, "ct_loader_new: ds is NULL");
  if (o.batch_size < 0 || o.num_workers < 0 || o.num_workers > MAX_WORKERS || o.prefetch_factor < 0)
    CT_FAIL_NULL(CT_EINVAL,
                 "ct_loader_new: need batch_size >= 0 (0 means 1), num_workers in [0, %d], prefetch_factor >= 0 "
                 "(0 means 2); got batch_size=%lld, num_workers=%d, prefetch_factor=%d",
                 MAX_WORKERS, (long long)o.batch_size, o.num_workers, o.prefetch_factor);
  if (o.world_size < 0 || o.rank < 0 || (o.world_size > 0 ? o.rank >= o.world_size : o.rank != 0))
    CT_FAIL_NULL(CT_EINVAL, "ct_loader_new: the distributed sampler needs world_size >= 0 (0 means 1) and rank in [0, world_size); got rank=%d, world_size=%d",
                 o.rank, o.world_size);
  if (!ct_device_available(o.device)) {
    char name[32];
    CT_FAIL_NULL(CT_EDEVICE, "ct_loader_new: device %s is not available (%d device(s) of its kind); pass a device from ct_try_gpu or leave it zero for the CPU",
                 ct_device_str(o.device, name, sizeof name), ct_device_count(o.device.kind));
  }
  ct_loader *l = calloc(1, sizeof *l);
  if (!l) CT_FAIL_NULL(CT_ENOMEM, "ct_loader_new: out of memory");
  int64_t N = ct_dataset_len(ds);
  l->ds = ds;
  /* the dataset's settings (normalization, augmentation) stay as they are while it is read */
  __atomic_add_fetch(&((ct_dataset *)ds)->readers, 1, __ATOMIC_ACQUIRE);
  l->rank = o.rank, l->world = o.world_size > 1 ? o.world_size : 1;
  int64_t n = l->world == 1 ? N : o.drop_last ? N / l->world : (N + l->world - 1) / l->world;
  l->n = n;
  l->B = o.batch_size ? o.batch_size : 1;
  l->nbatches = o.drop_last ? n / l->B : (n + l->B - 1) / l->B;
  l->shuffle = o.shuffle != 0, l->drop_last = o.drop_last != 0, l->seed = o.seed, l->device = o.device;
  l->pinned = o.pin_memory && ct_device_can_pin(o.device); /* the registry says whether the device's backend pins */
  l->prefetch = l->pinned && o.device.kind != CT_CPU;
  l->pre_batch = -1;
  l->nw = o.num_workers;
  l->cap = l->nw ? l->nw * (o.prefetch_factor ? o.prefetch_factor : 2) : 1;
  if (l->nbatches > 0 && l->cap > l->nbatches) l->cap = (int)l->nbatches; /* no use buffering more than an epoch */
  int64_t bsz = l->B < n ? l->B : (n > 0 ? n : 1); /* a batch never holds more than N samples */
  size_t d = (size_t)ds->out_numel, sb = ct__dataset_scratch_bytes(ds); /* fixed: ds is frozen from here on */
  l->perm = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
  l->slots = calloc((size_t)l->cap, sizeof(slot));
  if (l->world > 1) l->full = malloc((size_t)(N > 0 ? N : 1) * sizeof(int64_t));
  int ok = l->perm && l->slots && (l->world == 1 || l->full);
  for (int i = 0; ok && i < l->cap; i++) {
    slot *s = &l->slots[i];
    s->batch = -1;
    if (!(s->scratch = malloc(sb ? sb : 1))) {
      ok = 0;
      break;
    }
    if (l->pinned) {
      ok = new_pinned(l, bsz, &s->tx, &s->ty);
      if (ok) s->x = ct_tensor_data(s->tx), s->y = ct_tensor_data(s->ty);
      continue;
    }
    s->x = malloc((size_t)bsz * d * sizeof(float));
    s->y = malloc((size_t)bsz * sizeof(int64_t));
    ok = s->x && s->y;
  }
  if (l->nw) {
    l->threads = calloc((size_t)l->nw, sizeof(pthread_t));
    ok = ok && l->threads;
  }
  if (!ok) {
    int cap = l->cap, pinned = l->pinned;
    release(l);
    CT_FAIL_NULL(CT_ENOMEM, "ct_loader_new: out of %s memory for %d batch buffers of %lld samples of %zu floats%s",
                 pinned ? "pinned" : "host", cap, (long long)bsz, d, pinned ? " (try pin_memory = 0)" : "");
  }
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->work_cv, NULL);
  pthread_cond_init(&l->ready_cv, NULL);
  for (int i = 0; i < l->nw; i++) {
    int rc = pthread_create(&l->threads[i], NULL, worker, l);
    if (rc != 0) {
      ct_loader_free(l);
      CT_FAIL_NULL(CT_EBACKEND, "ct_loader_new: could not start worker thread %d of %d: %s", i, o.num_workers, strerror(rc));
    }
    l->nthreads++;
  }
  return l;
}

void ct_loader_free(ct_loader *l) {
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  l->active = 0;
  pthread_cond_broadcast(&l->work_cv);
  pthread_mutex_unlock(&l->mu);
  for (int i = 0; i < l->nthreads; i++) pthread_join(l->threads[i], NULL);
  pthread_cond_destroy(&l->work_cv);
  pthread_cond_destroy(&l->ready_cv);
  pthread_mutex_destroy(&l->mu);
  release(l);
}

int64_t ct_loader_len(const ct_loader *l) {
  if (!l) return ct__null_status("ct_loader_len", "l"), -1;
  return l->nbatches;
}

int64_t ct_loader_epoch(const ct_loader *l) {
  if (!l) return ct__null_status("ct_loader_epoch", "l"), -1;
  pthread_mutex_lock((pthread_mutex_t *)&l->mu);
  int64_t e = l->epoch;
  pthread_mutex_unlock((pthread_mutex_t *)&l->mu);
  return e;
}

ct_status ct_loader_set_epoch(ct_loader *l, int64_t epoch) {
  if (!l || epoch < 0)
    return ct__error(CT_EINVAL, "ct_loader_set_epoch: %s", l ? "epoch must be >= 0" : "loader is NULL");
  pthread_mutex_lock(&l->mu);
  quiesce(l);
  l->epoch = epoch;
  pthread_mutex_unlock(&l->mu);
  return CT_OK;
}

/* Build the epoch's order and let the workers go. No worker is busy (active was 0). */
static void start_epoch(ct_loader *l) {
  int64_t N = ct_dataset_len(l->ds);
  int64_t *order = l->world > 1 ? l->full : l->perm;
  if (l->shuffle) {
    ct__permutation(order, N, l->seed + (uint64_t)l->epoch);
  } else {
    for (int64_t i = 0; i < N; i++) order[i] = i;
  }
  for (int64_t k = 0; l->world > 1 && k < l->n; k++) /* padding wraps to the first indices */
    l->perm[k] = l->full[(l->rank + k * l->world) % N];
  drop_prefetched(l); /* a batch of the abandoned epoch */
  l->delivered = 0;
  pthread_mutex_lock(&l->mu);
  for (int i = 0; i < l->cap; i++) l->slots[i].batch = -1;
  l->next_claim = l->consumed = 0;
  l->active = 1;
  pthread_cond_broadcast(&l->work_cv);
  pthread_mutex_unlock(&l->mu);
}

/* Wrap slot s as CPU tensors (copies), then move them to the loader's device. */
static int wrap(ct_loader *l, const slot *s, ct_tensor **x, ct_tensor **y) {
  const ct_dataset *ds = l->ds;
  int64_t xs[4] = {s->count, ds->oc, ds->oh, ds->ow}, ys[1] = {s->count};
  ct_tensor *hx = ct_from_host(s->x, 4, xs, CT_F32, CT_DEVICE_CPU);
  ct_tensor *hy = hx ? ct_from_host(s->y, 1, ys, CT_I64, CT_DEVICE_CPU) : NULL;
  if (!hx || !hy) {
    ct_status st = ct_last_status();
    ct_tensor_free(hx);
    return st < 0 ? st : CT_ENOMEM;
  }
  if (l->device.kind == CT_CPU) {
    *x = hx, *y = hy;
    return 1;
  }
  ct_tensor *dx = ct_to(hx, l->device, 0);
  ct_tensor *dy = dx ? ct_to(hy, l->device, 0) : NULL;
  ct_tensor_free(hx);
  ct_tensor_free(hy);
  if (!dx || !dy) {
    ct_status st = ct_last_status();
    ct_tensor_free(dx);
    return st < 0 ? st : CT_EDEVICE;
  }
  *x = dx, *y = dy;
  return 1;
}

/* Pinned mode: hand out the rows of slot s (views of its pinned tensors; for another device than
 * the CPU, their non-blocking copies), then give the slot fresh pinned tensors. On failure the slot is unchanged. */
static int wrap_pinned(ct_loader *l, slot *s, ct_tensor **x, ct_tensor **y) {
  ct_tensor *nx, *ny;
  if (!new_pinned(l, ct_tensor_size(s->tx, 0), &nx, &ny)) return ct_last_status() < 0 ? ct_last_status() : CT_ENOMEM;
  ct_tensor *vx = ct_narrow(s->tx, 0, 0, s->count), *vy = vx ? ct_narrow(s->ty, 0, 0, s->count) : NULL;
  if (vx && vy && l->device.kind != CT_CPU) {
    ct_tensor *dx = ct_to(vx, l->device, CT_NON_BLOCKING);
    ct_tensor *dy = dx ? ct_to(vy, l->device, CT_NON_BLOCKING) : NULL;
    ct_tensor_free(vx), ct_tensor_free(vy); /* the pinned cache keeps their bytes until the copies end */
    vx = dx, vy = dy;
  }
  if (!vx || !vy) {
    ct_status st = ct_last_status();
    ct_tensor_free(vx), ct_tensor_free(vy), ct_tensor_free(nx), ct_tensor_free(ny);
    return st < 0 ? st : CT_ENOMEM;
  }
  ct_tensor_free(s->tx), ct_tensor_free(s->ty); /* the views (or the copies' fences) keep the bytes */
  s->tx = nx, s->ty = ny;
  s->x = ct_tensor_data(nx), s->y = ct_tensor_data(ny);
  *x = vx, *y = vy;
  return 1;
}

/* Take batch b out of the ring: wait for (or, without workers, gather) its slot, wrap it, and give
 * the slot back to the workers. Returns 1; 0 when every sample of the batch was skipped (no
 * tensors); or a negative status with the batch left in its slot: a batch that could not be made
 * (a file that does not decode) reports the same error at every call, until the epoch changes. */
static int take(ct_loader *l, int64_t b, ct_tensor **x, ct_tensor **y) {
  slot *s = &l->slots[b % l->cap];
  *x = *y = NULL;
  pthread_mutex_lock(&l->mu);
  if (l->nw == 0) {
    int64_t epoch = l->epoch;
    pthread_mutex_unlock(&l->mu);
    if (s->batch != b) {
      fill(l, s, b, epoch);
      s->batch = b;
    }
  } else {
    while (s->batch != b) pthread_cond_wait(&l->ready_cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
  }
  if (s->err != CT_OK)
    return ct__error(s->err, "ct_loader_next: batch %lld of epoch %lld: %s", (long long)b, (long long)ct_loader_epoch(l), s->msg);
  int rc = s->count == 0 ? 0 : l->pinned ? wrap_pinned(l, s, x, y) : wrap(l, s, x, y);
  if (rc < 0) return rc; /* the batch stays in its slot; the next call retries it */
  pthread_mutex_lock(&l->mu);
  s->batch = -1;
  l->consumed++;
  pthread_cond_broadcast(&l->work_cv);
  pthread_mutex_unlock(&l->mu);
  return rc;
}

int ct_loader_next(ct_loader *l, ct_tensor **x, ct_tensor **y) {
  if (x) *x = NULL;
  if (y) *y = NULL;
  if (!l || !x || !y)
    return ct__error(CT_EINVAL, "ct_loader_next: %s is NULL", !l ? "loader" : !x ? "x" : "y");
  if (!l->active) start_epoch(l);
  for (;;) { /* a batch whose every sample was skipped is passed over */
    int64_t b = l->delivered;
    if (b == l->nbatches) {
      pthread_mutex_lock(&l->mu);
      l->active = 0; /* every batch was taken, so no worker is busy */
      l->epoch++;
      pthread_mutex_unlock(&l->mu);
      return 0;
    }
    int rc;
    if (l->pre_batch == b) { /* taken during the previous call (its copy issued): hand it to the caller's scope */
      *x = l->pre_x, *y = l->pre_y;
      rc = *x ? 1 : 0;
      l->pre_x = l->pre_y = NULL, l->pre_batch = -1;
      if (rc) ct__scope_track(*x), ct__scope_track(*y);
    } else {
      rc = take(l, b, x, y);
      if (rc < 0) return rc;
    }
    l->delivered++;
    if (l->prefetch && b + 1 < l->nbatches) {
      ct_tensor *nx, *ny;
      int pr = take(l, b + 1, &nx, &ny);
      if (pr >= 0) {
        ct__untrack(nx), ct__untrack(ny);
        l->pre_x = nx, l->pre_y = ny, l->pre_batch = b + 1;
      } else {
        ct_clear_error(); /* batch b + 1 stays in its slot: the next call takes it again and reports */
      }
    }
    if (rc == 1) return 1;
  }
}
