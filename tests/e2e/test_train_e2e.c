/* tests/e2e/test_train_e2e.c: the end-to-end check of the whole CPU stack: the mlp recipe
 * (Adam, lr 1e-3, batch 128, seed 0) trained for one epoch on the real Fashion-MNIST must reach
 * at least 84% test accuracy. Skipped (77) when the dataset is not installed. */
#include "testutil.h"

static double accuracy(ct_module *m, ct_dataset *test) {
  ct_loader *l = ct_loader_new(test, &(ct_loader_opts){.batch_size = 1000});
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

static void mlp_one_epoch_reaches_84_percent(void **state) {
  (void)state;
  const char *dir = ct_test_data_dir();
  ct_dataset *train = ct_fashion_mnist_load(dir, CT_SPLIT_TRAIN), *test = ct_fashion_mnist_load(dir, CT_SPLIT_TEST);
  ct_assert_nonnull(train);
  ct_assert_nonnull(test);
  ct_generator gen = ct_generator_new(0);
  ct_module *m = ct_assert_nonnull(ct_model_new("mlp", CT_DEVICE_CPU, &gen));
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 1e-3}));
  ct_loader *l = ct_assert_nonnull(ct_loader_new(train, &(ct_loader_opts){.batch_size = 128, .shuffle = 1, .num_workers = 2}));
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
  double acc = accuracy(m, test);
  printf("mlp, 1 epoch: first loss %.4f, last loss %.4f, test accuracy %.2f%%\n", first_loss, last_loss, 100 * acc);
  assert_true(last_loss < first_loss);
  assert_true(acc >= 0.84);
  ct_loader_free(l);
  ct_optimizer_free(opt);
  ct_module_free(m);
  ct_dataset_free(train);
  ct_dataset_free(test);
}

int main(void) {
  if (!ct_test_data_dir()) {
    printf("SKIP: Fashion-MNIST not found (apt-get install dataset-fashion-mnist)\n");
    return CT_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(mlp_one_epoch_reaches_84_percent)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
