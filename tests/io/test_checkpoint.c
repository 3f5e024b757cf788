/* tests/io/test_checkpoint.c: model and training checkpoints (src/io/checkpoint.c).
 *
 * A model saved and loaded into a differently initialized one holds the same tensors; a mismatch of
 * any kind is named and changes nothing; files laid out as PyTorch writes them (with the
 * num_batches_tracked buffers cuttle lacks) load; a training run resumed from a checkpoint takes
 * exactly the step the uninterrupted run takes; and the checksum of the tensor bytes recorded at save
 * ("cuttle.checksum", XXH3_64, recomputed here with xxHash itself) refuses a damaged file. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "testutil.h"

/* Sequential(Linear(in, hidden), ReLU, Linear(hidden, out)) with its own generator seed. */
static ct_module *mlp(int64_t in, int64_t hidden, int64_t out, uint64_t seed, ct_device dev) {
  ct_generator g = ct_generator_new(seed);
  ct_module *c[3] = {ct_linear_new(in, hidden, 1, dev, &g), ct_relu_new(), ct_linear_new(hidden, out, 1, dev, &g)};
  for (int i = 0; i < 3; i++) ct_assert_nonnull(c[i]);
  return ct_assert_nonnull(ct_sequential_new(3, c));
}

/* Every named tensor of a equals b's (same names in the same order, same values). */
static void assert_same_named(int na, const ct_named_tensor *a, int nb, const ct_named_tensor *b) {
  assert_int_equal(na, nb);
  for (int i = 0; i < na; i++) {
    assert_string_equal(a[i].name, b[i].name);
    ct_assert_close(a[i].tensor, b[i].tensor, 0, 0);
  }
}

static void assert_same_modules(ct_module *a, ct_module *b) {
  ct_named_tensor ta[32], tb[32];
  int na = ct_module_named_tensors(a, 1, ta, 32), nb = ct_module_named_tensors(b, 1, tb, 32);
  assert_same_named(na, ta, nb, tb);
}

/* Host copies of every tensor of m, to check later that nothing changed. */
typedef struct {
  int n;
  double *v[32];
} snapshot;
static snapshot snap(ct_module *m) {
  snapshot s = {0};
  ct_named_tensor t[32];
  s.n = ct_module_named_tensors(m, 1, t, 32);
  for (int i = 0; i < s.n; i++) s.v[i] = ct_test_values(t[i].tensor);
  return s;
}
static void assert_unchanged(ct_module *m, snapshot *s) {
  ct_named_tensor t[32];
  assert_int_equal(ct_module_named_tensors(m, 1, t, 32), s->n);
  for (int i = 0; i < s->n; i++) {
    double *v = ct_test_values(t[i].tensor);
    assert_memory_equal(v, s->v[i], (size_t)ct_tensor_numel(t[i].tensor) * sizeof(double));
    free(v);
    free(s->v[i]);
  }
}

static void test_module_roundtrip(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/mlp.safetensors", dir);
  ct_module *a = mlp(4, 8, 3, 1, CT_DEVICE_CPU), *b = mlp(4, 8, 3, 2, CT_DEVICE_CPU);
  ct_assert_ok(ct_checkpoint_save(path, a, NULL, NULL));

  /* the file holds the state_dict under PyTorch's names, and the format tag */
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  assert_int_equal(ct_safetensors_count(f), 4);
  const char *keys[4] = {"0.bias", "0.weight", "2.bias", "2.weight"};
  for (int i = 0; i < 4; i++) assert_true(ct_safetensors_find(f, keys[i]) >= 0);
  assert_string_equal(ct_safetensors_metadata(f, "format"), CT_CHECKPOINT_FORMAT);
  assert_null(ct_safetensors_metadata(f, "epoch"));
  ct_safetensors_close(f);

  ct_checkpoint_meta meta = {.epoch = 99};
  ct_assert_ok(ct_checkpoint_load(path, b, NULL, &meta));
  assert_same_modules(a, b);
  assert_int_equal(meta.has_training_state, 0);
  assert_int_equal(meta.epoch, 0);
  ct_module_free(a);
  ct_module_free(b);
  ct_test_rmdir(dir);
}

