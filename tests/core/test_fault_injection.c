/* tests/core/test_fault_injection.c: out of memory at every allocation, in the style of SQLite's
 * malloc tests.
 *
 * Each operation (a training step of the mlp and of the cnn, a checkpoint save, a checkpoint load)
 * runs with its k-th allocation failing (host or device; src/core/alloc.c), for k = 1, 2, ... until
 * a run no longer reaches the k-th allocation. Every failing run must report CT_ENOMEM with a
 * message about memory, leak nothing (LeakSanitizer in the sanitizer build; the CPU allocator's
 * figures in every build), change nothing (parameters, optimizer state and step count bit for bit),
 * and leave everything usable: the same operation, run again without the fault, must give bit for
 * bit what a clean run gives.
 *
 * With the OpenCL backend compiled in (PoCL in CI, where it must not skip), the mlp's training step
 * and a checkpoint save and load are walked the same way with the model, the optimizer and the
 * batch on opencl:0, so that the device allocations (the core's and the backend's own temporaries)
 * fail too; there the device allocator's allocated bytes must also be back where they were after a
 * failed run. The device's state is read back through copies to the CPU, made outside the window in
 * which the fault is armed, so that those copies' allocations are not counted. The cnn's walk stays
 * on the CPU: on PoCL its 244 points (conv's im2col temporaries among them) take some 30 s, too long
 * for a unit test; it passed when added here by hand. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "core/internal.h"

#define MAX_TENSORS 64

#ifdef CUTTLE_WITH_OPENCL
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include "backend/opencl/opencl_backend.h"
static const ct_device D0 = {CT_OPENCL, 0};
#endif

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

/* t's bytes into out (tensor_bytes(t) of them): directly on the CPU, through a copy to the CPU for a
 * device tensor (whose ct_tensor_data is NULL). */
static void read_bytes(ct_tensor *t, void *out) {
  if (ct_device_eq(ct_tensor_device(t), CT_DEVICE_CPU)) {
    memcpy(out, ct_tensor_data(t), tensor_bytes(t));
    return;
  }
  ct_tensor *h = ct_assert_nonnull(ct_to(t, CT_DEVICE_CPU, 0));
  memcpy(out, ct_tensor_data(h), tensor_bytes(t));
  ct_tensor_free(h);
}

/* bytes (tensor_bytes(t) of them) into t, through a CPU tensor copied over for a device tensor. */
static void write_bytes(ct_tensor *t, const void *bytes) {
  if (ct_device_eq(ct_tensor_device(t), CT_DEVICE_CPU)) {
    memcpy(ct_tensor_data(t), bytes, tensor_bytes(t));
    return;
  }
  ct_tensor *h = ct_assert_nonnull(ct_from_host(bytes, ct_tensor_ndim(t), ct_tensor_shape(t), ct_tensor_dtype(t), CT_DEVICE_CPU));
  ct_assert_ok(ct_copy_(t, h));
  ct_tensor_free(h);
}

static void state_take(state *s, ct_module *m, ct_optimizer *opt) {
  s->n = list_tensors(m, opt, s->t);
  for (int i = 0; i < s->n; i++) {
    s->nbytes[i] = tensor_bytes(s->t[i]);
    s->bytes[i] = malloc(s->nbytes[i]);
    read_bytes(s->t[i], s->bytes[i]);
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
    void *b = malloc(s->nbytes[i]);
    read_bytes(t[i], b);
    int differs = memcmp(b, s->bytes[i], s->nbytes[i]) != 0;
    free(b);
    if (differs) {
      fprintf(stderr, "%s: tensor %d differs\n", when, i);
      fail();
    }
  }
  if (opt) assert_int_equal(ct_optimizer_steps(opt), s->steps);
}

static void state_restore(const state *s, ct_module *m, ct_optimizer *opt) {
  ct_tensor *t[MAX_TENSORS];
  assert_int_equal(list_tensors(m, opt, t), s->n);
  for (int i = 0; i < s->n; i++) write_bytes(t[i], s->bytes[i]);
  if (opt) ct_optimizer_set_steps(opt, s->steps);
}

static void state_free(state *s) {
  for (int i = 0; i < s->n; i++) free(s->bytes[i]);
  s->n = 0;
}

/* ---- what a failing run must report */
static size_t allocated_on(ct_device dev) {
  ct_memory_stats st = {0};
  ct_assert_ok(ct_memory_stats_get(dev, &st));
  return st.allocated;
}

/* The bytes held by tensors on the CPU and on dev (the CPU alone when dev is the CPU). */
typedef struct {
  size_t cpu, dev;
} mem_figures;

static mem_figures allocated(ct_device dev) { return (mem_figures){allocated_on(CT_DEVICE_CPU), allocated_on(dev)}; }

static void assert_same_memory(mem_figures before, ct_device dev, const char *what, int64_t k) {
  mem_figures now = allocated(dev);
  if (now.cpu != before.cpu || now.dev != before.dev) {
    char name[32];
    fprintf(stderr, "%s, allocation %lld failing: cpu allocated %zu -> %zu bytes, %s allocated %zu -> %zu bytes\n", what,
            (long long)k, before.cpu, now.cpu, ct_device_str(dev, name, sizeof name), before.dev, now.dev);
    fail();
  }
}

