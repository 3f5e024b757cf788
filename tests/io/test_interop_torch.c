/* tests/io/test_interop_torch.c: checkpoints shared with PyTorch, both ways, for the mlp, the cnn
 * and torchvision's resnet18 (1-channel conv1, 10 classes; Debian's torchvision), checked on real
 * data:
 *  - cuttle trains the model for STEPS Adam steps on the first STEPS batches of BATCH Fashion-MNIST
 *    training images and saves a checkpoint (model and Adam state); PyTorch builds the same
 *    nn.Sequential, loads the model part with load_state_dict(strict=True), and both sides compare
 *    their logits of the test set's first NTEST images;
 *  - PyTorch trains the same way and saves its state_dict with safetensors.torch; cuttle loads it
 *    with ct_checkpoint_load and compares its logits with PyTorch's;
 *  - `cuttle eval --model resnet18` on the file PyTorch saved counts as many correct test images
 *    (of 10000) as PyTorch does;
 *  - every ResNet (18, 34, 50; both stems; two (in_channels, num_classes)) that cuttle builds saves
 *    torchvision's state_dict: the same names, shapes and dtypes, and a strict load.
 * Each comparison prints the max abs difference it measured ("resnet18 logits: max |cuttle - torch|
 * = X over 256 images") and fails above TOL. The PyTorch side is
 * tests/io/torch_interop.py, run by $CUTTLE_PYTHON (the build folder's venv, see
 * scripts/python_env.sh). A missing torch or safetensors is a failure, not a skip, unless
 * CUTTLE_INTEROP_OPTIONAL=1; the dataset missing is a skip, as in every test that reads it. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

/* These match torch_interop.py. */
#define STEPS 5
#define BATCH 64
#define NTEST 256
#define TOL 1e-4

static char script[4096];
static const char *data_dir;
static ct_tensor *train_x[STEPS], *train_y[STEPS], *test_x;

/* The training batches (in file order) and the test images, read once for all the tests. */
static int read_data(void **state) {
  (void)state;
  ct_dataset *train = ct_fashion_mnist_load(data_dir, CT_SPLIT_TRAIN);
  ct_dataset *test = ct_fashion_mnist_load(data_dir, CT_SPLIT_TEST);
  ct_loader *lt = train ? ct_loader_new(train, &(ct_loader_opts){.batch_size = BATCH}) : NULL;
  ct_loader *le = test ? ct_loader_new(test, &(ct_loader_opts){.batch_size = NTEST}) : NULL;
  int ok = lt && le;
  for (int s = 0; ok && s < STEPS; s++) ok = ct_loader_next(lt, &train_x[s], &train_y[s]) == 1;
  ct_tensor *test_y = NULL;
  ok = ok && ct_loader_next(le, &test_x, &test_y) == 1;
  if (!ok) fprintf(stderr, "reading Fashion-MNIST from %s: %s\n", data_dir, ct_last_error());
  ct_tensor_free(test_y);
  ct_loader_free(lt), ct_loader_free(le);
  ct_dataset_free(train), ct_dataset_free(test);
  return ok ? 0 : -1;
}

static int free_data(void **state) {
  (void)state;
  for (int s = 0; s < STEPS; s++) ct_tensor_free(train_x[s]), ct_tensor_free(train_y[s]);
  ct_tensor_free(test_x);
  return 0;
}

static double loss_on(ct_module *m, int s) {
  ct_scope_begin();
  ct_no_grad_begin();
  ct_tensor *loss = ct_cross_entropy(ct_module_forward(m, train_x[s]), train_y[s], CT_REDUCTION_MEAN, 0);
  ct_no_grad_end();
  ct_assert_nonnull(loss);
  double v = ct_item(loss);
  ct_scope_end();
  return v;
}

/* STEPS Adam steps, one per training batch; the loss of the first batch must fall. */
static void train(const char *model, ct_module *m, ct_optimizer *opt) {
  ct_module_train(m, 1);
  double before = loss_on(m, 0);
  for (int s = 0; s < STEPS; s++) {
    ct_scope_begin();
    ct_tensor *loss = ct_cross_entropy(ct_module_forward(m, train_x[s]), train_y[s], CT_REDUCTION_MEAN, 0);
    ct_assert_nonnull(loss);
    ct_assert_ok(ct_backward(loss));
    ct_assert_ok(ct_optimizer_step(opt));
    ct_optimizer_zero_grad(opt);
    ct_scope_end();
  }
  double after = loss_on(m, 0);
  printf("%s: cuttle trained %d steps, loss of the first batch %.4f -> %.4f\n", model, STEPS, before, after);
  assert_true(after < before);
}

/* The logits of the test images, (NTEST, 10). */
static ct_tensor *logits(ct_module *m) {
  ct_module_train(m, 0);
  ct_no_grad_begin();
  ct_tensor *y = ct_module_forward(m, test_x);
  ct_no_grad_end();
  return ct_assert_nonnull(y);
}