static void test_mismatch_changes_nothing(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/mlp.safetensors", dir);
  ct_module *a = mlp(4, 8, 3, 1, CT_DEVICE_CPU);
  ct_assert_ok(ct_checkpoint_save(path, a, NULL, NULL));

  /* The first layer fits; the last does not, so the first must not have been loaded either. */
  ct_module *b = mlp(4, 8, 5, 2, CT_DEVICE_CPU);
  snapshot s = snap(b);
  assert_int_equal(ct_checkpoint_load(path, b, NULL, NULL), CT_ESHAPE);
  ct_assert_error_contains(path);
  ct_assert_error_contains("2.weight: file has (3, 8), model has (5, 8)");
  assert_unchanged(b, &s);
  ct_module_free(b);

  b = mlp(4, 16, 3, 2, CT_DEVICE_CPU);
  assert_int_equal(ct_checkpoint_load(path, b, NULL, NULL), CT_ESHAPE);
  ct_assert_error_contains("0.weight: file has (8, 4), model has (16, 4)");
  ct_module_free(b);

  /* A model without the first bias: the file's extra key is an error (strict, as PyTorch). */
  ct_generator g = ct_generator_new(3);
  ct_module *c[3] = {ct_linear_new(4, 8, 0, CT_DEVICE_CPU, &g), ct_relu_new(), ct_linear_new(8, 3, 1, CT_DEVICE_CPU, &g)};
  b = ct_assert_nonnull(ct_sequential_new(3, c));
  s = snap(b);
  assert_int_equal(ct_checkpoint_load(path, b, NULL, NULL), CT_EFORMAT);
  ct_assert_error_contains("unexpected key \"0.bias\"");
  assert_unchanged(b, &s);
  ct_module_free(b);

  /* A model with one more layer: a missing key. */
  ct_generator g2 = ct_generator_new(4);
  ct_module *d[4] = {ct_linear_new(4, 8, 1, CT_DEVICE_CPU, &g2), ct_relu_new(), ct_linear_new(8, 3, 1, CT_DEVICE_CPU, &g2),
                     ct_linear_new(3, 3, 1, CT_DEVICE_CPU, &g2)};
  b = ct_assert_nonnull(ct_sequential_new(4, d));
  s = snap(b);
  assert_int_equal(ct_checkpoint_load(path, b, NULL, NULL), CT_EFORMAT);
  ct_assert_error_contains("missing key \"3.weight\"");
  assert_unchanged(b, &s);
  ct_module_free(b);

  /* A file that is not a checkpoint at all. */
  snprintf(path, sizeof path, "%s/missing.safetensors", dir);
  b = mlp(4, 8, 3, 2, CT_DEVICE_CPU);
  assert_int_equal(ct_checkpoint_load(path, b, NULL, NULL), CT_EIO);
  assert_int_equal(ct_checkpoint_load(NULL, b, NULL, NULL), CT_EINVAL);
  ct_module_free(b);
  ct_module_free(a);
  ct_test_rmdir(dir);
}

/* A state_dict as PyTorch saves it (safetensors.torch.save_file): BatchNorm's num_batches_tracked
 * (int64, 0-dim) loads into the module's, float64 tensors convert into the float32 model, integer
 * ones do not, and a file without num_batches_tracked loads and leaves the count as it was. */
static void test_pytorch_layout(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/torch.safetensors", dir);
  ct_module *c[2] = {ct_linear_new(3, 2, 1, CT_DEVICE_CPU, NULL), ct_batchnorm2d_new(2, 0, 0, CT_DEVICE_CPU)};
  ct_module *m = ct_assert_nonnull(ct_sequential_new(2, c));
  const double w[6] = {0.5, -1, 2, 0.25, 3, -4}, b[2] = {0.125, -0.5};
  const double bw[2] = {1.5, 2}, bb[2] = {-1, 1}, rm[2] = {0.1, 0.2}, rv[2] = {1.1, 1.2};
  int64_t ws[2] = {2, 3}, two = 2, nbt = 1234;
  ct_tensor *ts[7] = {ct_from_host(w, 2, ws, CT_F64, CT_DEVICE_CPU),  ct_from_host(b, 1, &two, CT_F64, CT_DEVICE_CPU),
                      ct_from_host(bw, 1, &two, CT_F64, CT_DEVICE_CPU), ct_from_host(bb, 1, &two, CT_F64, CT_DEVICE_CPU),
                      ct_from_host(rm, 1, &two, CT_F64, CT_DEVICE_CPU), ct_from_host(rv, 1, &two, CT_F64, CT_DEVICE_CPU),
                      ct_from_host(&nbt, 0, NULL, CT_I64, CT_DEVICE_CPU)};
  const char *names[7] = {"0.weight",       "0.bias",         "1.weight",           "1.bias",
                          "1.running_mean", "1.running_var", "1.num_batches_tracked"};
  ct_metadata_kv pt = {"format", "pt"};
  ct_assert_ok(ct_safetensors_save(path, 7, names, ts, 1, &pt));
  ct_checkpoint_meta meta;
  ct_assert_ok(ct_checkpoint_load(path, m, NULL, &meta));
  assert_int_equal(meta.has_training_state, 0);
  ct_named_tensor nt[8];
  assert_int_equal(ct_module_named_tensors(m, 1, nt, 8), 7);
  for (int i = 0; i < 7; i++) {
    assert_string_equal(nt[i].name, names[i]);
    assert_int_equal(ct_tensor_dtype(nt[i].tensor), i < 6 ? CT_F32 : CT_I64);
    ct_assert_close(nt[i].tensor, ts[i], 1e-7, 1e-7);
  }

  /* without num_batches_tracked (PyTorch before 0.4.1): loads, and the count stays 1234 */
  ct_assert_ok(ct_safetensors_save(path, 6, names, ts, 1, &pt));
  ct_assert_ok(ct_checkpoint_load(path, m, NULL, NULL));
  assert_int_equal((int64_t)ct_item(nt[6].tensor), 1234);

  /* a num_batches_tracked that is not an integer does not convert into the int64 buffer */
  ct_tensor *f = ct_assert_nonnull(ct_scalar(1, CT_F32, CT_DEVICE_CPU));
  ct_tensor *ts2[7];
  memcpy(ts2, ts, sizeof ts2);
  ts2[6] = f;
  ct_assert_ok(ct_safetensors_save(path, 7, names, ts2, 0, NULL));
  assert_int_not_equal(ct_checkpoint_load(path, m, NULL, NULL), CT_OK);
  ct_assert_error_contains("1.num_batches_tracked");

  /* integers do not convert into a float model */
  ct_tensor *wi = ct_assert_nonnull(ct_cast(ts[0], CT_I32));
  memcpy(ts2, ts, sizeof ts2);
  ts2[0] = wi;
  ct_assert_ok(ct_safetensors_save(path, 7, names, ts2, 0, NULL));
  snapshot s = snap(m);
  assert_int_equal(ct_checkpoint_load(path, m, NULL, NULL), CT_EDTYPE);
  ct_assert_error_contains("0.weight: file has dtype I32, model has float32");
  assert_unchanged(m, &s);

  /* a checkpoint of a later format is refused */
  ct_metadata_kv v3 = {"format", "cuttle-checkpoint-3"};
  ct_assert_ok(ct_safetensors_save(path, 7, names, ts, 1, &v3));
  assert_int_equal(ct_checkpoint_load(path, m, NULL, NULL), CT_EFORMAT);
  ct_assert_error_contains("cuttle-checkpoint-3");

  ct_tensor_free(wi);
  ct_tensor_free(f);
  for (int i = 0; i < 7; i++) ct_tensor_free(ts[i]);
  ct_module_free(m);
  ct_test_rmdir(dir);
}

