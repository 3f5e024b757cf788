/* tests/dist/test_dist_sampler.c: the loader's distributed sampler has
 * torch.utils.data.DistributedSampler's semantics. One process builds the W loaders that W ranks
 * would (rank 0..W-1 of world_size W) and checks, from the labels (each sample's label is its own
 * index), that rank r gets positions r, r + W, ... of the same seeded permutation that a loader
 * without sharding gives, padded by repeating the first indices (or cut with drop_last), that every
 * rank gets the same number of samples and batches, and that the epoch reseeds the permutation. */
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

#define N 23

/* A dataset of N 1x1x1 images whose label is the sample's index (num_classes N). */
static ct_dataset *indexed(void) {
  uint8_t px[N];
  int64_t lab[N];
  for (int i = 0; i < N; i++) px[i] = (uint8_t)i, lab[i] = i;
  return ct_dataset_from_u8(px, lab, N, 1, 1, 1, N, 0.0f, 1.0f);
}

/* The sample indices one epoch of l delivers, in order; returns their count. */
static int64_t epoch(ct_loader *l, int64_t *out, int64_t cap) {
  int64_t k = 0;
  ct_tensor *x, *y;
  while (ct_loader_next(l, &x, &y) == 1) {
    const int64_t *v = ct_tensor_data(y);
    for (int64_t i = 0; i < ct_tensor_numel(y) && k < cap; i++) out[k++] = v[i];
    ct_tensor_free(x), ct_tensor_free(y);
  }
  return k;
}

static void check_world(int world, int shuffle, int drop_last, int64_t ep) {
  ct_dataset *ds = indexed();
  int64_t full[N], got[N + 8];
  ct_loader_opts o = {.batch_size = 4, .shuffle = shuffle, .seed = 42};
  ct_loader *whole = ct_assert_nonnull(ct_loader_new(ds, &o));
  ct_assert_ok(ct_loader_set_epoch(whole, ep));
  assert_int_equal(epoch(whole, full, N), N);
  int64_t per = drop_last ? N / world : (N + world - 1) / world;
  int64_t seen[N] = {0};
  for (int r = 0; r < world; r++) {
    o.rank = r, o.world_size = world, o.drop_last = drop_last, o.num_workers = r % 2; /* workers change nothing */
    ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &o));
    ct_assert_ok(ct_loader_set_epoch(l, ep));
    int64_t batches = drop_last ? per / 4 : (per + 3) / 4;
    assert_int_equal(ct_loader_len(l), batches);
    int64_t k = epoch(l, got, N + 8);
    assert_int_equal(k, drop_last ? batches * 4 : per);
    for (int64_t i = 0; i < k; i++) {
      assert_int_equal(got[i], full[(r + i * world) % N]); /* padding repeats the first indices */
      seen[got[i]]++;
    }
    ct_loader_free(l);
  }
  if (!drop_last)
    for (int i = 0; i < N; i++) assert_true(seen[i] >= 1); /* the ranks together cover the dataset */
  ct_loader_free(whole);
  ct_dataset_free(ds);
}

static void test_sharding(void **state) {
  (void)state;
  for (int world = 1; world <= 4; world++)
    for (int shuffle = 0; shuffle <= 1; shuffle++)
      for (int drop = 0; drop <= 1; drop++) check_world(world, shuffle, drop, 0);
  check_world(3, 1, 0, 5);
  check_world(5, 1, 0, 2);
}

static void test_epoch_reseeds(void **state) {
  (void)state;
  ct_dataset *ds = indexed();
  ct_loader *l = ct_assert_nonnull(ct_loader_new(ds, &(ct_loader_opts){.batch_size = 8, .shuffle = 1, .seed = 1, .rank = 1, .world_size = 2}));
  int64_t a[N], b[N];
  int64_t ka = epoch(l, a, N), kb = epoch(l, b, N);
  assert_int_equal(ka, 12);
  assert_int_equal(kb, 12);
  assert_true(memcmp(a, b, sizeof(int64_t) * 12) != 0);
  ct_loader_free(l);
  ct_dataset_free(ds);
}

static void test_bad_rank(void **state) {
  (void)state;
  ct_dataset *ds = indexed();
  assert_null(ct_loader_new(ds, &(ct_loader_opts){.rank = 2, .world_size = 2}));
  ct_assert_error_contains("rank");
  assert_null(ct_loader_new(ds, &(ct_loader_opts){.rank = 1}));
  assert_null(ct_loader_new(ds, &(ct_loader_opts){.world_size = -1}));
  ct_dataset_free(ds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sharding),
      cmocka_unit_test(test_epoch_reseeds),
      cmocka_unit_test(test_bad_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