static ct_tensor *read_logits(const char *path) {
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  ct_tensor *t = ct_assert_nonnull(ct_safetensors_get(f, "logits", CT_DEVICE_CPU));
  ct_safetensors_close(f);
  return t;
}

/* Print the max abs difference of cuttle's and PyTorch's logits (the figure issue 19's 1e-4 is
 * about, so the log shows the margin) and assert it is at most TOL. how: who trained and saved. */
static void compare(const char *model, const char *how, ct_tensor *ours, ct_tensor *theirs) {
  ct_assert_close(ours, theirs, TOL, 0); /* the shapes first, and the worst element if it fails */
  double *a = ct_test_values(ours), *b = ct_test_values(theirs), worst = 0;
  for (int64_t i = 0; i < ct_tensor_numel(ours); i++) worst = fmax(worst, fabs(a[i] - b[i]));
  free(a), free(b);
  printf("%s logits: max |cuttle - torch| = %.3g over %d images (%s; tolerance %g)\n", model, worst, NTEST, how, TOL);
  assert_true(worst <= TOL);
}

static void cuttle_trains_torch_loads(const char *model) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir()), ck[4200], ours_path[4200], theirs_path[4200], cmd[32768];
  snprintf(ck, sizeof ck, "%s/cuttle.safetensors", dir);
  snprintf(ours_path, sizeof ours_path, "%s/cuttle_logits.safetensors", dir);
  snprintf(theirs_path, sizeof theirs_path, "%s/torch_logits.safetensors", dir);
  ct_generator gen = ct_generator_new(3);
  ct_module *m = ct_assert_nonnull(ct_model_new(model, CT_DEVICE_CPU, &gen));
  ct_optimizer *opt =
      ct_assert_nonnull(ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 1e-3}));
  train(model, m, opt);
  ct_assert_ok(ct_checkpoint_save(ck, m, opt, &(ct_checkpoint_meta){.epoch = 1, .rng = gen}));
  ct_tensor *ours = logits(m);
  ct_assert_ok(ct_safetensors_save(ours_path, 1, (const char *[]){"logits"}, &ours, 0, NULL));
  snprintf(cmd, sizeof cmd, "'%s' '%s' load %s '%s' '%s' '%s' '%s'", ct_test_python(), script, model, data_dir, ck,
           ours_path, theirs_path);
  fflush(stdout); /* so that what cuttle printed comes before what Python prints */
  assert_int_equal(system(cmd), 0);
  ct_tensor *theirs = read_logits(theirs_path);
  compare(model, "cuttle trained and saved, PyTorch loaded", ours, theirs);
  ct_tensor_free(theirs), ct_tensor_free(ours);
  ct_optimizer_free(opt);
  ct_module_free(m);
  ct_test_rmdir(dir);
}

static void torch_trains_cuttle_loads(const char *model) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir()), ck[4200], theirs_path[4200], cmd[32768];
  snprintf(ck, sizeof ck, "%s/torch.safetensors", dir);
  snprintf(theirs_path, sizeof theirs_path, "%s/torch_logits.safetensors", dir);
  snprintf(cmd, sizeof cmd, "'%s' '%s' train %s '%s' '%s' '%s'", ct_test_python(), script, model, data_dir, ck,
           theirs_path);
  fflush(stdout); /* so that what cuttle printed comes before what Python prints */
  assert_int_equal(system(cmd), 0);
  /* A fresh model with other initial weights: only the loaded ones can give PyTorch's logits. */
  ct_module *m = ct_assert_nonnull(ct_model_new(model, CT_DEVICE_CPU, NULL));
  ct_checkpoint_meta meta;
  ct_assert_ok(ct_checkpoint_load(ck, m, NULL, &meta));
  assert_int_equal(meta.has_training_state, 0);
  ct_tensor *ours = logits(m), *theirs = read_logits(theirs_path);
  compare(model, "PyTorch trained and saved, cuttle loaded", ours, theirs);
  ct_tensor_free(theirs), ct_tensor_free(ours);
  ct_module_free(m);
  ct_test_rmdir(dir);
}

static void mlp_cuttle_to_torch(void **state) { (void)state, cuttle_trains_torch_loads("mlp"); }
static void cnn_cuttle_to_torch(void **state) { (void)state, cuttle_trains_torch_loads("cnn"); }
static void mlp_torch_to_cuttle(void **state) { (void)state, torch_trains_cuttle_loads("mlp"); }
static void cnn_torch_to_cuttle(void **state) { (void)state, torch_trains_cuttle_loads("cnn"); }
static void resnet18_cuttle_to_torch(void **state) { (void)state, cuttle_trains_torch_loads("resnet18"); }
static void resnet18_torch_to_cuttle(void **state) { (void)state, torch_trains_cuttle_loads("resnet18"); }

/* `cuttle eval --model resnet18` on torchvision's resnet18 saved by PyTorch: the same number of
 * correct answers on the 10000 test images as PyTorch counts with the same file. */
