/* tests/data/test_loader.c: the batch loader on a small synthetic dataset whose label is the sample
 * index, so every batch says exactly which samples it holds: shapes, drop_last, seeded shuffles,
 * bit-identical batches for 0, 1 and 3 workers, each sample once per epoch, normalization values,
 * epochs, shutdown in the middle of an epoch, scopes and argument errors. */
#include <math.h>
#include <string.h>
#include "testutil.h"

#define N 103
#define C 1
#define H 2
#define W 3
#define D (C * H * W)

/* Sample i has pixels (i * 7 + j) % 256 and label i. */
static ct_dataset *make_ds(void) {
  uint8_t px[N * D];
  int64_t lb[N];
  for (int i = 0; i < N; i++) {
    lb[i] = i;
    for (int j = 0; j < D; j++) px[i * D + j] = (uint8_t)((i * 7 + j) % 256);
  }
  return ct_assert_nonnull(ct_dataset_from_u8(px, lb, N, C, H, W, N, CT_FASHION_MNIST_MEAN, CT_FASHION_MNIST_STD));
}

static float expected_pixel(int sample, int j) {
  return ((float)((sample * 7 + j) % 256) / 255.0f - CT_FASHION_MNIST_MEAN) / CT_FASHION_MNIST_STD;
}

/* Everything an epoch delivered: labels in order, x bytes concatenated, batch sizes. */
typedef struct {
  int64_t y[N];
  float x[N * D];
  int64_t sizes[N + 1];
  int nbatches, nsamples;
} epoch_log;

static void run_epoch(ct_loader *l, epoch_log *log) {
  memset(log, 0, sizeof *log);
  ct_tensor *x, *y;
  int rc;
  while ((rc = ct_loader_next(l, &x, &y)) == 1) {
    int64_t b = ct_tensor_size(x, 0);
    assert_int_equal(ct_tensor_ndim(x), 4);
    assert_int_equal(ct_tensor_size(x, 1), C);
    assert_int_equal(ct_tensor_size(x, 2), H);
    assert_int_equal(ct_tensor_size(x, 3), W);
    assert_int_equal(ct_tensor_dtype(x), CT_F32);
    assert_int_equal(ct_tensor_ndim(y), 1);
    assert_int_equal(ct_tensor_size(y, 0), b);
    assert_int_equal(ct_tensor_dtype(y), CT_I64);
    assert_true(ct_tensor_device(x).kind == CT_CPU);
    assert_true(log->nsamples + b <= N);
    memcpy(log->y + log->nsamples, ct_tensor_data(y), (size_t)b * sizeof(int64_t));
    memcpy(log->x + log->nsamples * D, ct_tensor_data(x), (size_t)b * D * sizeof(float));
    log->sizes[log->nbatches++] = b;
    log->nsamples += (int)b;
    ct_tensor_free(x);
    ct_tensor_free(y);
  }
  assert_int_equal(rc, 0);
  assert_null(x);
  assert_null(y);
}

static void test_shapes_and_order(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 10}));
  assert_int_equal(ct_loader_len(l), 11);
  epoch_log log;
  run_epoch(l, &log);
  assert_int_equal(log.nbatches, 11);
  for (int b = 0; b < 10; b++) assert_int_equal(log.sizes[b], 10);
  assert_int_equal(log.sizes[10], 3);
  for (int i = 0; i < N; i++) assert_int_equal(log.y[i], i); /* no shuffle: in order */
  ct_loader_free(l);
  ct_dataset_free(ds);
}

static void test_drop_last(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 10, .drop_last = 1, .num_workers = 2}));
  assert_int_equal(ct_loader_len(l), 10);
  epoch_log log;
  run_epoch(l, &log);
  assert_int_equal(log.nbatches, 10);
  assert_int_equal(log.nsamples, 100);
  for (int b = 0; b < 10; b++) assert_int_equal(log.sizes[b], 10);
  ct_loader_free(l);
  /* a batch larger than the dataset: one short batch, or none with drop_last */
  l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 500}));
  assert_int_equal(ct_loader_len(l), 1);
  run_epoch(l, &log);
  assert_int_equal(log.nbatches, 1);
  assert_int_equal(log.sizes[0], N);
  ct_loader_free(l);
  l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 500, .drop_last = 1, .num_workers = 3}));
  assert_int_equal(ct_loader_len(l), 0);
  run_epoch(l, &log);
  assert_int_equal(log.nbatches, 0);
  ct_loader_free(l);
  /* defaults: batch size 1 */
  l = ct_assert_nonnull(ct_loader_new(ds, NULL));
  assert_int_equal(ct_loader_len(l), N);
  ct_loader_free(l);
  ct_dataset_free(ds);
}

