/* tests/core/test_fault_injection.c: out of memory at every allocation, in the style of SQLite's
 * malloc tests.
 *
 * Each operation (a training step of the mlp and of the cnn, a checkpoint save, a checkpoint load)
 * runs with its k-th allocation failing (host or device; src/core/alloc.c), for k = 1, 2, ... until
 * a run no longer reaches the k-th allocation. Every failing run must report CT_ENOMEM with a
 * message about memory, leak nothing (LeakSanitizer in the sanitizer build; the CPU allocator's
 * figures in every build), change nothing (parameters, optimizer state and step count bit for bit),
 * and leave everything usable: the same operation, run again without the fault, must give bit for
 * bit what a clean run gives. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "core/internal.h"

#define MAX_TENSORS 64

/* ---- the model's and the optimizer's state as bytes */
typedef struct {
  int n;
  ct_tensor *t[MAX_TENSORS];
  void *bytes[MAX_TENSORS];
  size_t nbytes[MAX_TENSORS];
  int64_t steps;
} state;

/* The tensors of m (with buffers) and of opt's state, in a fixed order. */
static int list_tensors(ct_module *m, ct_optimizer *opt, ct_tensor **out) {
  ct_named_tensor nt[MAX_TENSORS];
  int a = ct_module_named_tensors(m, 1, nt, MAX_TENSORS);
  assert_true(a <= MAX_TENSORS);
  for (int i = 0; i < a; i++) out[i] = nt[i].tensor;
  int b = opt ? ct_optimizer_named_state(opt, nt, MAX_TENSORS - a) : 0;
  assert_true(a + b <= MAX_TENSORS);
  for (int i = 0; i < b; i++) out[a + i] = nt[i].tensor;
  return a + b;
}

static size_t tensor_bytes(ct_tensor *t) {
  assert_true(ct_tensor_is_contiguous(t));
  return (size_t)ct_tensor_numel(t) * ct_dtype_size(ct_tensor_dtype(t));
}

static void state_take(state *s, ct_module *m, ct_optimizer *opt) {
  s->n = list_tensors(m, opt, s->t);
  for (int i = 0; i < s->n; i++) {
    s->nbytes[i] = tensor_bytes(s->t[i]);
    s->bytes[i] = malloc(s->nbytes[i]);
    memcpy(s->bytes[i], ct_tensor_data(s->t[i]), s->nbytes[i]);
  }
  s->steps = opt ? ct_optimizer_steps(opt) : 0;
}

/* m and opt hold exactly s's values (s may come from other objects with the same layout). */
static void state_assert_equal(const state *s, ct_module *m, ct_optimizer *opt, const char *when) {
  ct_tensor *t[MAX_TENSORS];
  int n = list_tensors(m, opt, t);
  if (n != s->n) fprintf(stderr, "%s: %d tensors, expected %d\n", when, n, s->n);
  assert_int_equal(n, s->n);
  for (int i = 0; i < n; i++) {
    assert_int_equal(tensor_bytes(t[i]), s->nbytes[i]);
    if (memcmp(ct_tensor_data(t[i]), s->bytes[i], s->nbytes[i]) != 0) {
      fprintf(stderr, "%s: tensor %d differs\n", when, i);
      fail();
    }
  }
  if (opt) assert_int_equal(ct_optimizer_steps(opt), s->steps);
}

static void state_restore(const state *s, ct_module *m, ct_optimizer *opt) {
  ct_tensor *t[MAX_TENSORS];
  assert_int_equal(list_tensors(m, opt, t), s->n);
  for (int i = 0; i < s->n; i++) memcpy(ct_tensor_data(t[i]), s->bytes[i], s->nbytes[i]);
  if (opt) ct_optimizer_set_steps(opt, s->steps);
}

static void state_free(state *s) {
  for (int i = 0; i < s->n; i++) free(s->bytes[i]);
  s->n = 0;
}

/* ---- what a failing run must report */
static size_t cpu_allocated(void) {
  ct_memory_stats st = {0};
  ct_assert_ok(ct_memory_stats_get(CT_DEVICE_CPU, &st));
  return st.allocated;
}

static void assert_oom_reported(ct_status s, const char *what, int64_t k) {
  const char *msg = ct_last_error();
  if (s != CT_ENOMEM || ct_last_status() != CT_ENOMEM || !msg[0] || !strstr(msg, "memory")) {
    fprintf(stderr, "%s, allocation %lld failing: status %d (last %d), error \"%s\"\n", what, (long long)k, (int)s,
            (int)ct_last_status(), msg);
    fail();
  }
}