/* One optimizer step of m on a fixed batch: loss = sum(m(x)^2). */
static void train_step(ct_module *m, ct_optimizer *o) {
  const float xv[8] = {0.5f, -1, 2, 0.25f, -0.75f, 1.5f, 0.1f, -2};
  int64_t xs[2] = {2, 4};
  ct_scope_begin();
  ct_tensor *x = ct_from_host(xv, 2, xs, CT_F32, CT_DEVICE_CPU);
  ct_tensor *y = ct_module_forward(m, x);
  ct_tensor *loss = ct_sum(ct_mul(y, y), 0, NULL, 0);
  ct_assert_nonnull(loss);
  ct_optimizer_zero_grad(o);
  ct_assert_ok(ct_backward(loss));
  ct_assert_ok(ct_optimizer_step(o));
  ct_scope_end();
}

static void assert_same_optimizers(ct_optimizer *a, ct_optimizer *b) {
  ct_named_tensor ta[32], tb[32];
  int na = ct_optimizer_named_state(a, ta, 32), nb = ct_optimizer_named_state(b, tb, 32);
  assert_true(na > 0);
  assert_same_named(na, ta, nb, tb);
  assert_int_equal(ct_optimizer_steps(a), ct_optimizer_steps(b));
  assert_true(ct_optimizer_lr(a) == ct_optimizer_lr(b));
}

static void check_resume(ct_optim_opts opts) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/train.safetensors", dir);
  ct_module *a = mlp(4, 8, 3, 1, CT_DEVICE_CPU), *b = mlp(4, 8, 3, 2, CT_DEVICE_CPU);
  ct_optimizer *oa = ct_assert_nonnull(ct_optimizer_new(a, &opts));
  ct_optimizer *ob = ct_assert_nonnull(ct_optimizer_new(b, &opts));
  train_step(a, oa);
  train_step(a, oa);
  ct_optimizer_set_lr(oa, 0.0123456789012345678);
  ct_metadata_kv extra[1] = {{"best_accuracy", "0.875"}};
  ct_checkpoint_meta meta = {.epoch = 3, .rng = {.seed = 7, .offset = 123456789012345ULL}, .n_extra = 1, .extra = extra};
  ct_assert_ok(ct_checkpoint_save(path, a, oa, &meta));

  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  assert_string_equal(ct_safetensors_metadata(f, "epoch"), "3");
  assert_string_equal(ct_safetensors_metadata(f, "rng_offset"), "123456789012345");
  assert_string_equal(ct_safetensors_metadata(f, "optimizer.steps"), "2");
  static const char *const kinds[] = {[CT_OPTIM_SGD] = "sgd", [CT_OPTIM_ADAM] = "adam", [CT_OPTIM_ADAMW] = "adamw"};
  assert_string_equal(ct_safetensors_metadata(f, "optimizer"), kinds[opts.kind]);
  assert_string_equal(ct_safetensors_metadata(f, "best_accuracy"), "0.875");
  assert_true(ct_safetensors_find(f, opts.kind == CT_OPTIM_SGD ? "optimizer.state.0.weight.momentum_buffer"
                                                                : "optimizer.state.2.bias.exp_avg_sq") >= 0);
  ct_safetensors_close(f);

  ct_checkpoint_meta got;
  ct_assert_ok(ct_checkpoint_load(path, b, ob, &got));
  assert_same_modules(a, b);
  assert_same_optimizers(oa, ob);
  assert_int_equal(got.has_training_state, 1);
  assert_int_equal(got.epoch, 3);
  assert_true(got.rng.seed == 7 && got.rng.offset == 123456789012345ULL);
  assert_int_equal(got.n_extra, 0);
  assert_int_equal(got.has_optimizer, 1);
  assert_int_equal(got.optimizer, opts.kind);

  /* the resumed run takes the same step as the uninterrupted one */
  train_step(a, oa);
  train_step(b, ob);
  assert_same_modules(a, b);
  assert_same_optimizers(oa, ob);

  /* the model part alone loads without the optimizer (its keys are skipped) */
  ct_module *c = mlp(4, 8, 3, 5, CT_DEVICE_CPU);
  ct_assert_ok(ct_checkpoint_load(path, c, NULL, NULL));
  ct_module_free(c);

  ct_optimizer_free(oa);
  ct_optimizer_free(ob);
  ct_module_free(a);
  ct_module_free(b);
  ct_test_rmdir(dir);
}