static void assert_each_once(const epoch_log *log) {
  int seen[N] = {0};
  assert_int_equal(log->nsamples, N);
  for (int i = 0; i < N; i++) {
    assert_true(log->y[i] >= 0 && log->y[i] < N);
    seen[log->y[i]]++;
  }
  for (int i = 0; i < N; i++) assert_int_equal(seen[i], 1);
}

static void test_seeded_shuffle(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  ct_loader_opts o = {.batch_size = 8, .shuffle = 1, .seed = 42};
  ct_loader *a = ct_assert_nonnull(ct_loader_new(ds, &o));
  ct_loader *b = ct_assert_nonnull(ct_loader_new(ds, &o));
  o.seed = 43;
  ct_loader *c = ct_assert_nonnull(ct_loader_new(ds, &o));
  static epoch_log la, lb, lc, la1;
  run_epoch(a, &la);
  run_epoch(b, &lb);
  run_epoch(c, &lc);
  assert_memory_equal(la.y, lb.y, sizeof la.y);
  assert_true(memcmp(la.y, lc.y, sizeof la.y) != 0);
  int in_order = 1;
  for (int i = 0; i < N; i++) in_order &= la.y[i] == i;
  assert_false(in_order);
  assert_each_once(&la);
  assert_each_once(&lc);
  /* the next epoch reshuffles (seed + 1) ... */
  assert_int_equal(ct_loader_epoch(a), 1);
  run_epoch(a, &la1);
  assert_true(memcmp(la.y, la1.y, sizeof la.y) != 0);
  assert_each_once(&la1);
  /* ... and equals a fresh loader told to start at epoch 1, and epoch 0 of seed 43 */
  ct_assert_ok(ct_loader_set_epoch(b, 1));
  run_epoch(b, &lb);
  assert_memory_equal(la1.y, lb.y, sizeof la1.y);
  assert_memory_equal(la1.y, lc.y, sizeof la1.y);
  ct_loader_free(a);
  ct_loader_free(b);
  ct_loader_free(c);
  ct_dataset_free(ds);
}

static void test_workers_identical(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  static epoch_log ref[3], got;
  const int workers[] = {0, 1, 3, 5};
  for (int wi = 0; wi < 4; wi++) {
    ct_loader *l = ct_assert_nonnull(ct_loader_new(
        ds, &(ct_loader_opts){.batch_size = 7, .shuffle = 1, .seed = 7, .num_workers = workers[wi], .prefetch_factor = wi == 3 ? 1 : 0}));
    for (int e = 0; e < 3; e++) {
      run_epoch(l, wi == 0 ? &ref[e] : &got);
      if (wi == 0) {
        assert_each_once(&ref[e]);
        continue;
      }
      assert_int_equal(got.nbatches, ref[e].nbatches);
      assert_memory_equal(got.sizes, ref[e].sizes, sizeof got.sizes);
      assert_memory_equal(got.y, ref[e].y, sizeof got.y);
      assert_memory_equal(got.x, ref[e].x, sizeof got.x); /* bit for bit */
    }
    ct_loader_free(l);
  }
  ct_dataset_free(ds);
}

/* pin_memory changes where batches are staged, never their bits (for any number of workers, over
 * epochs and an epoch abandoned half-way). Where no backend pins host memory it is a no-op; where
 * one does (CUDA with a GPU, OpenCL with a device) the batches are pinned CPU tensors. */
static void test_pin_memory_identical(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  static epoch_log ref[2], got;
  ct_loader *r = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 8, .shuffle = 1, .seed = 3}));
  for (int e = 0; e < 2; e++) run_epoch(r, &ref[e]);
  ct_loader_free(r);
  const int workers[] = {0, 3};
  for (int wi = 0; wi < 2; wi++) {
    ct_loader *l = ct_assert_nonnull(
        ct_loader_new(ds, &(ct_loader_opts){.batch_size = 8, .shuffle = 1, .seed = 3, .num_workers = workers[wi], .pin_memory = 1}));
    ct_tensor *x, *y;
    assert_int_equal(ct_loader_next(l, &x, &y), 1); /* half an epoch, then start over at epoch 0 */
    assert_int_equal(ct_tensor_is_pinned(x), ct_device_can_pin(CT_DEVICE_CPU)); /* a CPU device: pinned where a backend pins */
    ct_tensor_free(x), ct_tensor_free(y);
    ct_assert_ok(ct_loader_set_epoch(l, 0));
    for (int e = 0; e < 2; e++) {
      run_epoch(l, &got);
      assert_int_equal(got.nbatches, ref[e].nbatches);
      assert_memory_equal(got.sizes, ref[e].sizes, sizeof got.sizes);
      assert_memory_equal(got.y, ref[e].y, sizeof got.y);
      assert_memory_equal(got.x, ref[e].x, sizeof got.x); /* bit for bit */
    }
    ct_loader_free(l);
  }
  ct_dataset_free(ds);
}