/* Run op with its k-th allocation failing. Returns 1 when the fault was reached (and *s holds the
 * status), 0 when op completed before its k-th allocation. */
typedef ct_status (*op_fn)(void *ctx);
static int run_failing_at(int64_t k, op_fn op, void *ctx, ct_status *s) {
  ct_clear_error();
  ct__fault_inject_alloc(k);
  *s = op(ctx);
  int64_t fired = ct__fault_alloc_fired();
  ct__fault_inject_alloc(0);
  assert_true(fired <= 1);
  return fired == 1;
}

/* ---- a training step */
typedef struct {
  ct_module *m;
  ct_optimizer *opt;
  ct_tensor *x, *y;
} trainer;

static ct_status train_step(void *ctx) {
  trainer *t = ctx;
  ct_status s = ct_scope_begin();
  if (s != CT_OK) return s;
  ct_tensor *logits = ct_module_forward(t->m, t->x);
  ct_tensor *loss = ct_cross_entropy(logits, t->y, CT_REDUCTION_MEAN, 0);
  s = loss ? ct_backward(loss) : ct_last_status();
  if (s == CT_OK) s = ct_optimizer_step(t->opt);
  ct_optimizer_zero_grad(t->opt); /* a failed backward leaves .grad partly summed (autograd.h) */
  ct_scope_end();
  return s;
}

static trainer trainer_new(const char *model, int64_t batch) {
  ct_manual_seed(7);
  ct_generator g = ct_generator_new(1234);
  trainer t = {0};
  t.m = ct_assert_nonnull(ct_model_new(model, CT_DEVICE_CPU, &g));
  t.opt = ct_assert_nonnull(ct_optimizer_new(t.m, &(ct_optim_opts){.kind = CT_OPTIM_ADAM}));
  /* the moments exist (zeros) before the step, so that a half-applied update would show in them */
  ct_assert_ok(ct_optimizer_init_state(t.opt));
  int64_t xs[4] = {batch, 1, 28, 28};
  t.x = ct_assert_nonnull(ct_randn(4, xs, 0.0, 1.0, CT_F32, CT_DEVICE_CPU, &g));
  t.y = ct_assert_nonnull(ct_randint(1, &batch, 0, 10, CT_I64, CT_DEVICE_CPU, &g));
  return t;
}

static void trainer_free(trainer *t) {
  ct_tensor_free(t->x), ct_tensor_free(t->y);
  ct_optimizer_free(t->opt);
  ct_module_free(t->m);
}

/* Walk the fault through every allocation of one step of model; returns the number of points. */
static int64_t inject_train_step(const char *model, int warm_steps) {
  trainer t = trainer_new(model, 4);
  for (int i = 0; i < warm_steps; i++) ct_assert_ok(train_step(&t)); /* nonzero moments and t > 1 */
  state before, after;
  state_take(&before, t.m, t.opt);
  ct_assert_ok(train_step(&t));
  state_take(&after, t.m, t.opt);
  assert_int_equal(after.steps, before.steps + 1);
  state_restore(&before, t.m, t.opt);
  int64_t k = 1;
  for (;; k++) {
    size_t mem = cpu_allocated();
    ct_status s;
    if (!run_failing_at(k, train_step, &t, &s)) { /* the step no longer reaches the fault */
      ct_assert_ok(s);
      state_assert_equal(&after, t.m, t.opt, model);
      break;
    }
    assert_oom_reported(s, model, k);
    assert_int_equal(cpu_allocated(), mem);
    state_assert_equal(&before, t.m, t.opt, "after a failed step");
    ct_assert_ok(train_step(&t)); /* the same step again, without the fault */
    state_assert_equal(&after, t.m, t.opt, "after a failed step and a clean one");
    state_restore(&before, t.m, t.opt);
  }
  state_free(&before), state_free(&after);
  trainer_free(&t);
  return k - 1;
}

/* ---- checkpoints */
typedef struct {
  const char *path;
  ct_module *m;
  ct_optimizer *opt;
} ckpt;

static ct_status save_op(void *ctx) {
  ckpt *c = ctx;
  ct_checkpoint_meta meta = {.epoch = 3, .rng = {.seed = 5, .offset = 11}};
  return ct_checkpoint_save(c->path, c->m, c->opt, &meta);
}

static ct_status load_op(void *ctx) {
  ckpt *c = ctx;
  ct_checkpoint_meta meta;
  return ct_checkpoint_load(c->path, c->m, c->opt, &meta);
}

static char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)len + 1);
  assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return b;
}

static void assert_same_file(const char *path, const char *ref, size_t ref_n) {
  size_t n;
  char *b = read_file(path, &n);
  assert_int_equal(n, ref_n);
  assert_memory_equal(b, ref, n);
  free(b);
}