static void test_resume_adam(void **state) { check_resume((ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 0.01}); }
static void test_resume_adamw(void **state) {
  check_resume((ct_optim_opts){.kind = CT_OPTIM_ADAMW, .lr = 0.01, .weight_decay = 0.1});
}
static void test_resume_sgd_momentum(void **state) {
  check_resume((ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 0.05, .momentum = 0.9, .dampening = 0.1});
}

static void test_optimizer_mismatch(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096], model_only[4096];
  snprintf(path, sizeof path, "%s/adam.safetensors", dir);
  snprintf(model_only, sizeof model_only, "%s/model.safetensors", dir);
  ct_module *a = mlp(4, 8, 3, 1, CT_DEVICE_CPU), *b = mlp(4, 8, 3, 2, CT_DEVICE_CPU);
  ct_optimizer *oa = ct_assert_nonnull(ct_optimizer_new(a, &(ct_optim_opts){.kind = CT_OPTIM_ADAM}));
  train_step(a, oa);
  ct_assert_ok(ct_checkpoint_save(path, a, oa, NULL));
  ct_assert_ok(ct_checkpoint_save(model_only, a, NULL, NULL));

  /* an SGD-with-momentum optimizer cannot take Adam's state: the error names both kinds, and the
   * model is left alone */
  ct_optimizer *sgd = ct_assert_nonnull(ct_optimizer_new(b, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .momentum = 0.9}));
  snapshot s = snap(b);
  assert_int_equal(ct_checkpoint_load(path, b, sgd, NULL), CT_EINVAL);
  ct_assert_error_contains("holds the state of an adam optimizer, but the optimizer given is sgd");
  assert_unchanged(b, &s);
  assert_int_equal(ct_optimizer_steps(sgd), 0);

  /* a model-only file has no optimizer state to load */
  assert_int_equal(ct_checkpoint_load(model_only, b, sgd, NULL), CT_EFORMAT);
  ct_assert_error_contains("no optimizer state");

  /* reserved metadata keys cannot be overridden */
  ct_metadata_kv bad = {"epoch", "1"};
  ct_checkpoint_meta meta = {.n_extra = 1, .extra = &bad};
  assert_int_equal(ct_checkpoint_save(model_only, a, NULL, &meta), CT_EINVAL);
  ct_assert_error_contains("reserved");
  assert_int_equal(ct_checkpoint_save(model_only, NULL, NULL, NULL), CT_EINVAL);

  ct_optimizer_free(sgd);
  ct_optimizer_free(oa);
  ct_module_free(a);
  ct_module_free(b);
  ct_test_rmdir(dir);
}

/* AdamW is recorded as "adamw", not as the Adam whose state slots it shares: it loads into AdamW
 * only, and the error for Adam names both. */