static void test_normalization(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 16, .shuffle = 1, .seed = 3, .num_workers = 2}));
  static epoch_log log;
  run_epoch(l, &log);
  for (int i = 0; i < N; i++) {
    int s = (int)log.y[i];
    for (int j = 0; j < D; j++) assert_true(log.x[i * D + j] == expected_pixel(s, j));
  }
  ct_loader_free(l);
  ct_dataset_free(ds);
  /* the Fashion-MNIST constants at the ends of the range */
  uint8_t px[2] = {0, 255};
  int64_t lb[2] = {0, 1};
  ds = ct_assert_nonnull(ct_dataset_from_u8(px, lb, 2, 1, 1, 1, 2, CT_FASHION_MNIST_MEAN, CT_FASHION_MNIST_STD));
  float x;
  ct_assert_ok(ct_dataset_get(ds, 0, &x, NULL));
  assert_true(fabs(x - (0.0 - 0.2860) / 0.3530) < 1e-6);
  ct_assert_ok(ct_dataset_get(ds, 1, &x, NULL));
  assert_true(fabs(x - (1.0 - 0.2860) / 0.3530) < 1e-6);
  ct_dataset_free(ds);
}

static void test_shutdown_mid_epoch(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  for (int rep = 0; rep < 50; rep++) {
    ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 2, .shuffle = 1, .num_workers = 4}));
    ct_tensor *x, *y;
    for (int k = 0; k < rep % 4; k++) {
      assert_int_equal(ct_loader_next(l, &x, &y), 1);
      ct_tensor_free(x);
      ct_tensor_free(y);
    }
    ct_loader_free(l); /* workers may be busy or waiting on a full queue */
  }
  /* abandon an epoch half-way, then a whole epoch still holds every sample once */
  ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 5, .shuffle = 1, .num_workers = 3}));
  ct_tensor *x, *y;
  for (int k = 0; k < 7; k++) {
    assert_int_equal(ct_loader_next(l, &x, &y), 1);
    ct_tensor_free(x);
    ct_tensor_free(y);
  }
  ct_assert_ok(ct_loader_set_epoch(l, 4));
  assert_int_equal(ct_loader_epoch(l), 4);
  static epoch_log log, ref;
  run_epoch(l, &log);
  assert_each_once(&log);
  ct_loader_free(l);
  l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 5, .shuffle = 1, .seed = 4}));
  run_epoch(l, &ref); /* seed 4, epoch 0 == seed 0, epoch 4 */
  assert_memory_equal(log.y, ref.y, sizeof log.y);
  ct_loader_free(l);
  ct_loader_free(NULL);
  ct_dataset_free(ds);
}

static void test_scope_owns_batches(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 10, .num_workers = 1}));
  for (int e = 0; e < 2; e++) {
    ct_tensor *x, *y;
    for (;;) {
      ct_scope_begin();
      int rc = ct_loader_next(l, &x, &y);
      ct_scope_end(); /* releases x and y: nothing leaks under LeakSanitizer */
      if (rc == 0) break;
      assert_int_equal(rc, 1);
    }
  }
  assert_int_equal(ct_loader_epoch(l), 2);
  ct_loader_free(l);
  ct_dataset_free(ds);
}