static void resnet18_cuttle_eval_cli(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir()), ck[4200], lg[4200], cmd[32768], out[16384];
  snprintf(ck, sizeof ck, "%s/torch.safetensors", dir);
  snprintf(lg, sizeof lg, "%s/torch_logits.safetensors", dir);
  snprintf(cmd, sizeof cmd, "'%s' '%s' train resnet18 '%s' '%s' '%s'", ct_test_python(), script, data_dir, ck, lg);
  fflush(stdout);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(ct_test_run(out, sizeof out, "'%s' '%s' correct resnet18 '%s' '%s'", ct_test_python(), script, data_dir, ck), 0);
  const char *p = strstr(out, "correct ");
  assert_non_null(p);
  long theirs = strtol(p + 8, NULL, 10);
  const char *bin = getenv("CUTTLE_BINARY_DIR");
  int rc = ct_test_run(out, sizeof out, "'%s/cuttle' eval --model resnet18 --checkpoint '%s' --device cpu --data-dir '%s'",
                       bin ? bin : ".", ck, data_dir);
  printf("%s", out);
  assert_int_equal(rc, 0);
  long ours = -1;
  for (const char *q = out; (q = strstr(q, " correct")) != NULL; q++) {
    const char *b = q;
    while (b > out && b[-1] >= '0' && b[-1] <= '9') b--;
    if (b < q) ours = strtol(b, NULL, 10);
  }
  printf("resnet18: PyTorch counts %ld of 10000 correct, cuttle eval %ld\n", theirs, ours);
  assert_true(theirs > 1000);
  assert_int_equal(ours, theirs);
  ct_test_rmdir(dir);
}

/* Issue 19: every ResNet cuttle builds has torchvision's state_dict. For each depth, both stems
 * ("-small": conv1 3x3 stride 1, no maxpool; torchvision's with conv1 replaced and maxpool =
 * Identity) and (in_channels, num_classes) (1, 10) and (3, 100), cuttle saves the fresh model and
 * torch_interop.py `keys` compares the file's header with torchvision's state_dict key by key, then
 * loads it strictly. No forward passes: the layout is the point, the logits are checked above. One
 * Python run per depth, so at most four files (about 400 MB for resnet50) are on disk at once. */
static void resnets_state_dict_as_torchvision(void **state) {
  (void)state;
  static const char *const depths[] = {"resnet18", "resnet34", "resnet50"};
  static const int64_t io[2][2] = {{1, 10}, {3, 100}};
  ct_generator gen = ct_generator_new(11);
  for (int d = 0; d < 3; d++) {
    char *dir = ct_assert_nonnull(ct_test_tmpdir()), cmd[32768], name[32], path[4200];
    int len = snprintf(cmd, sizeof cmd, "'%s' '%s' keys", ct_test_python(), script);
    for (int small = 0; small < 2; small++)
      for (int j = 0; j < 2; j++) {
        snprintf(name, sizeof name, "%s%s", depths[d], small ? "-small" : "");
        /* 32 x 32 images: the size does not change a ResNet's state (the pool is adaptive) */
        ct_module *m = ct_assert_nonnull(ct_model_new_for(name, io[j][0], 32, 32, io[j][1], CT_DEVICE_CPU, &gen));
        snprintf(path, sizeof path, "%s/%s_%lld_%lld.safetensors", dir, name, (long long)io[j][0], (long long)io[j][1]);
        ct_assert_ok(ct_checkpoint_save(path, m, NULL, NULL));
        ct_module_free(m);
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " '%s,%lld,%lld,%s'", name, (long long)io[j][0],
                        (long long)io[j][1], path);
        assert_true(len < (int)sizeof cmd);
      }
    fflush(stdout); /* so that what cuttle printed comes before what Python prints */
    assert_int_equal(system(cmd), 0);
    ct_test_rmdir(dir);
  }
}

int main(void) {
  int rc = ct_test_require_python("numpy, torch, safetensors.torch");
  if (rc != 0) return rc;
  data_dir = ct_test_data_dir();
  if (!data_dir) {
    printf("SKIP: Fashion-MNIST not found (apt-get install dataset-fashion-mnist)\n");
    return CT_TEST_SKIP;
  }
  const char *src = getenv("CUTTLE_SOURCE_DIR");
  snprintf(script, sizeof script, "%s/tests/io/torch_interop.py", src ? src : ".");
  const struct CMUnitTest tests[] = {cmocka_unit_test(mlp_cuttle_to_torch), cmocka_unit_test(cnn_cuttle_to_torch),
                                     cmocka_unit_test(mlp_torch_to_cuttle), cmocka_unit_test(cnn_torch_to_cuttle),
                                     cmocka_unit_test(resnet18_cuttle_to_torch), cmocka_unit_test(resnet18_torch_to_cuttle),
                                     cmocka_unit_test(resnet18_cuttle_eval_cli),
                                     cmocka_unit_test(resnets_state_dict_as_torchvision)};
  return cmocka_run_group_tests(tests, read_data, free_data);
}