static void test_adamw_kind_is_exact(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/adamw.safetensors", dir);
  ct_module *a = mlp(4, 8, 3, 1, CT_DEVICE_CPU), *b = mlp(4, 8, 3, 2, CT_DEVICE_CPU);
  ct_optimizer *oa = ct_assert_nonnull(ct_optimizer_new(a, &(ct_optim_opts){.kind = CT_OPTIM_ADAMW, .lr = 0.01}));
  assert_int_equal(ct_optimizer_kind(oa), CT_OPTIM_ADAMW);
  train_step(a, oa);
  ct_assert_ok(ct_checkpoint_save(path, a, oa, &(ct_checkpoint_meta){.epoch = 1}));

  /* the kind read back, with no optimizer to load into */
  ct_checkpoint_meta got = {0};
  ct_assert_ok(ct_checkpoint_load(path, b, NULL, &got));
  assert_int_equal(got.has_optimizer, 1);
  assert_int_equal(got.optimizer, CT_OPTIM_ADAMW);

  /* into Adam: refused, naming both, and nothing changes */
  ct_module *c = mlp(4, 8, 3, 3, CT_DEVICE_CPU);
  ct_optimizer *adam = ct_assert_nonnull(ct_optimizer_new(c, &(ct_optim_opts){.kind = CT_OPTIM_ADAM}));
  snapshot s = snap(c);
  assert_int_equal(ct_checkpoint_load(path, c, adam, NULL), CT_EINVAL);
  ct_assert_error_contains(path);
  ct_assert_error_contains("holds the state of an adamw optimizer, but the optimizer given is adam");
  assert_unchanged(c, &s);
  assert_int_equal(ct_optimizer_steps(adam), 0);

  /* into AdamW: restored, and the next step is the uninterrupted run's */
  ct_optimizer *ob = ct_assert_nonnull(ct_optimizer_new(b, &(ct_optim_opts){.kind = CT_OPTIM_ADAMW, .lr = 0.01}));
  ct_assert_ok(ct_checkpoint_load(path, b, ob, NULL));
  assert_same_optimizers(oa, ob);
  train_step(a, oa);
  train_step(b, ob);
  assert_same_modules(a, b);

  /* A version-1 file wrote "adam" for AdamW too, so there "adam" loads into either kind. */
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  int n = ct_safetensors_count(f);
  const char *names[32];
  ct_tensor *ts[32];
  assert_true(n <= 32);
  for (int i = 0; i < n; i++) {
    ct_safetensors_info in;
    ct_assert_ok(ct_safetensors_info_at(f, i, &in));
    names[i] = in.name;
    ts[i] = ct_assert_nonnull(ct_safetensors_get(f, in.name, CT_DEVICE_CPU));
  }
  ct_metadata_kv v1[] = {{"format", "cuttle-checkpoint-1"}, {"optimizer", "adam"}, {"optimizer.lr", "0.01"},
                         {"optimizer.steps", "1"}};
  char old_path[4096];
  snprintf(old_path, sizeof old_path, "%s/v1.safetensors", dir);
  ct_assert_ok(ct_safetensors_save(old_path, n, names, ts, 4, v1));
  ct_assert_ok(ct_checkpoint_load(old_path, b, ob, &got));
  assert_int_equal(got.optimizer, CT_OPTIM_ADAM);
  ct_assert_ok(ct_checkpoint_load(old_path, c, adam, NULL));
  /* but never into SGD, and an unknown kind is a malformed file */
  ct_optimizer *sgd = ct_assert_nonnull(ct_optimizer_new(c, &(ct_optim_opts){.kind = CT_OPTIM_SGD}));
  assert_int_equal(ct_checkpoint_load(old_path, c, sgd, NULL), CT_EINVAL);
  v1[1].value = "lion";
  ct_assert_ok(ct_safetensors_save(old_path, n, names, ts, 4, v1));
  assert_int_equal(ct_checkpoint_load(old_path, c, NULL, NULL), CT_EFORMAT);
  ct_assert_error_contains("\"lion\"");
  for (int i = 0; i < n; i++) ct_tensor_free(ts[i]);
  ct_safetensors_close(f);

  ct_optimizer_free(sgd);
  ct_optimizer_free(adam);
  ct_optimizer_free(ob);
  ct_optimizer_free(oa);
  ct_module_free(a);
  ct_module_free(b);
  ct_module_free(c);
  ct_test_rmdir(dir);
}

/* SGD with momentum and SGD without are one kind; their state differs and is checked by key. */
static void test_sgd_momentum_state(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/sgd.safetensors", dir);
  ct_module *a = mlp(4, 8, 3, 1, CT_DEVICE_CPU), *b = mlp(4, 8, 3, 2, CT_DEVICE_CPU);
  ct_optimizer *oa = ct_assert_nonnull(ct_optimizer_new(a, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .momentum = 0.9}));
  train_step(a, oa);
  ct_assert_ok(ct_checkpoint_save(path, a, oa, NULL));
  ct_optimizer *plain = ct_assert_nonnull(ct_optimizer_new(b, &(ct_optim_opts){.kind = CT_OPTIM_SGD}));
  assert_int_equal(ct_checkpoint_load(path, b, plain, NULL), CT_EFORMAT);
  ct_assert_error_contains("unexpected key \"optimizer.state.0.bias.momentum_buffer\"");
  ct_optimizer *ob = ct_assert_nonnull(ct_optimizer_new(b, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .momentum = 0.9}));
  ct_assert_ok(ct_checkpoint_load(path, b, ob, NULL));
  assert_same_optimizers(oa, ob); /* the momentum buffers came back */
  ct_optimizer_free(plain);
  ct_optimizer_free(ob);
  ct_optimizer_free(oa);
  ct_module_free(a);
  ct_module_free(b);
  ct_test_rmdir(dir);
}

/* Saving over a checkpoint leaves no temporary file, and removes one that a killed save (of a
 * process that no longer exists) left behind, but never one of a live process. */