static void test_errors(void **state) {
  (void)state;
  ct_dataset *ds = make_ds();
  assert_null(ct_loader_new(NULL, NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_loader_new(ds, &(ct_loader_opts){.num_workers = -1}));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("num_workers");
  assert_null(ct_loader_new(ds, &(ct_loader_opts){.batch_size = -3}));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_loader_new(ds, &(ct_loader_opts){.device = CT_DEVICE_CUDA(99)}));
  assert_int_equal(ct_last_status(), CT_EDEVICE);
  ct_assert_error_contains("cuda:99");
  ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.pin_memory = 1}));
  ct_tensor *x;
  assert_int_equal(ct_loader_next(l, &x, NULL), CT_EINVAL);
  assert_null(x);
  assert_int_equal(ct_loader_next(NULL, &x, NULL), CT_EINVAL);
  assert_int_equal(ct_loader_set_epoch(l, -1), CT_EINVAL);
  ct_loader_free(l);
  /* datasets */
  uint8_t px[2] = {0, 1};
  int64_t lb[2] = {0, 5};
  assert_null(ct_dataset_from_u8(px, lb, 2, 1, 1, 1, 5, 0.f, 1.f));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("label 5 of sample 1 is out of range");
  assert_null(ct_dataset_from_u8(px, lb, 2, 1, 1, 1, 10, 0.f, 0.f));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_dataset_from_u8(NULL, lb, 2, 1, 1, 1, 10, 0.f, 1.f));
  assert_null(ct_dataset_from_u8(px, lb, 2, 0, 1, 1, 10, 0.f, 1.f));
  ct_dataset_free(ds);
}

/* Batches on a GPU, when there is one: the same values as the CPU batches, copied with ct_to. */
static void test_device_gpu(void **state) {
  (void)state;
  if (ct_device_count(CT_CUDA) == 0) {
    skip(); /* no GPU: reported as skipped by cmocka */
  }
  ct_dataset *ds = make_ds();
  ct_loader *g = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 10, .shuffle = 1, .num_workers = 2, .pin_memory = 1, .device = CT_DEVICE_CUDA(0)}));
  ct_loader *c = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 10, .shuffle = 1}));
  ct_tensor *gx, *gy, *cx, *cy;
  while (ct_loader_next(g, &gx, &gy) == 1) {
    assert_int_equal(ct_loader_next(c, &cx, &cy), 1);
    assert_true(ct_tensor_device(gx).kind == CT_CUDA);
    assert_true(ct_tensor_device(gy).kind == CT_CUDA);
    ct_assert_close(gx, cx, 0, 0);
    ct_assert_close(gy, cy, 0, 0);
    ct_tensor_free(gx), ct_tensor_free(gy), ct_tensor_free(cx), ct_tensor_free(cy);
  }
  ct_loader_free(g);
  ct_loader_free(c);
  ct_dataset_free(ds);
}

/* pin_memory onto a GPU: every batch copied without blocking the host (the ledger says pinned and
 * asynchronous), the next batch prefetched, values equal to the CPU's, also under a scope per step
 * and for 0 workers. */
static void test_pinned_prefetch_gpu(void **state) {
  (void)state;
  if (ct_device_count(CT_CUDA) == 0) {
    printf("# skipped: no GPU for pinned staging\n");
    skip();
  }
  ct_dataset *ds = make_ds();
  for (int nw = 0; nw <= 2; nw += 2) {
    ct_loader *g = ct_assert_nonnull(ct_loader_new(
        ds, &(ct_loader_opts){.batch_size = 10, .shuffle = 1, .num_workers = nw, .pin_memory = 1, .device = CT_DEVICE_CUDA(0)}));
    ct_loader *c = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 10, .shuffle = 1}));
    ct_ledger_reset();
    int64_t batches = 0;
    for (;;) {
      ct_scope_begin();
      ct_tensor *gx, *gy, *cx, *cy;
      int rc = ct_loader_next(g, &gx, &gy);
      if (rc != 1) {
        ct_scope_end();
        break;
      }
      assert_int_equal(ct_loader_next(c, &cx, &cy), 1);
      ct_ledger l = ct_ledger_get(); /* read before ct_assert_close copies back */
      assert_int_equal(l.sync_copies, 0);
      assert_int_equal(l.pinned_copies, l.h2d_copies);
      ct_assert_close(gx, cx, 0, 0);
      ct_assert_close(gy, cy, 0, 0);
      ct_ledger_reset();
      batches++;
      ct_scope_end(); /* the prefetched batch is the loader's, not this scope's */
    }
    assert_int_equal(batches, ct_loader_len(g));
    ct_loader_free(g);
    ct_loader_free(c);
  }
  ct_dataset_free(ds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shapes_and_order),
      cmocka_unit_test(test_drop_last),
      cmocka_unit_test(test_seeded_shuffle),
      cmocka_unit_test(test_workers_identical),
      cmocka_unit_test(test_normalization),
      cmocka_unit_test(test_shutdown_mid_epoch),
      cmocka_unit_test(test_scope_owns_batches),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_device_gpu),
      cmocka_unit_test(test_pin_memory_identical),
      cmocka_unit_test(test_pinned_prefetch_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
