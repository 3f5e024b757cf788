/* tests/e2e/test_train_e2e.c: the end-to-end check of the whole stack: the mlp recipe (Adam,
 * lr 1e-3, batch 128, seed 0) trained for one epoch on the real Fashion-MNIST must reach at least
 * 84% test accuracy on the CPU, and on opencl:0 (PoCL in CI) it must too, within 0.5 points of the
 * CPU's accuracy with the same seed, with the batches fed by the loader's pinned staging and
 * prefetch. Skipped (77) when the dataset is not installed. */
#include <math.h>
#include "testutil.h"

static double accuracy(ct_module *m, ct_dataset *test, ct_device dev) {
  ct_loader *l = ct_loader_new(test, &(ct_loader_opts){.batch_size = 1000, .device = dev});
  ct_assert_nonnull(l);
  int64_t correct = 0, total = 0;
  ct_tensor *x, *y;
  ct_module_train(m, 0);
  ct_no_grad_begin();
  while (ct_loader_next(l, &x, &y) == 1) {
    ct_scope_begin();
    ct_tensor *pred = ct_argmax(ct_module_forward(m, x), 1, 0);
    ct_tensor *hits = ct_sum(ct_eq(pred, y), 0, NULL, 0);
    ct_assert_nonnull(hits);
    correct += (int64_t)ct_item(hits);
    total += ct_tensor_size(y, 0);
    ct_scope_end();
    ct_tensor_free(x), ct_tensor_free(y);
  }
  ct_no_grad_end();
  ct_loader_free(l);
  return (double)correct / (double)total;
}

/* One epoch of the mlp recipe on dev; returns the test accuracy. */
static double mlp_one_epoch(ct_device dev) {
  const char *dir = ct_test_data_dir();
  ct_dataset *train = ct_fashion_mnist_load(dir, CT_SPLIT_TRAIN), *test = ct_fashion_mnist_load(dir, CT_SPLIT_TEST);
  ct_assert_nonnull(train);
  ct_assert_nonnull(test);
  ct_generator gen = ct_generator_new(0);
  ct_module *m = ct_assert_nonnull(ct_model_new("mlp", dev, &gen));
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 1e-3}));
  ct_loader *l = ct_assert_nonnull(ct_loader_new(train, &(ct_loader_opts){.batch_size = 128, .shuffle = 1, .num_workers = 2,
                                                                             .pin_memory = 1, .device = dev}));
  ct_tensor *x, *y;
  double first_loss = -1, last_loss = -1;
  while (ct_loader_next(l, &x, &y) == 1) {
    ct_scope_begin();
    ct_tensor *loss = ct_cross_entropy(ct_module_forward(m, x), y, CT_REDUCTION_MEAN, 0);
    ct_assert_nonnull(loss);
    ct_assert_ok(ct_backward(loss));
    ct_assert_ok(ct_optimizer_step(opt));
    ct_optimizer_zero_grad(opt);
    last_loss = ct_item(loss);
    if (first_loss < 0) first_loss = last_loss;
    ct_scope_end();
    ct_tensor_free(x), ct_tensor_free(y);
  }
  double acc = accuracy(m, test, dev);
  char name[32];
  printf("mlp on %s, 1 epoch: first loss %.4f, last loss %.4f, test accuracy %.2f%%\n", ct_device_str(dev, name, sizeof name),
         first_loss, last_loss, 100 * acc);
  assert_true(last_loss < first_loss);
  assert_true(acc >= 0.84);
  ct_loader_free(l);
  ct_optimizer_free(opt);
  ct_module_free(m);
  ct_dataset_free(train);
  ct_dataset_free(test);
  return acc;
}

static double cpu_accuracy = -1; /* the CPU run's, kept for the comparison below */

static void mlp_one_epoch_reaches_84_percent(void **state) {
  (void)state;
  cpu_accuracy = mlp_one_epoch(CT_DEVICE_CPU);
}

/* The same recipe on opencl:0 reaches the CPU's accuracy. The two runs differ only in rounding
 * (CLBlast's summation order against OpenBLAS's), so after an epoch they agree to a fraction of a
 * point. Never skipped: the test command installs PoCL, so a missing device is a failure. */
static void mlp_on_opencl_matches_cpu(void **state) {
  (void)state;
  ct_device ocl;
  ct_assert_ok(ct_device_parse("opencl:0", &ocl));
  assert_true(ct_device_available(ocl));
  double cpu = cpu_accuracy >= 0 ? cpu_accuracy : mlp_one_epoch(CT_DEVICE_CPU), dev = mlp_one_epoch(ocl);
  printf("opencl:0 %.2f%% against cpu %.2f%%: %.2f points apart\n", 100 * dev, 100 * cpu, 100 * fabs(dev - cpu));
  assert_true(fabs(dev - cpu) <= 0.005);
}

int main(void) {
  if (!ct_test_data_dir()) {
    printf("SKIP: Fashion-MNIST not found (apt-get install dataset-fashion-mnist)\n");
    return CT_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(mlp_one_epoch_reaches_84_percent),
                                     cmocka_unit_test(mlp_on_opencl_matches_cpu)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