static void test_save_leaves_no_temporary(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096], stale[4200], live[4200];
  snprintf(path, sizeof path, "%s/m.safetensors", dir);
  /* pid 0x7ffffff0 is above any pid_max, so no process has it */
  snprintf(stale, sizeof stale, "%s.tmp.%d", path, 0x7ffffff0);
  snprintf(live, sizeof live, "%s.tmp.1", path); /* pid 1 is always alive */
  FILE *f1 = fopen(stale, "w"), *f2 = fopen(live, "w");
  assert_non_null(f1);
  assert_non_null(f2);
  fputs("torn", f1), fputs("live", f2);
  fclose(f1), fclose(f2);
  ct_module *a = mlp(4, 8, 3, 1, CT_DEVICE_CPU);
  ct_assert_ok(ct_checkpoint_save(path, a, NULL, NULL));
  ct_assert_ok(ct_checkpoint_save(path, a, NULL, NULL));
  assert_int_equal(access(stale, F_OK), -1);
  assert_int_equal(access(live, F_OK), 0);
  unlink(live);
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  int files = 0;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') {
      assert_string_equal(e->d_name, "m.safetensors");
      files++;
    }
  closedir(d);
  assert_int_equal(files, 1);
  ct_module_free(a);
  ct_test_rmdir(dir);
}

/* ---- the checksum of the tensor bytes (CT_SAFETENSORS_CHECKSUM_KEY) */

/* The whole file at path, malloc'd, into *n bytes. */
static uint8_t *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  assert_true(size >= 0);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = ct_assert_nonnull(malloc((size_t)size + 1));
  assert_int_equal(fread(b, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  *n = (size_t)size;
  return b;
}

static void write_all_to(const char *path, const uint8_t *b, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* Where the byte buffer starts in a file's bytes b: after the 8-byte length N and N bytes of header. */
static size_t buffer_start(const uint8_t *b) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | b[i];
  return 8 + (size_t)n;
}

/* The file at path, with the byte at `at` xor'ed with 0x01, saved as damaged; the checkpoint load
 * into m (snapshotted first) and ct_safetensors_open of it fail with CT_EFORMAT naming the file
 * and both values, and m is unchanged. */
static void check_damaged(const char *path, const char *damaged, size_t at, ct_module *m) {
  size_t n = 0;
  uint8_t *b = read_all(path, &n);
  assert_true(at < n);
  b[at] ^= 0x01;
  write_all_to(damaged, b, n);
  char recorded[64], computed[64];
  ct_safetensors *orig = ct_assert_nonnull(ct_safetensors_open(path));
  const char *v = ct_safetensors_metadata(orig, CT_SAFETENSORS_CHECKSUM_KEY);
  assert_non_null(v);
  snprintf(recorded, sizeof recorded, "(xxh3_64 %s recorded", v + strlen("xxh3_64:"));
  ct_safetensors_close(orig);
  size_t start = buffer_start(b);
  snprintf(computed, sizeof computed, "%016llx computed)", (unsigned long long)XXH3_64bits(b + start, n - start));

  snapshot s = snap(m);
  assert_int_equal(ct_checkpoint_load(damaged, m, NULL, NULL), CT_EFORMAT);
  ct_assert_error_contains(damaged);
  ct_assert_error_contains("the tensor bytes do not match the checksum recorded at save");
  ct_assert_error_contains(recorded);
  ct_assert_error_contains(computed);
  ct_assert_error_contains("the file is damaged; use another checkpoint");
  assert_unchanged(m, &s);

  assert_null(ct_safetensors_open(damaged));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains(damaged);
  ct_assert_error_contains("do not match the checksum");
  assert_null(ct_safetensors_parse(b, n, "ck.safetensors"));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("ck.safetensors: the tensor bytes do not match the checksum recorded at save (xxh3_64 ");
  free(b);
}

/* A checkpoint records the checksum last in its metadata, equal to XXH3_64 of its byte buffer
 * computed here from the file's bytes, and loads; a byte flipped inside a tensor or at the very end
 * of the file fails the load and the open; the file with the byte flipped back loads again. */
static void test_checksum(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096], damaged[4200];
  snprintf(path, sizeof path, "%s/ck.safetensors", dir);
  snprintf(damaged, sizeof damaged, "%s/damaged.safetensors", dir);
  ct_module *a = mlp(4, 8, 3, 1, CT_DEVICE_CPU), *b = mlp(4, 8, 3, 2, CT_DEVICE_CPU);
  ct_optimizer *opt = ct_assert_nonnull(ct_optimizer_new(a, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 0.01}));
  ct_assert_ok(ct_optimizer_init_state(opt));
  ct_metadata_kv extra = {"note", "x"};
  ct_assert_ok(ct_checkpoint_save(path, a, opt, &(ct_checkpoint_meta){.epoch = 3, .n_extra = 1, .extra = &extra}));

  size_t n = 0;
  uint8_t *bytes = read_all(path, &n);
  size_t start = buffer_start(bytes);
  char want[32];
  snprintf(want, sizeof want, "xxh3_64:%016llx", (unsigned long long)XXH3_64bits(bytes + start, n - start));
  /* the same hash streamed in uneven pieces, as the writer feeds it tensor by tensor */
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  assert_int_equal(XXH3_64bits_reset(&st), XXH_OK);
  for (size_t at = start, step = 1; at < n; at += step, step = step * 3 % 97 + 1)
    assert_int_equal(XXH3_64bits_update(&st, bytes + at, at + step <= n ? step : n - at), XXH_OK);
  char streamed[32];
  snprintf(streamed, sizeof streamed, "xxh3_64:%016llx", (unsigned long long)XXH3_64bits_digest(&st));
  assert_string_equal(streamed, want);

  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  int nm = ct_safetensors_metadata_count(f);
  const char *k = NULL, *v = NULL;
  ct_assert_ok(ct_safetensors_metadata_at(f, nm - 1, &k, &v));
  assert_string_equal(k, CT_SAFETENSORS_CHECKSUM_KEY);
  assert_string_equal(k, "cuttle.checksum");
  assert_string_equal(v, want);
  assert_string_equal(ct_safetensors_metadata(f, "note"), "x");
  ct_safetensors_info in;
  ct_assert_ok(ct_safetensors_info_at(f, ct_safetensors_find(f, "2.weight"), &in));
  ct_safetensors_close(f);

  ct_optimizer *opt_b = ct_assert_nonnull(ct_optimizer_new(b, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 0.5}));
  ct_assert_ok(ct_checkpoint_load(path, b, opt_b, NULL));
  assert_same_modules(a, b);

  ct_module *c = mlp(4, 8, 3, 3, CT_DEVICE_CPU);
  check_damaged(path, damaged, start + in.offset + in.nbytes / 2, c); /* inside 2.weight's data */
  check_damaged(path, damaged, n - 1, c);                             /* the file's last byte */
  write_all_to(damaged, bytes, n); /* undamaged again */
  ct_assert_ok(ct_checkpoint_load(damaged, c, NULL, NULL));
  assert_same_modules(a, c);
  free(bytes);
  ct_optimizer_free(opt);
  ct_optimizer_free(opt_b);
  ct_module_free(a);
  ct_module_free(b);
  ct_module_free(c);
  ct_test_rmdir(dir);
}