static int64_t inject_save(const char *dir, trainer *t) {
  char ref_path[4096], path[4096];
  snprintf(ref_path, sizeof ref_path, "%s/ref.safetensors", dir);
  snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
  ckpt ref = {ref_path, t->m, t->opt}, c = {path, t->m, t->opt};
  ct_assert_ok(save_op(&ref));
  size_t ref_n;
  char *ref_bytes = read_file(ref_path, &ref_n);
  int64_t k = 1;
  for (;; k++) {
    size_t mem = cpu_allocated();
    ct_status s;
    remove(path);
    if (!run_failing_at(k, save_op, &c, &s)) {
      ct_assert_ok(s);
      assert_same_file(path, ref_bytes, ref_n);
      break;
    }
    assert_oom_reported(s, "checkpoint save", k);
    assert_int_equal(cpu_allocated(), mem);
    ct_assert_ok(save_op(&c));
    assert_same_file(path, ref_bytes, ref_n);
  }
  free(ref_bytes);
  return k - 1;
}

/* Load the checkpoint of src (saved at path) into a differently initialized model and optimizer. */
static int64_t inject_load(const char *path, trainer *src) {
  state saved, before;
  state_take(&saved, src->m, src->opt);
  trainer t = trainer_new("mlp", 4);
  ct_assert_ok(train_step(&t)); /* other values than src's everywhere */
  ct_assert_ok(train_step(&t));
  state_take(&before, t.m, t.opt);
  ckpt c = {path, t.m, t.opt};
  int64_t k = 1;
  for (;; k++) {
    size_t mem = cpu_allocated();
    ct_status s;
    if (!run_failing_at(k, load_op, &c, &s)) {
      ct_assert_ok(s);
      state_assert_equal(&saved, t.m, t.opt, "after a clean load");
      break;
    }
    assert_oom_reported(s, "checkpoint load", k);
    assert_int_equal(cpu_allocated(), mem);
    state_assert_equal(&before, t.m, t.opt, "after a failed load");
    ct_assert_ok(load_op(&c));
    state_assert_equal(&saved, t.m, t.opt, "after a failed load and a clean one");
    state_restore(&before, t.m, t.opt);
  }
  state_free(&saved), state_free(&before);
  trainer_free(&t);
  return k - 1;
}

static void test_fault_injection(void **unused) {
  (void)unused;
  int64_t mlp = inject_train_step("mlp", 0);
  int64_t mlp_warm = inject_train_step("mlp", 1);
  int64_t cnn = inject_train_step("cnn", 0);
  /* every step allocates: a count of zero would mean the hook is not wired */
  assert_true(mlp > 10 && mlp_warm > 10 && cnn > 10);

  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  trainer t = trainer_new("mlp", 4);
  ct_assert_ok(train_step(&t));
  int64_t save = inject_save(dir, &t);
  char path[4096];
  snprintf(path, sizeof path, "%s/ref.safetensors", dir);
  int64_t load = inject_load(path, &t);
  trainer_free(&t);
  ct_test_rmdir(dir);
  printf("fault injection: mlp step %lld points (%lld after a first step), cnn step %lld points, save %lld, load %lld\n",
         (long long)mlp, (long long)mlp_warm, (long long)cnn, (long long)save, (long long)load);
  assert_true(save > 0 && load > 0);
}

/* The switch counts and fires as documented: the k-th allocation fails once, and nothing after. */
static void test_switch(void **unused) {
  (void)unused;
  ct__fault_inject_alloc(2);
  void *a = ct__malloc(8, "a test block");
  assert_non_null(a);
  ct_clear_error();
  void *b = ct__malloc(8, "a test block");
  assert_null(b);
  assert_int_equal(ct_last_status(), CT_ENOMEM);
  assert_non_null(strstr(ct_last_error(), "8 bytes for a test block"));
  void *c = ct__calloc(2, 4, "a test block");
  assert_non_null(c);
  int64_t shape[1] = {3};
  ct__fault_inject_alloc(2); /* the storage header, then the device's bytes */
  assert_null(ct_zeros(1, shape, CT_F32, CT_DEVICE_CPU));
  assert_int_equal(ct_last_status(), CT_ENOMEM);
  assert_non_null(strstr(ct_last_error(), "out of memory on cpu"));
  assert_int_equal(ct__fault_alloc_count(), 2);
  assert_int_equal(ct__fault_alloc_fired(), 1);
  ct__fault_inject_alloc(0);
  free(a), free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_switch), cmocka_unit_test(test_fault_injection)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