/* Failed runs whose message names a device other than the CPU: the device walks count them, so
 * that a walk whose faults all land in host allocations cannot pass for one over device memory. */
static int64_t device_faults;

static void assert_oom_reported(ct_status s, const char *what, int64_t k, ct_device dev) {
  const char *msg = ct_last_error();
  if (s != CT_ENOMEM || ct_last_status() != CT_ENOMEM || !msg[0] || !strstr(msg, "memory")) {
    fprintf(stderr, "%s, allocation %lld failing: status %d (last %d), error \"%s\"\n", what, (long long)k, (int)s,
            (int)ct_last_status(), msg);
    fail();
  }
  char name[32];
  if (!ct_device_eq(dev, CT_DEVICE_CPU) && strstr(msg, ct_device_str(dev, name, sizeof name))) device_faults++;
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

static trainer trainer_new(const char *model, int64_t batch, ct_device dev) {
  ct_manual_seed(7);
  ct_generator g = ct_generator_new(1234);
  trainer t = {0};
  t.m = ct_assert_nonnull(ct_model_new(model, dev, &g));
  t.opt = ct_assert_nonnull(ct_optimizer_new(t.m, &(ct_optim_opts){.kind = CT_OPTIM_ADAM}));
  /* the moments exist (zeros) before the step, so that a half-applied update would show in them */
  ct_assert_ok(ct_optimizer_init_state(t.opt));
  int64_t xs[4] = {batch, 1, 28, 28};
  t.x = ct_assert_nonnull(ct_randn(4, xs, 0.0, 1.0, CT_F32, dev, &g));
  t.y = ct_assert_nonnull(ct_randint(1, &batch, 0, 10, CT_I64, dev, &g));
  return t;
}

static void trainer_free(trainer *t) {
  ct_tensor_free(t->x), ct_tensor_free(t->y);
  ct_optimizer_free(t->opt);
  ct_module_free(t->m);
}

/* Walk the fault through every allocation of one step of model on dev; returns the number of points. */
static int64_t inject_train_step(const char *model, int warm_steps, ct_device dev) {
  trainer t = trainer_new(model, 4, dev);
  for (int i = 0; i < warm_steps; i++) ct_assert_ok(train_step(&t)); /* nonzero moments and t > 1 */
  state before, after;
  state_take(&before, t.m, t.opt);
  ct_assert_ok(train_step(&t));
  state_take(&after, t.m, t.opt);
  assert_int_equal(after.steps, before.steps + 1);
  state_restore(&before, t.m, t.opt);
  int64_t k = 1;
  for (;; k++) {
    mem_figures mem = allocated(dev);
    ct_status s;
    if (!run_failing_at(k, train_step, &t, &s)) { /* the step no longer reaches the fault */
      ct_assert_ok(s);
      state_assert_equal(&after, t.m, t.opt, model);
      break;
    }
    assert_oom_reported(s, model, k, dev);
    assert_same_memory(mem, dev, model, k);
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

static int64_t inject_save(const char *dir, trainer *t, ct_device dev) {
  char ref_path[4096], path[4096];
  snprintf(ref_path, sizeof ref_path, "%s/ref.safetensors", dir);
  snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
  ckpt ref = {ref_path, t->m, t->opt}, c = {path, t->m, t->opt};
  ct_assert_ok(save_op(&ref));
  size_t ref_n;
  char *ref_bytes = read_file(ref_path, &ref_n);
  int64_t k = 1;
  for (;; k++) {
    mem_figures mem = allocated(dev);
    ct_status s;
    remove(path);
    if (!run_failing_at(k, save_op, &c, &s)) {
      ct_assert_ok(s);
      assert_same_file(path, ref_bytes, ref_n);
      break;
    }
    assert_oom_reported(s, "checkpoint save", k, dev);
    assert_same_memory(mem, dev, "checkpoint save", k);
    ct_assert_ok(save_op(&c));
    assert_same_file(path, ref_bytes, ref_n);
  }
  free(ref_bytes);
  return k - 1;
}

/* Load the checkpoint of src (saved at path) into a differently initialized model and optimizer on dev. */
static int64_t inject_load(const char *path, trainer *src, ct_device dev) {
  state saved, before;
  state_take(&saved, src->m, src->opt);
  trainer t = trainer_new("mlp", 4, dev);
  ct_assert_ok(train_step(&t)); /* other values than src's everywhere */
  ct_assert_ok(train_step(&t));
  state_take(&before, t.m, t.opt);
  ckpt c = {path, t.m, t.opt};
  int64_t k = 1;
  for (;; k++) {
    mem_figures mem = allocated(dev);
    ct_status s;
    if (!run_failing_at(k, load_op, &c, &s)) {
      ct_assert_ok(s);
      state_assert_equal(&saved, t.m, t.opt, "after a clean load");
      break;
    }
    assert_oom_reported(s, "checkpoint load", k, dev);
    assert_same_memory(mem, dev, "checkpoint load", k);
    state_assert_equal(&before, t.m, t.opt, "after a failed load");
    ct_assert_ok(load_op(&c));
    state_assert_equal(&saved, t.m, t.opt, "after a failed load and a clean one");
    state_restore(&before, t.m, t.opt);
  }
  state_free(&saved), state_free(&before);
  trainer_free(&t);
  return k - 1;
}

/* The points of an mlp checkpoint saved from dev and loaded back onto dev. */
static void inject_checkpoint(ct_device dev, int64_t *save, int64_t *load) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  trainer t = trainer_new("mlp", 4, dev);
  ct_assert_ok(train_step(&t));
  *save = inject_save(dir, &t, dev);
  char path[4096];
  snprintf(path, sizeof path, "%s/ref.safetensors", dir);
  *load = inject_load(path, &t, dev);
  trainer_free(&t);
  ct_test_rmdir(dir);
}

static void test_fault_injection(void **unused) {
  (void)unused;
  int64_t mlp = inject_train_step("mlp", 0, CT_DEVICE_CPU);
  int64_t mlp_warm = inject_train_step("mlp", 1, CT_DEVICE_CPU);
  int64_t cnn = inject_train_step("cnn", 0, CT_DEVICE_CPU);
  /* every step allocates: a count of zero would mean the hook is not wired */
  assert_true(mlp > 10 && mlp_warm > 10 && cnn > 10);
  int64_t save, load;
  inject_checkpoint(CT_DEVICE_CPU, &save, &load);
  printf("fault injection: mlp step %lld points (%lld after a first step), cnn step %lld points, save %lld, load %lld\n",
         (long long)mlp, (long long)mlp_warm, (long long)cnn, (long long)save, (long long)load);
  assert_true(save > 0 && load > 0);
}

#ifdef CUTTLE_WITH_OPENCL
/* The same walks with everything on opencl:0. PoCL (scripts/deps.sh) makes the CPU an OpenCL
 * device, so in CI this runs for real rather than skipping. */
static void test_fault_injection_opencl(void **unused) {
  (void)unused;
  assert_true(ct_device_available(D0));
  device_faults = 0;
  int64_t mlp = inject_train_step("mlp", 0, D0);
  int64_t mlp_warm = inject_train_step("mlp", 1, D0);
  assert_true(mlp > 10 && mlp_warm > 10);
  int64_t save, load;
  inject_checkpoint(D0, &save, &load);
  printf("fault injection on opencl:0: mlp step %lld points (%lld after a first step), save %lld, load %lld; %lld of the "
         "failures in device memory\n",
         (long long)mlp, (long long)mlp_warm, (long long)save, (long long)load, (long long)device_faults);
  assert_true(save > 0 && load > 0);
  /* every step allocates device memory (activations, gradients), so some faults must land there */
  assert_true(device_faults > 0);
}

/* Drivers that create buffers lazily (PoCL among them) report running out of memory at an enqueue,
 * not at clCreateBuffer; such a status must read as out of memory with the allocator's figures, as
 * the allocator's own failures do, and any other failed call as a backend error. */
static void test_opencl_driver_oom(void **unused) {
  (void)unused;
  ct_tensor *t = ct_assert_nonnull(ct_zeros(1, (int64_t[]){1000}, CT_F32, D0)); /* 4000 bytes, 4 KiB rounded */
  assert_int_equal(allocated_on(D0), 4096);
  const cl_int oom[] = {CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY};
  for (size_t i = 0; i < sizeof oom / sizeof oom[0]; i++) {
    ct_clear_error();
    assert_int_equal(ct__ocl_call_error(0, "clEnqueueWriteBuffer", oom[i]), CT_ENOMEM);
    assert_int_equal(ct_last_status(), CT_ENOMEM);
    const char *msg = ct_last_error();
    assert_non_null(strstr(msg, "opencl:0: out of memory: clEnqueueWriteBuffer failed with"));
    assert_non_null(strstr(msg, ct__ocl_errstr(oom[i])));
    assert_non_null(strstr(msg, "4.00 KiB allocated by tensors"));
  }
  ct_clear_error();
  assert_int_equal(ct__ocl_call_error(0, "clEnqueueWriteBuffer", CL_INVALID_VALUE), CT_EBACKEND);
  assert_non_null(strstr(ct_last_error(), "CL_INVALID_VALUE"));
  /* the zeros' fill kernel may still be queued; PoCL compiles it lazily on a worker thread, which
   * crashes when the process exits meanwhile (its compiler's statics are being destroyed) */
  ct_assert_ok(ct_synchronize(D0));
  ct_tensor_free(t);
}
#endif

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
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_switch),
      cmocka_unit_test(test_fault_injection),
#ifdef CUTTLE_WITH_OPENCL
      cmocka_unit_test(test_fault_injection_opencl),
      cmocka_unit_test(test_opencl_driver_oom),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