/* A file of one 4-byte U8 tensor whose metadata records checksum value v, parsed from memory. */
static ct_safetensors *parse_with_checksum(const char *v) {
  char json[256];
  int len = snprintf(json, sizeof json,
                     "{\"__metadata__\":{\"cuttle.checksum\":\"%s\"},\"t\":{\"dtype\":\"U8\",\"shape\":[4],"
                     "\"data_offsets\":[0,4]}}",
                     v);
  uint8_t file[300];
  for (int i = 0; i < 8; i++) file[i] = (uint8_t)((uint64_t)len >> (8 * i));
  memcpy(file + 8, json, (size_t)len);
  memcpy(file + 8 + len, "\x01\x02\x03\x04", 4);
  return ct_safetensors_parse(file, 8 + (size_t)len + 4, "hand.safetensors");
}

/* A value that is not "xxh3_64:" and 16 lowercase hex digits is refused; the right one parses. */
static void test_checksum_malformed(void **state) {
  char good[32];
  snprintf(good, sizeof good, "xxh3_64:%016llx", (unsigned long long)XXH3_64bits("\x01\x02\x03\x04", 4));
  ct_safetensors *f = ct_assert_nonnull(parse_with_checksum(good));
  ct_safetensors_close(f);
  char wrong[32];
  snprintf(wrong, sizeof wrong, "xxh3_64:%016llx", (unsigned long long)XXH3_64bits("\x01\x02\x03\x05", 4));
  const char *bad[] = {"",
                       "xxh3_64:",
                       "xxh3_64:0123456789abcde",
                       "xxh3_64:0123456789abcdef0",
                       "xxh3_64:0123456789ABCDEF",
                       "xxh3_64:0123456789abcdeg",
                       "xxh3_32:0123456789abcdef",
                       "XXH3_64:0123456789abcdef",
                       "xxh3_64 0123456789abcdef",
                       "xxh3_64:-123456789abcdef",
                       "xxh3_64:0x23456789abcdef"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_null(parse_with_checksum(bad[i]));
    assert_int_equal(ct_last_status(), CT_EFORMAT);
    ct_assert_error_contains("hand.safetensors: metadata \"cuttle.checksum\" = \"");
    ct_assert_error_contains("is not a checksum of the form \"xxh3_64:\" and 16 lowercase hex digits");
  }
  assert_null(parse_with_checksum(wrong));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("hand.safetensors: the tensor bytes do not match the checksum recorded at save");
}

static ct_tensor *identity_forward(ct_module *self, ct_tensor *x) { return ct_tensor_retain(x); }

/* Files without the key (PyTorch's, safetensors.torch.save_file's, cuttle's before checksums) load
 * as before; the key is reserved in both writers; a checkpoint with no tensor bytes records the
 * hash of nothing. */
static void test_checksum_absent_reserved_empty(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/plain.safetensors", dir);
  ct_module *a = mlp(4, 8, 3, 1, CT_DEVICE_CPU), *b = mlp(4, 8, 3, 2, CT_DEVICE_CPU);
  ct_named_tensor t[8];
  int n = ct_module_named_tensors(a, 1, t, 8);
  const char *names[8];
  ct_tensor *ts[8];
  for (int i = 0; i < n; i++) names[i] = t[i].name, ts[i] = t[i].tensor;
  ct_metadata_kv fmt = {"format", CT_CHECKPOINT_FORMAT};
  ct_assert_ok(ct_safetensors_save(path, n, names, ts, 1, &fmt));
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  assert_null(ct_safetensors_metadata(f, CT_SAFETENSORS_CHECKSUM_KEY)); /* the plain writer adds none */
  assert_int_equal(ct_safetensors_metadata_count(f), 1);
  ct_safetensors_close(f);
  ct_assert_ok(ct_checkpoint_load(path, b, NULL, NULL));
  assert_same_modules(a, b);

  /* reserved: ct_safetensors_save refuses it, and so does ct_checkpoint_save among the extras */
  ct_metadata_kv ck = {CT_SAFETENSORS_CHECKSUM_KEY, "xxh3_64:0123456789abcdef"};
  assert_int_equal(ct_safetensors_save(path, n, names, ts, 1, &ck), CT_EINVAL);
  ct_assert_error_contains("\"cuttle.checksum\" is reserved");
  assert_int_equal(ct_checkpoint_save(path, a, NULL, &(ct_checkpoint_meta){.n_extra = 1, .extra = &ck}), CT_EINVAL);
  ct_assert_error_contains("\"cuttle.checksum\" is reserved");
  ct_assert_ok(ct_checkpoint_load(path, b, NULL, NULL)); /* the file was left as it was */

  /* no tensor bytes at all: a module without tensors, and one whose only tensors are empty */
  ct_module *relu = ct_assert_nonnull(ct_sequential_new(1, (ct_module *[]){ct_relu_new()}));
  ct_assert_ok(ct_checkpoint_save(path, relu, NULL, NULL));
  f = ct_assert_nonnull(ct_safetensors_open(path));
  assert_int_equal(ct_safetensors_count(f), 0);
  assert_string_equal(ct_safetensors_metadata(f, CT_SAFETENSORS_CHECKSUM_KEY), "xxh3_64:2d06800538d394c2");
  ct_safetensors_close(f);
  ct_assert_ok(ct_checkpoint_load(path, relu, NULL, NULL));
  ct_module *empty = ct_assert_nonnull(ct_module_new("Empty", identity_forward, NULL, NULL));
  int64_t shape[2] = {0, 3};
  ct_assert_ok(ct_module_register_parameter(empty, "weight", ct_zeros(2, shape, CT_F32, CT_DEVICE_CPU)));
  ct_assert_ok(ct_module_register_buffer(empty, "count", ct_zeros(1, shape, CT_I64, CT_DEVICE_CPU)));
  ct_assert_ok(ct_checkpoint_save(path, empty, NULL, NULL));
  f = ct_assert_nonnull(ct_safetensors_open(path));
  assert_int_equal(ct_safetensors_count(f), 2); /* weight (0, 3), count (0,) */
  assert_string_equal(ct_safetensors_metadata(f, CT_SAFETENSORS_CHECKSUM_KEY), "xxh3_64:2d06800538d394c2");
  ct_safetensors_close(f);
  ct_assert_ok(ct_checkpoint_load(path, empty, NULL, NULL));
  ct_module_free(empty);
  ct_module_free(relu);
  ct_module_free(a);
  ct_module_free(b);
  ct_test_rmdir(dir);
}

/* On a GPU: tensors are copied to the host to save, and loaded into the module's own device tensors. */
static void test_gpu_roundtrip(void **state) {
  if (ct_device_count(CT_CUDA) == 0) {
    printf("no GPU: skipping the GPU checkpoint round trip\n");
    skip();
  }
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/gpu.safetensors", dir);
  ct_module *a = mlp(4, 8, 3, 1, CT_DEVICE_CUDA(0)), *b = mlp(4, 8, 3, 2, CT_DEVICE_CPU), *c = mlp(4, 8, 3, 3, CT_DEVICE_CUDA(0));
  ct_assert_ok(ct_checkpoint_save(path, a, NULL, NULL));
  ct_assert_ok(ct_checkpoint_load(path, b, NULL, NULL)); /* GPU-saved file into a CPU model */
  ct_assert_ok(ct_checkpoint_load(path, c, NULL, NULL)); /* and into a GPU model */
  assert_same_modules(a, b);
  assert_same_modules(a, c);
  ct_named_tensor t[8];
  ct_module_named_tensors(c, 1, t, 8);
  assert_int_equal(ct_tensor_device(t[0].tensor).kind, CT_CUDA);
  ct_module_free(a);
  ct_module_free(b);
  ct_module_free(c);
  ct_test_rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_module_roundtrip),   cmocka_unit_test(test_mismatch_changes_nothing),
      cmocka_unit_test(test_pytorch_layout),     cmocka_unit_test(test_resume_adam),
      cmocka_unit_test(test_resume_adamw),       cmocka_unit_test(test_resume_sgd_momentum),
      cmocka_unit_test(test_optimizer_mismatch), cmocka_unit_test(test_adamw_kind_is_exact),
      cmocka_unit_test(test_sgd_momentum_state), cmocka_unit_test(test_save_leaves_no_temporary),
      cmocka_unit_test(test_checksum),           cmocka_unit_test(test_checksum_malformed),
      cmocka_unit_test(test_checksum_absent_reserved_empty),
      cmocka_unit_test(test_gpu_roundtrip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
