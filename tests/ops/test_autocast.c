/* tests/ops/test_autocast.c: autocast (cuttle/autocast.h, src/ops/autocast.c) against PyTorch's
 * torch.autocast policy (aten/src/ATen/autocast_mode.cpp and autocast_mode.h, PyTorch 2.x), whose
 * op lists differ between the CPU and CUDA (issue 19; issue 11 had listed one policy for both).
 *
 * - The policy table: the output dtype of every op of the policy (and a few outside it) with
 *   float32, float16, bfloat16, float64 and int64 inputs, under six states: no region, a float16
 *   and a bfloat16 region on the CPU, a region for another device kind (which must leave CPU
 *   tensors alone), an enabled=0 region nested in an enabled one (which must give the no-region
 *   result), and a float16 region for OpenCL on opencl:0's tensors (torch's CUDA lists, which
 *   differ from its CPU lists). Every row is checked and each failure printed before the test fails.
 * - Regions: nesting per device kind, enabled=0 inside enabled, end restoring the outer state,
 *   the dtype defaults, the argument errors, and the depth limit.
 * - Thread-locality: a second thread sees no region while the first is inside one, and its own
 *   region does not reach the first.
 * - The cast cache: a parameter used by several ops of a region is cast once (counted casts, the
 *   same cast tensor), also across ct_scope_end inside the region; activations and non-leaves are
 *   not cached; a cast cached under no-grad gives a graph when used with grad on; two losses that
 *   share cached casts, backpropagated one after the other (outside or inside the region), both
 *   reach the parameters; a nested region of another dtype caches its own cast; the outermost
 *   ct_autocast_end drops the cache and gives back every reference it took.
 * - Gradients: a Linear's forward under bfloat16 autocast, with backward outside the region,
 *   gets float32 gradients close to the float32 run's (tolerance from bfloat16's 8-bit
 *   significand), and not bit-identical to them (which would mean autocast did nothing).
 * - The reference cnn (whose Conv2d, ReLU, MaxPool2d runs Sequential fuses) through one forward
 *   and backward under bfloat16: bfloat16 logits, a float32 loss within 2% of the float32 run's,
 *   each of the 8 parameters cast once, float32 and finite gradients.
 * - Allocation failures (fault injection) at every allocation of an autocast linear and cat: an
 *   error or a right result, and the region still works afterwards (no exclusion left behind).
 * - On OpenCL (PoCL): autocast on the CPU leaves OpenCL tensors alone, and autocast on OpenCL casts
 *   them (float16 matmul, float32 softmax, float32 gradient after backward). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "core/internal.h"
#include "ops/autocast.h"

static const ct_device CPU = CT_DEVICE_CPU;
static ct_device DEV = CT_DEVICE_CPU; /* where the policy table's inputs are made */

/* ---- inputs */

/* Uniform values in [0.5, 2) (positive, so log and the norm are defined), cast to dt, on DEV. */
static ct_tensor *mk(ct_dtype dt, int ndim, const int64_t *shape) {
  static ct_generator g = {.seed = 11};
  ct_tensor *r = ct_assert_nonnull(ct_rand(ndim, shape, 0.5, 2.0, dt == CT_F64 ? CT_F64 : CT_F32, CPU, &g));
  if (ct_tensor_dtype(r) != dt) {
    ct_tensor *c = ct_assert_nonnull(ct_cast(r, dt));
    ct_tensor_free(r);
    r = c;
  }
  if (ct_device_eq(DEV, CPU)) return r;
  ct_tensor *d = ct_assert_nonnull(ct_to(r, DEV, 0));
  ct_tensor_free(r);
  return d;
}
#define MK(dt, ...) mk(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* ---- the policy table */

/* The row's inputs are made in these dtypes; HALF is the region's dtype (float16 with no region). */
enum { HALF = CT_DTYPE_COUNT + 1, LOW = CT_DTYPE_COUNT + 2 };
/* a row's gpu column: float32 in a CUDA or OpenCL region (CT_F32 itself is 0, "as in a CPU region") */
enum { G32 = CT_DTYPE_COUNT + 3 };

typedef ct_tensor *(*row_fn)(ct_dtype a, ct_dtype b);

static ct_tensor *r_matmul(ct_dtype a, ct_dtype b) { return ct_matmul(MK(a, 3, 4), MK(b, 4, 5)); }
static ct_tensor *r_bmm(ct_dtype a, ct_dtype b) { return ct_matmul(MK(a, 2, 3, 4), MK(b, 2, 4, 5)); }
static ct_tensor *r_linear(ct_dtype a, ct_dtype b) { return ct_linear(MK(a, 3, 4), MK(b, 5, 4), MK(b, 5)); }
static ct_tensor *r_conv2d(ct_dtype a, ct_dtype b) {
  return ct_conv2d(MK(a, 1, 2, 6, 6), MK(b, 3, 2, 3, 3), MK(b, 3), &(ct_conv2d_opts){.padding = {1, 1}});
}
static ct_tensor *r_conv_pool(ct_dtype a, ct_dtype b) {
  return ct_conv2d_relu_max_pool2d(MK(a, 1, 2, 6, 6), MK(b, 3, 2, 3, 3), MK(b, 3), &(ct_conv2d_opts){.padding = {1, 1}},
                                   &(ct_pool2d_opts){.kernel = {2, 2}});
}
static ct_tensor *r_softmax(ct_dtype a, ct_dtype b) { return (void)b, ct_softmax(MK(a, 3, 4), 1); }
static ct_tensor *r_log_softmax(ct_dtype a, ct_dtype b) { return (void)b, ct_log_softmax(MK(a, 3, 4), 0); }
static ct_tensor *r_cross_entropy(ct_dtype a, ct_dtype b) {
  (void)b;
  ct_tensor *t = ct_assert_nonnull(ct_from_host((int64_t[]){0, 3, 1}, 1, (int64_t[]){3}, CT_I64, DEV));
  return ct_cross_entropy(MK(a, 3, 4), t, CT_REDUCTION_MEAN, 0.1);
}
static ct_tensor *r_mse_loss(ct_dtype a, ct_dtype b) { return ct_mse_loss(MK(a, 3, 4), MK(b, 3, 4), CT_REDUCTION_MEAN); }
/* running statistics float32, weight and bias of dtype b */
static ct_tensor *r_batch_norm(ct_dtype a, ct_dtype b) {
  return ct_batch_norm(MK(a, 4, 3, 2, 2), MK(CT_F32, 3), MK(CT_F32, 3), MK(b, 3), MK(b, 3), 1, 0.1, 1e-5);
}
static ct_tensor *r_layer_norm(ct_dtype a, ct_dtype b) { return ct_layer_norm(MK(a, 2, 3, 4), 1, MK(b, 4), MK(b, 4), 1e-5); }
static ct_tensor *r_layer_norm_noaffine(ct_dtype a, ct_dtype b) {
  return (void)b, ct_layer_norm(MK(a, 2, 3, 4), 2, NULL, NULL, 1e-5);
}
static ct_tensor *r_avg_pool(ct_dtype a, ct_dtype b) {
  return (void)b, ct_avg_pool2d(MK(a, 1, 2, 4, 4), &(ct_pool2d_opts){.kernel = {2, 2}});
}
static ct_tensor *r_adaptive_pool(ct_dtype a, ct_dtype b) { return (void)b, ct_adaptive_avg_pool2d(MK(a, 1, 2, 5, 5), 2, 3); }
static ct_tensor *r_max_pool(ct_dtype a, ct_dtype b) {
  return (void)b, ct_max_pool2d(MK(a, 1, 2, 4, 4), &(ct_pool2d_opts){.kernel = {2, 2}});
}
static ct_tensor *r_silu(ct_dtype a, ct_dtype b) { return (void)b, ct_silu(MK(a, 3, 4)); }
static ct_tensor *r_gelu(ct_dtype a, ct_dtype b) { return (void)b, ct_gelu(MK(a, 3, 4)); }
static ct_tensor *r_gelu_tanh(ct_dtype a, ct_dtype b) { return (void)b, ct_gelu_tanh(MK(a, 3, 4)); }
static ct_tensor *r_sigmoid(ct_dtype a, ct_dtype b) { return (void)b, ct_sigmoid(MK(a, 3, 4)); }
static ct_tensor *r_tanh(ct_dtype a, ct_dtype b) { return (void)b, ct_tanh(MK(a, 3, 4)); }
static ct_tensor *r_sum(ct_dtype a, ct_dtype b) { return (void)b, ct_sum(MK(a, 3, 4), 1, (int[]){1}, 0); }
static ct_tensor *r_mean(ct_dtype a, ct_dtype b) { return (void)b, ct_mean(MK(a, 3, 4), 0, NULL, 0); }
static ct_tensor *r_exp(ct_dtype a, ct_dtype b) { return (void)b, ct_exp(MK(a, 3, 4)); }
static ct_tensor *r_log(ct_dtype a, ct_dtype b) { return (void)b, ct_log(MK(a, 3, 4)); }
static ct_tensor *r_norm(ct_dtype a, ct_dtype b) { return (void)b, ct_norm(MK(a, 3, 4)); }
static ct_tensor *r_add(ct_dtype a, ct_dtype b) { return ct_add(MK(a, 3, 4), MK(b, 3, 4)); }
static ct_tensor *r_add_0dim(ct_dtype a, ct_dtype b) { return ct_add(MK(a, 3, 4), ct_scalar(0.5, b, DEV)); }
static ct_tensor *r_mul_0dim(ct_dtype a, ct_dtype b) { return ct_mul(MK(a, 3, 4), ct_scalar(0.5, b, DEV)); }
static ct_tensor *r_cat(ct_dtype a, ct_dtype b) { return ct_cat(3, (ct_tensor *[]){MK(a, 2, 4), MK(b, 3, 4), MK(a, 1, 4)}, 0); }
static ct_tensor *r_where(ct_dtype a, ct_dtype b) {
  ct_tensor *c = ct_assert_nonnull(ct_gt(MK(CT_F32, 3, 4), ct_scalar(1.0, CT_F32, DEV)));
  return ct_where(c, MK(a, 3, 4), MK(b, 3, 4));
}
static ct_tensor *r_where_0dim(ct_dtype a, ct_dtype b) {
  ct_tensor *c = ct_assert_nonnull(ct_gt(MK(CT_F32, 3, 4), ct_scalar(1.0, CT_F32, DEV)));
  return ct_where(c, MK(a, 3, 4), ct_scalar(0.0, b, DEV));
}
static ct_tensor *r_relu(ct_dtype a, ct_dtype b) { return (void)b, ct_relu(MK(a, 3, 4)); }
static ct_tensor *r_sum_int(ct_dtype a, ct_dtype b) {
  (void)a, (void)b;
  return ct_sum(ct_arange(0, 12, 1, CT_I64, DEV), 0, NULL, 0);
}

typedef struct {
  const char *name;
  row_fn fn;
  int a, b;           /* input dtypes (or HALF) */
  int want_off, want; /* the output dtype with autocast off, and on in a CPU region (LOW: the region's dtype) */
  int gpu;            /* on in a CUDA or OpenCL region, where torch's CUDA lists differ (G32); 0: as want */
} row;

/* PyTorch 2.x's policy (aten/src/ATen/autocast_mode.cpp and .h) for cuttle's ops: lower precision
 * for matmul (batched too), linear and conv2d on every device; float32 for cross_entropy and
 * mse_loss on every device; float32 for softmax, log_softmax, sum, norm, exp, log and layer_norm in
 * CUDA (here OpenCL) regions only, torch's CPU lists leaving them out; the widest input type for
 * add, cat and where; float64 and integer inputs untouched; every other op (mean, batch_norm, relu,
 * silu, gelu, gelu_tanh, sigmoid, tanh, mul) in its inputs' dtype. The want_off column is
 * PyTorch's result without autocast (torch.result_type: a 0-dim tensor of the same category does
 * not widen a dimensioned one). */
static const row rows[] = {
    {"matmul f32", r_matmul, CT_F32, CT_F32, CT_F32, LOW, 0},
    {"matmul f16 x f32", r_matmul, CT_F16, CT_F32, CT_F32, LOW, 0},
    {"matmul batched f32", r_bmm, CT_F32, CT_F32, CT_F32, LOW, 0},
    {"matmul f64 (untouched)", r_matmul, CT_F64, CT_F64, CT_F64, CT_F64, 0},
    {"linear f32", r_linear, CT_F32, CT_F32, CT_F32, LOW, 0},
    {"conv2d f32", r_conv2d, CT_F32, CT_F32, CT_F32, LOW, 0},
    {"conv2d_relu_max_pool2d f32", r_conv_pool, CT_F32, CT_F32, CT_F32, LOW, 0},
    {"softmax half", r_softmax, HALF, 0, CT_F16, LOW, G32},
    {"softmax f32", r_softmax, CT_F32, 0, CT_F32, CT_F32, 0},
    {"log_softmax half", r_log_softmax, HALF, 0, CT_F16, LOW, G32},
    {"cross_entropy half", r_cross_entropy, HALF, 0, CT_F16, CT_F32, 0},
    {"mse_loss half", r_mse_loss, HALF, HALF, CT_F16, CT_F32, 0},
    {"batch_norm half (in no list)", r_batch_norm, HALF, HALF, CT_F16, LOW, 0},
    {"batch_norm half, f32 weight and bias (mixed)", r_batch_norm, HALF, CT_F32, CT_F16, LOW, 0},
    {"batch_norm f32", r_batch_norm, CT_F32, CT_F32, CT_F32, CT_F32, 0},
    {"layer_norm half", r_layer_norm, HALF, HALF, CT_F16, LOW, G32},
    {"layer_norm half, f32 weight and bias", r_layer_norm, HALF, CT_F32, CT_F16, LOW, G32},
    {"layer_norm half, no affine", r_layer_norm_noaffine, HALF, 0, CT_F16, LOW, G32},
    {"layer_norm f32", r_layer_norm, CT_F32, CT_F32, CT_F32, CT_F32, 0},
    {"layer_norm f64 (untouched)", r_layer_norm, CT_F64, CT_F64, CT_F64, CT_F64, 0},
    {"sum half", r_sum, HALF, 0, CT_F16, LOW, G32},
    {"sum bf16", r_sum, CT_BF16, 0, CT_BF16, CT_BF16, G32},
    {"sum int64 (untouched)", r_sum_int, 0, 0, CT_I64, CT_I64, 0},
    {"mean half (in no list)", r_mean, HALF, 0, CT_F16, LOW, 0},
    {"exp half", r_exp, HALF, 0, CT_F16, LOW, G32},
    {"log half", r_log, HALF, 0, CT_F16, LOW, G32},
    {"norm half", r_norm, HALF, 0, CT_F16, LOW, G32},
    {"norm f32", r_norm, CT_F32, 0, CT_F32, CT_F32, 0},
    {"add half + f32", r_add, HALF, CT_F32, CT_F32, CT_F32, 0},
    {"add half + half", r_add, HALF, HALF, CT_F16, LOW, 0},
    {"add f16 + bf16", r_add, CT_F16, CT_BF16, CT_F32, CT_F32, 0},
    {"add half + 0-dim f32", r_add_0dim, HALF, CT_F32, CT_F16, CT_F32, 0},
    {"add f32 + f32", r_add, CT_F32, CT_F32, CT_F32, CT_F32, 0},
    {"cat half, f32", r_cat, HALF, CT_F32, CT_F32, CT_F32, 0},
    {"cat half, half", r_cat, HALF, HALF, CT_F16, LOW, 0},
    {"cat f16, bf16", r_cat, CT_F16, CT_BF16, CT_F32, CT_F32, 0},
    {"where half, f32", r_where, HALF, CT_F32, CT_F32, CT_F32, 0},
    {"where half, 0-dim f32", r_where_0dim, HALF, CT_F32, CT_F16, CT_F32, 0},
    {"mul half * 0-dim f32 (not in the policy)", r_mul_0dim, HALF, CT_F32, CT_F16, LOW, 0},
    {"relu f32 (not in the policy)", r_relu, CT_F32, 0, CT_F32, CT_F32, 0},
    /* the activations are in no list of torch's: a half input stays in its own dtype (float16 in a
     * bfloat16 region too), a float32 one is not lowered */
    {"silu half (not in the policy)", r_silu, HALF, 0, CT_F16, LOW, 0},
    {"silu f16 in any region (not in the policy)", r_silu, CT_F16, 0, CT_F16, CT_F16, 0},
    {"silu f32 (not in the policy)", r_silu, CT_F32, 0, CT_F32, CT_F32, 0},
    {"gelu half (not in the policy)", r_gelu, HALF, 0, CT_F16, LOW, 0},
    {"gelu_tanh half (not in the policy)", r_gelu_tanh, HALF, 0, CT_F16, LOW, 0},
    {"gelu_tanh f32 (not in the policy)", r_gelu_tanh, CT_F32, 0, CT_F32, CT_F32, 0},
    {"sigmoid half (not in the policy)", r_sigmoid, HALF, 0, CT_F16, LOW, 0},
    {"tanh half (not in the policy)", r_tanh, HALF, 0, CT_F16, LOW, 0},
    /* the 2-d pools are in no list either (torch's CPU list has only the 3-d ones) */
    {"avg_pool2d half (not in the policy)", r_avg_pool, HALF, 0, CT_F16, LOW, 0},
    {"avg_pool2d f32 (not in the policy)", r_avg_pool, CT_F32, 0, CT_F32, CT_F32, 0},
    {"adaptive_avg_pool2d half (not in the policy)", r_adaptive_pool, HALF, 0, CT_F16, LOW, 0},
    {"adaptive_avg_pool2d f32 (not in the policy)", r_adaptive_pool, CT_F32, 0, CT_F32, CT_F32, 0},
    {"max_pool2d half (not in the policy)", r_max_pool, HALF, 0, CT_F16, LOW, 0},
};

/* The states the table runs under: the CPU's (inputs on the CPU), then a float16 region for
 * OpenCL on opencl:0's tensors, which follows torch's CUDA lists. */
typedef enum { S_OFF, S_F16, S_BF16, S_OTHER_KIND, S_NESTED_OFF, S_OPENCL_F16, S_COUNT } state;
static const char *const state_names[] = {"no region", "cpu float16", "cpu bfloat16", "cuda float16 (cpu tensors)",
                                          "cpu enabled=0 inside cpu float16", "opencl float16 (opencl tensors)"};

static int open_state(state s) {
  switch (s) {
    case S_OFF: return 0;
    case S_F16: ct_assert_ok(ct_autocast_begin(CT_CPU, CT_F16, 1)); return 1;
    case S_BF16: ct_assert_ok(ct_autocast_begin(CT_CPU, CT_BF16, 1)); return 1;
    case S_OTHER_KIND: ct_assert_ok(ct_autocast_begin(CT_CUDA, CT_F16, 1)); return 1;
    case S_OPENCL_F16: ct_assert_ok(ct_autocast_begin(CT_OPENCL, CT_F16, 1)); return 1;
    default:
      ct_assert_ok(ct_autocast_begin(CT_CPU, CT_F16, 1));
      ct_assert_ok(ct_autocast_begin(CT_CPU, CT_BF16, 0));
      return 2;
  }
}

static ct_dtype resolve(int d, state s) {
  if (d == HALF || d == LOW) return s == S_BF16 ? CT_BF16 : CT_F16;
  return (ct_dtype)d;
}

/* Whether the OpenCL state runs: in every build with the OpenCL backend, where PoCL is there
 * wherever the tests run (only GPU-only tests may skip, so a missing device fails the test). */
static int have_opencl(void) {
#ifdef CUTTLE_WITH_OPENCL
  int ok = ct_test_require_opencl(1);
  assert_true(ok);
  return ok;
#else
  fprintf(stderr, "policy table: built without OpenCL (the GPU kit's build): the opencl state is left out\n");
  return 0;
#endif
}

/* The table's rows under the states [first, last]; the number of rows not as the policy says. */
static int run_table(state first, state last, int *n) {
  int bad = 0;
  for (int s = first; s <= (int)last; s++) {
    DEV = s == S_OPENCL_F16 ? CT_DEVICE_OPENCL(0) : CPU;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
      const row *r = &rows[i];
      int on = s == S_F16 || s == S_BF16 || s == S_OPENCL_F16;
      int w = s == S_OPENCL_F16 && r->gpu == G32 ? CT_F32 : r->want;
      ct_dtype want = on ? resolve(w, s) : (ct_dtype)r->want_off;
      ct_assert_ok(ct_scope_begin()); /* the inputs and the output go at ct_scope_end */
      int opened = open_state(s);
      ct_clear_error();
      ct_tensor *y = r->fn(resolve(r->a, s), resolve(r->b, s));
      ct_dtype got = y ? ct_tensor_dtype(y) : CT_DTYPE_COUNT;
      if (got != want) {
        fprintf(stderr, "policy row \"%s\" under %s: got %s, want %s%s%s\n", r->name, state_names[s],
                y ? ct_dtype_name(got) : "an error", ct_dtype_name(want), y ? "" : ": ", y ? "" : ct_last_error());
        bad++;
      }
      (*n)++;
      while (opened--) ct_assert_ok(ct_autocast_end());
      ct_scope_end();
      assert_int_equal(ct__autocast_cache_size(), 0);
    }
  }
  DEV = CPU;
  return bad;
}

static void test_policy_table(void **st) {
  (void)st;
  int n = 0, bad = run_table(S_OFF, S_NESTED_OFF, &n);
  fprintf(stderr, "policy table: %d of %d rows as the policy says\n", n - bad, n);
  assert_int_equal(bad, 0);
}

/* The OpenCL state, among the file's last tests: LeakSanitizer's exit scan (the sanitizer build)
 * crashed reading a stale dynamic-TLS range when PoCL had run kernels before the other tests. */
static void test_policy_table_opencl(void **st) {
  (void)st;
  if (!have_opencl()) return;
  int n = 0, bad = run_table(S_OPENCL_F16, S_OPENCL_F16, &n);
  fprintf(stderr, "policy table on opencl:0: %d of %d rows as the policy says\n", n - bad, n);
  assert_int_equal(bad, 0);
}

/* ---- regions */

static void test_regions_nest(void **st) {
  (void)st;
  assert_int_equal(ct_autocast_enabled(CT_CPU), 0);
  assert_int_equal(ct_autocast_dtype(CT_CPU), CT_BF16); /* torch's defaults */
  assert_int_equal(ct_autocast_dtype(CT_CUDA), CT_F16);
  assert_int_equal(ct_autocast_dtype(CT_OPENCL), CT_F16);
  ct_tensor *a = MK(CT_F32, 2, 3), *b = MK(CT_F32, 3, 2);

  ct_assert_ok(ct_autocast_begin(CT_CPU, CT_F16, 1));
  assert_int_equal(ct_autocast_enabled(CT_CPU), 1);
  assert_int_equal(ct_autocast_dtype(CT_CPU), CT_F16);
  ct_assert_ok(ct_autocast_begin(CT_CUDA, CT_BF16, 1)); /* another kind: the CPU's state stays */
  assert_int_equal(ct_autocast_enabled(CT_CUDA), 1);
  assert_int_equal(ct_autocast_dtype(CT_CUDA), CT_BF16);
  assert_int_equal(ct_autocast_enabled(CT_CPU), 1);
  assert_int_equal(ct_autocast_dtype(CT_CPU), CT_F16);
  ct_tensor *y = ct_assert_nonnull(ct_matmul(a, b));
  assert_int_equal(ct_tensor_dtype(y), CT_F16);
  ct_tensor_free(y);

  ct_assert_ok(ct_autocast_begin(CT_CPU, CT_BF16, 0)); /* torch.autocast(enabled=False) */
  assert_int_equal(ct_autocast_enabled(CT_CPU), 0);
  assert_int_equal(ct_autocast_dtype(CT_CPU), CT_BF16);
  y = ct_assert_nonnull(ct_matmul(a, b));
  assert_int_equal(ct_tensor_dtype(y), CT_F32);
  ct_tensor_free(y);
  ct_assert_ok(ct_autocast_begin(CT_CPU, CT_BF16, 1)); /* on again, innermost wins */
  y = ct_assert_nonnull(ct_matmul(a, b));
  assert_int_equal(ct_tensor_dtype(y), CT_BF16);
  ct_tensor_free(y);
  ct_assert_ok(ct_autocast_end());
  ct_assert_ok(ct_autocast_end()); /* back to float16, on */
  assert_int_equal(ct_autocast_enabled(CT_CPU), 1);
  assert_int_equal(ct_autocast_dtype(CT_CPU), CT_F16);
  y = ct_assert_nonnull(ct_matmul(a, b));
  assert_int_equal(ct_tensor_dtype(y), CT_F16);
  ct_tensor_free(y);
  ct_assert_ok(ct_autocast_end()); /* the CUDA region */
  assert_int_equal(ct_autocast_enabled(CT_CUDA), 0);
  assert_int_equal(ct_autocast_enabled(CT_CPU), 1);
  ct_assert_ok(ct_autocast_end());
  assert_int_equal(ct_autocast_enabled(CT_CPU), 0);
  y = ct_assert_nonnull(ct_matmul(a, b));
  assert_int_equal(ct_tensor_dtype(y), CT_F32);
  ct_tensor_free(y);

  /* errors, and no region left open by them */
  assert_int_equal(ct_autocast_end(), CT_EINVAL);
  ct_assert_error_contains("autocast_end");
  assert_int_equal(ct_autocast_begin(CT_CPU, CT_F32, 1), CT_EDTYPE);
  ct_assert_error_contains("float32");
  assert_int_equal(ct_autocast_begin(CT_CPU, CT_F64, 0), CT_EDTYPE);
  assert_int_equal(ct_autocast_begin((ct_device_kind)7, CT_F16, 1), CT_EINVAL);
  assert_int_equal(ct_autocast_enabled((ct_device_kind)-1), 0);
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_int_equal(ct_autocast_dtype(CT_DEVICE_KIND_COUNT), CT_DTYPE_COUNT);
  assert_int_equal(ct_autocast_end(), CT_EINVAL);
  int k = 0;
  while (ct_autocast_begin(CT_CPU, CT_F16, k & 1) == CT_OK) k++;
  assert_int_equal(k, 64);
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("nested");
  while (k--) ct_assert_ok(ct_autocast_end());
  assert_int_equal(ct_autocast_end(), CT_EINVAL);
  ct_tensor_free(a), ct_tensor_free(b);
}

/* ---- thread-locality */

typedef struct {
  ct_tensor *a, *b;
  int enabled, end_status;
  ct_dtype dtype, out, out_own;
  int64_t cache;
} thread_seen;

static void *other_thread(void *p) {
  thread_seen *t = p;
  t->enabled = ct_autocast_enabled(CT_CPU);
  t->dtype = ct_autocast_dtype(CT_CPU);
  t->cache = ct__autocast_cache_size();
  ct_tensor *y = ct_matmul(t->a, t->b);
  t->out = y ? ct_tensor_dtype(y) : CT_DTYPE_COUNT;
  ct_tensor_free(y);
  t->end_status = ct_autocast_end(); /* the main thread's region is not this thread's to end */
  /* a region of this thread: bfloat16, while the main thread's is float16 */
  ct_autocast_begin(CT_CPU, CT_BF16, 1);
  y = ct_matmul(t->a, t->b);
  t->out_own = y ? ct_tensor_dtype(y) : CT_DTYPE_COUNT;
  ct_tensor_free(y);
  ct_autocast_end();
  return NULL;
}

static void test_thread_local(void **st) {
  (void)st;
  thread_seen t = {.a = MK(CT_F32, 2, 3), .b = MK(CT_F32, 3, 2)};
  ct_tensor *w = MK(CT_F32, 2, 3);
  ct_assert_ok(ct_requires_grad_(w, 1));
  ct_assert_ok(ct_autocast_begin(CT_CPU, CT_F16, 1));
  ct_tensor *y = ct_assert_nonnull(ct_linear(t.a, w, NULL)); /* one cached cast on this thread */
  assert_int_equal(ct__autocast_cache_size(), 1);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, other_thread, &t), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(t.enabled, 0);
  assert_int_equal(t.dtype, CT_BF16);
  assert_int_equal(t.cache, 0);
  assert_int_equal(t.out, CT_F32);
  assert_int_equal(t.end_status, CT_EINVAL);
  assert_int_equal(t.out_own, CT_BF16);
  /* this thread's region is as it was */
  assert_int_equal(ct_autocast_enabled(CT_CPU), 1);
  assert_int_equal(ct_autocast_dtype(CT_CPU), CT_F16);
  assert_int_equal(ct__autocast_cache_size(), 1);
  ct_tensor *y2 = ct_assert_nonnull(ct_matmul(t.a, t.b));
  assert_int_equal(ct_tensor_dtype(y2), CT_F16);
  ct_assert_ok(ct_autocast_end());
  ct_tensor_free(y), ct_tensor_free(y2), ct_tensor_free(w), ct_tensor_free(t.a), ct_tensor_free(t.b);
}

/* ---- the cast cache */

static void test_cache(void **st) {
  (void)st;
  ct_tensor *x = MK(CT_F32, 3, 4), *w = MK(CT_F32, 5, 4), *b = MK(CT_F32, 5), *xg = MK(CT_F32, 3, 4), *w2 = MK(CT_F32, 5, 4);
  ct_tensor *b2 = MK(CT_F32, 5);
  ct_assert_ok(ct_requires_grad_(b2, 1));
  ct_assert_ok(ct_requires_grad_(w, 1));
  ct_assert_ok(ct_requires_grad_(b, 1));
  ct_assert_ok(ct_requires_grad_(xg, 1));
  ct_assert_ok(ct_requires_grad_(w2, 1));
  int w_refs = w->refs, b_refs = b->refs;

  ct_assert_ok(ct_autocast_begin(CT_CPU, CT_BF16, 1));
  int64_t c0 = ct__autocast_casts_made();
  ct_tensor *y1 = ct_assert_nonnull(ct_linear(x, w, b));
  assert_int_equal(ct__autocast_cache_size(), 2); /* w and b; x is no parameter */
  ct_tensor *cw = ct__autocast_cached(w, CT_BF16), *cb = ct__autocast_cached(b, CT_BF16);
  assert_non_null(cw);
  assert_non_null(cb);
  assert_int_equal(ct_tensor_dtype(cw), CT_BF16);
  assert_int_equal(ct__autocast_casts_made() - c0, 3);
  ct_tensor *wt = ct_assert_nonnull(ct_transpose(w, 0, 1));
  int64_t c1 = ct__autocast_casts_made();
  ct_tensor *y2 = ct_assert_nonnull(ct_matmul(x, wt)); /* a view of w is no leaf: cast, not cached */
  assert_int_equal(ct__autocast_casts_made() - c1, 2);
  assert_int_equal(ct__autocast_cache_size(), 2);
  c1 = ct__autocast_casts_made();
  ct_tensor *y3 = ct_assert_nonnull(ct_linear(x, w, b));
  assert_int_equal(ct__autocast_casts_made() - c1, 1); /* x again; w and b from the cache */
  assert_ptr_equal(ct__autocast_cached(w, CT_BF16), cw);
  assert_int_equal(ct__autocast_cache_size(), 2);

  /* the cache survives scopes that end inside the region */
  ct_assert_ok(ct_scope_begin());
  ct_tensor *s1 = ct_assert_nonnull(ct_linear(x, w, b));
  assert_int_equal(ct_tensor_dtype(s1), CT_BF16);
  ct_scope_end();
  ct_assert_ok(ct_scope_begin());
  c1 = ct__autocast_casts_made();
  ct_tensor *s2 = ct_assert_nonnull(ct_linear(x, w, b));
  assert_int_equal(ct__autocast_casts_made() - c1, 1);
  assert_ptr_equal(ct__autocast_cached(w, CT_BF16), cw);
  double v = ct_item(ct_sum(s2, 0, NULL, 0)); /* reads through the cached casts */
  assert_true(isfinite(v));
  ct_scope_end();

  /* a non-leaf is not cached */
  ct_tensor *h = ct_assert_nonnull(ct_mul_scalar(xg, 2.0));
  ct_tensor *y4 = ct_assert_nonnull(ct_linear(h, h, NULL)); /* (3, 4) x (3, 4)^T */
  assert_int_equal(ct__autocast_cache_size(), 2);
  /* a cast cached under no-grad gives a graph when used with grad mode on (torch's would not) */
  ct_no_grad_begin();
  ct_tensor *y5 = ct_assert_nonnull(ct_linear(x, w2, NULL));
  ct_no_grad_end();
  assert_null(ct_grad_fn_name(y5));
  assert_non_null(ct__autocast_cached(w2, CT_BF16));
  assert_int_equal(ct__autocast_cache_size(), 3);
  c1 = ct__autocast_casts_made();
  ct_tensor *y5g = ct_assert_nonnull(ct_linear(x, w2, b2));
  assert_int_equal(ct__autocast_casts_made() - c1, 2); /* x and b2; w2 from the cache */
  assert_non_null(ct_grad_fn_name(y5g));
  /* backward inside the region (torch advises against it, but it is common): it frees that graph,
   * and the next use of the same cached casts must still reach the parameters */
  for (int k = 0; k < 2; k++) {
    ct_tensor *u = k ? ct_assert_nonnull(ct_linear(x, w2, b2)) : ct_tensor_retain(y5g);
    ct_tensor *lu = ct_assert_nonnull(ct_sum(u, 0, NULL, 0));
    ct_assert_ok(ct_backward(lu));
    ct_tensor_free(u), ct_tensor_free(lu);
  }
  assert_non_null(ct_grad(w2));
  assert_int_equal(ct_tensor_dtype(ct_grad(w2)), CT_F32);
  double *gb2 = ct_test_values(ct_grad(b2));
  for (int i = 0; i < 5; i++) assert_true(gb2[i] == 6.0); /* 3 rows of ones, twice */
  free(gb2);
  assert_int_equal(ct__autocast_cache_size(), 4);

  /* a nested float16 region caches its own cast of w; it lives until the outermost end */
  ct_assert_ok(ct_autocast_begin(CT_CPU, CT_F16, 1));
  ct_tensor *y6 = ct_assert_nonnull(ct_linear(x, w, NULL));
  assert_int_equal(ct_tensor_dtype(y6), CT_F16);
  assert_non_null(ct__autocast_cached(w, CT_F16));
  assert_ptr_equal(ct__autocast_cached(w, CT_BF16), cw);
  ct_assert_ok(ct_autocast_end());
  assert_int_equal(ct__autocast_cache_size(), 5);
  ct_assert_ok(ct_autocast_end());
  assert_int_equal(ct__autocast_cache_size(), 0);
  assert_null(ct__autocast_cached(w, CT_BF16));

  /* backward outside the region through the cached casts that y1 and y3 share, one loss at a time
   * (the first backward frees its graph; the second's must still reach w and b): float32
   * gradients, and d(sum y1)/db + d(sum y3)/db = 3 + 3 rows of ones, exact in bfloat16 */
  ct_tensor *l1 = ct_assert_nonnull(ct_sum(y1, 0, NULL, 0)), *l3 = ct_assert_nonnull(ct_sum(y3, 0, NULL, 0));
  ct_assert_ok(ct_backward(l1));
  ct_assert_ok(ct_backward(l3));
  assert_int_equal(ct_tensor_dtype(ct_grad(w)), CT_F32);
  assert_int_equal(ct_tensor_dtype(ct_grad(b)), CT_F32);
  assert_int_equal(ct_tensor_dtype(w), CT_F32);
  double *gb = ct_test_values(ct_grad(b));
  for (int i = 0; i < 5; i++) assert_true(gb[i] == 6.0);
  free(gb);

  ct_tensor_free(l1), ct_tensor_free(l3);
  ct_tensor_free(y1), ct_tensor_free(y2), ct_tensor_free(y3), ct_tensor_free(y4), ct_tensor_free(y5), ct_tensor_free(y6), ct_tensor_free(y5g);
  ct_tensor_free(h), ct_tensor_free(wt);
  /* every reference the cache or the graphs took is back */
  assert_int_equal(w->refs, w_refs);
  assert_int_equal(b->refs, b_refs);
  ct_tensor_free(x), ct_tensor_free(w), ct_tensor_free(b), ct_tensor_free(xg), ct_tensor_free(w2), ct_tensor_free(b2);
}

/* ---- batch norm in a region: in no list, so a float16 x stays float16 (normalized in float32 with
 * the float32 parameters and running statistics), and backward outside the region gives the
 * float32 weight and bias float32 gradients and x a float16 one, as torch's mixed-type batch norm */

static void test_batch_norm_mixed_in_region(void **st) {
  (void)st;
  ct_assert_ok(ct_scope_begin());
  ct_tensor *x = MK(CT_F16, 4, 3, 2, 2), *w = MK(CT_F32, 3), *b = MK(CT_F32, 3);
  ct_tensor *rm = ct_assert_nonnull(ct_zeros(1, (int64_t[]){3}, CT_F32, CPU));
  ct_tensor *rv = ct_assert_nonnull(ct_ones(1, (int64_t[]){3}, CT_F32, CPU));
  ct_assert_ok(ct_requires_grad_(x, 1)), ct_assert_ok(ct_requires_grad_(w, 1)), ct_assert_ok(ct_requires_grad_(b, 1));
  ct_assert_ok(ct_autocast_begin(CT_CPU, CT_F16, 1));
  ct_tensor *y = ct_assert_nonnull(ct_batch_norm(x, rm, rv, w, b, 1, 0.1, 1e-5));
  ct_assert_ok(ct_autocast_end());
  assert_int_equal(ct_tensor_dtype(y), CT_F16);
  assert_int_equal(ct_tensor_dtype(rm), CT_F32);
  assert_true(ct_item(ct_sum(rm, 0, NULL, 0)) != 0); /* the running mean moved (x is in [0.5, 2)) */
  ct_tensor *l = ct_assert_nonnull(ct_sum(ct_mul(ct_cast(y, CT_F32), ct_cast(y, CT_F32)), 0, NULL, 0));
  ct_assert_ok(ct_backward(l));
  assert_int_equal(ct_tensor_dtype(ct_grad(w)), CT_F32);
  assert_int_equal(ct_tensor_dtype(ct_grad(b)), CT_F32);
  assert_int_equal(ct_tensor_dtype(ct_grad(x)), CT_F16);
  ct_scope_end();
}

/* ---- gradients of a Linear under bfloat16 autocast */

static void test_linear_grads_bf16(void **st) {
  (void)st;
  ct_generator g = ct_generator_new(3);
  ct_module *m = ct_assert_nonnull(ct_linear_new(16, 8, 1, CPU, &g));
  ct_named_tensor p[2];
  assert_int_equal(ct_module_named_tensors(m, 0, p, 2), 2);
  ct_tensor *W = p[0].tensor, *B = p[1].tensor;
  ct_tensor *x = ct_randn(2, (int64_t[]){32, 16}, 0, 1, CT_F32, CPU, &g);
  ct_tensor *t = ct_randn(2, (int64_t[]){32, 8}, 0, 1, CT_F32, CPU, &g);
  ct_tensor *gw[2], *gb[2];
  for (int run = 0; run < 2; run++) {
    ct_assert_ok(ct_scope_begin());
    if (run) ct_assert_ok(ct_autocast_begin(CT_CPU, CT_BF16, 1));
    ct_tensor *y = ct_assert_nonnull(ct_module_forward(m, x));
    ct_tensor *loss = ct_assert_nonnull(ct_mse_loss(y, t, CT_REDUCTION_MEAN));
    assert_int_equal(ct_tensor_dtype(y), run ? CT_BF16 : CT_F32);
    assert_int_equal(ct_tensor_dtype(loss), CT_F32); /* mse_loss runs in float32 */
    if (run) assert_int_equal(ct__autocast_cache_size(), 2); /* the weight and the bias, once each */
    if (run) ct_assert_ok(ct_autocast_end());
    ct_assert_ok(ct_backward(loss)); /* outside the region, as torch recommends */
    ct_scope_end();
    assert_int_equal(ct_tensor_dtype(W), CT_F32); /* parameters stay float32 */
    assert_int_equal(ct_tensor_dtype(ct_grad(W)), CT_F32);
    assert_int_equal(ct_tensor_dtype(ct_grad(B)), CT_F32);
    gw[run] = ct_tensor_retain(ct_grad(W)), gb[run] = ct_tensor_retain(ct_grad(B));
    ct_zero_grad(W), ct_zero_grad(B);
  }
  /* Tolerance. bfloat16 keeps 8 significant bits: a rounding errs by at most u = 2^-8 relative.
   * The bfloat16 run rounds x, W, y (the matmul's output), the gradient flowing into the matmul and
   * the gradient of W before its cast back to float32: about five roundings on each term of a sum,
   * so the error of an element is within 5u of the sum of the magnitudes of its terms, which for
   * these 32 random terms stays within a few times the largest gradient element; 8u of the largest
   * element (3%) for every element covers that with margin, while a wrong gradient (a missing term,
   * a wrong scale) errs by far more. */
  double u = ldexp(1.0, -8);
  for (int k = 0; k < 2; k++) {
    ct_tensor *ref = k ? gb[0] : gw[0], *got = k ? gb[1] : gw[1];
    double *r = ct_test_values(ref), *v = ct_test_values(got), maxabs = 0, maxdiff = 0;
    int64_t n = ct_tensor_numel(ref);
    for (int64_t i = 0; i < n; i++) maxabs = fmax(maxabs, fabs(r[i]));
    for (int64_t i = 0; i < n; i++) maxdiff = fmax(maxdiff, fabs(v[i] - r[i]));
    fprintf(stderr, "%s gradient: max |bf16 - f32| = %.3g, max |f32| = %.3g (%.2f%%)\n", k ? "bias" : "weight", maxdiff,
            maxabs, 100 * maxdiff / maxabs);
    assert_true(maxabs > 0);
    assert_true(maxdiff > 0); /* the bfloat16 run did round: autocast was on */
    ct_assert_close(got, ref, 8 * u * maxabs, 0);
    free(r), free(v);
  }
  for (int k = 0; k < 2; k++) ct_tensor_free(gw[k]), ct_tensor_free(gb[k]);
  ct_tensor_free(x), ct_tensor_free(t);
  ct_module_free(m);
}

/* ---- the reference cnn (Conv2d, ReLU, MaxPool2d fused by Sequential; Linear) under bfloat16 */

static void test_cnn_step_bf16(void **st) {
  (void)st;
  ct_generator g = ct_generator_new(7);
  ct_module *m = ct_assert_nonnull(ct_model_new("cnn", CPU, &g));
  int np = ct_module_named_tensors(m, 0, NULL, 0);
  assert_int_equal(np, 8);
  ct_named_tensor p[8];
  ct_module_named_tensors(m, 0, p, 8);
  ct_tensor *x = ct_rand(4, (int64_t[]){4, 1, 28, 28}, 0, 1, CT_F32, CPU, &g);
  ct_tensor *t = ct_assert_nonnull(ct_from_host((int64_t[]){3, 1, 4, 1}, 1, (int64_t[]){4}, CT_I64, CPU));
  double loss_v[2];
  for (int run = 0; run < 2; run++) {
    ct_assert_ok(ct_scope_begin());
    if (run) ct_assert_ok(ct_autocast_begin(CT_CPU, CT_BF16, 1));
    ct_tensor *y = ct_assert_nonnull(ct_module_forward(m, x));
    ct_tensor *loss = ct_assert_nonnull(ct_cross_entropy(y, t, CT_REDUCTION_MEAN, 0));
    assert_int_equal(ct_tensor_dtype(y), run ? CT_BF16 : CT_F32);
    assert_int_equal(ct_tensor_dtype(loss), CT_F32);
    if (run) assert_int_equal(ct__autocast_cache_size(), np); /* every parameter cast once */
    if (run) ct_assert_ok(ct_autocast_end());
    loss_v[run] = ct_item(loss);
    ct_assert_ok(ct_backward(loss));
    ct_scope_end();
    for (int i = 0; i < np; i++) {
      ct_tensor *gr = ct_grad(p[i].tensor);
      assert_non_null(gr);
      assert_int_equal(ct_tensor_dtype(p[i].tensor), CT_F32);
      assert_int_equal(ct_tensor_dtype(gr), CT_F32);
      double *v = ct_test_values(gr);
      for (int64_t k = 0; k < ct_tensor_numel(gr); k++) assert_true(isfinite(v[k]));
      free(v);
      ct_zero_grad(p[i].tensor);
    }
  }
  /* the same loss up to bfloat16's rounding: ln 10 ~ 2.3 at initialization, and a relative error of
   * 2^-8 on each logit moves it by about 2^-8 of the logits' spread; 2% is well above that */
  fprintf(stderr, "cnn loss: float32 %.6f, bfloat16 autocast %.6f\n", loss_v[0], loss_v[1]);
  assert_true(fabs(loss_v[1] - loss_v[0]) <= 0.02 * fabs(loss_v[0]));
  ct_tensor_free(x), ct_tensor_free(t);
  ct_module_free(m);
}

/* Issue 11: under autocast the activations a cnn step keeps for its backward are 16-bit, so its
 * peak allocated bytes (forward, loss, backward; model, gradients and batch allocated before) are
 * at most 0.6x the float32 step's, as `cuttle bench amp-memory` measures (0.55 at batch 128 on
 * the CPU when this was written; 6x before the fused conv2d + relu + pooling kernel took halves).
 * The fixed costs (the weight casts, the 16-bit weight gradient before it is added into the
 * float32 one) weigh more at small batches: hence a large batch. Batch 256 since the tape stopped
 * holding the values of activations no rule saved (core/refs.c's graph_refs): that cut the float32
 * step's peak (11.15 -> 9.51 MB at batch 128) more than the bfloat16 one's (6.14 -> 6.10 MB),
 * whose 0.8 MB cast of the first linear weight then made 0.64 of it; at 256: 18.7 and 10.1 MB. */
static int64_t step_peak(ct_module *m, ct_tensor *x, ct_tensor *t, ct_dtype amp) {
  ct_memory_stats ms;
  ct_assert_ok(ct_memory_stats_get(CPU, &ms));
  ct_assert_ok(ct_reset_peak_memory_stats(CPU));
  size_t before = ms.allocated;
  ct_assert_ok(ct_scope_begin());
  if (amp != CT_F32) ct_assert_ok(ct_autocast_begin(CT_CPU, amp, 1));
  ct_tensor *y = ct_assert_nonnull(ct_module_forward(m, x));
  ct_tensor *loss = ct_assert_nonnull(ct_cross_entropy(y, t, CT_REDUCTION_MEAN, 0));
  if (amp != CT_F32) ct_assert_ok(ct_autocast_end());
  ct_assert_ok(ct_backward(loss));
  ct_scope_end();
  ct_assert_ok(ct_memory_stats_get(CPU, &ms));
  return (int64_t)ms.peak_allocated - (int64_t)before;
}

static void test_cnn_step_peak_memory(void **st) {
  (void)st;
  ct_generator g = ct_generator_new(5);
  ct_module *m = ct_assert_nonnull(ct_model_new("cnn", CPU, &g));
  int64_t N = 256;
  ct_tensor *x = ct_assert_nonnull(ct_randn(4, (int64_t[]){N, 1, 28, 28}, 0, 1, CT_F32, CPU, &g));
  ct_tensor *t = ct_assert_nonnull(ct_randint(1, &N, 0, 10, CT_I64, CPU, &g));
  step_peak(m, x, t, CT_F32); /* leaves the gradients allocated, as in training */
  int64_t f32 = step_peak(m, x, t, CT_F32), bf16 = step_peak(m, x, t, CT_BF16), f16 = step_peak(m, x, t, CT_F16);
  fprintf(stderr, "cnn step peak bytes: float32 %lld, bfloat16 %lld, float16 %lld\n", (long long)f32, (long long)bf16,
          (long long)f16);
  /* the conv outputs alone, (N, 32, 28, 28) in float32, are 25.7 MB: a float32 peak below that
   * shows the float32 step fused too, so the ratio compares like with like */
  assert_true(f32 > 0 && f32 < N * 32 * 28 * 28 * 4);
  assert_true(bf16 <= 0.6 * (double)f32);
  assert_true(f16 <= 0.6 * (double)f32);
  ct_tensor_free(x), ct_tensor_free(t);
  ct_module_free(m);
}

/* ---- allocation failures */

static void test_alloc_failures(void **st) {
  (void)st;
  ct_tensor *x = MK(CT_F32, 3, 4), *w = MK(CT_F32, 5, 4), *b = MK(CT_F32, 5), *h = MK(CT_F16, 2, 4);
  ct_assert_ok(ct_requires_grad_(w, 1));
  ct_assert_ok(ct_requires_grad_(b, 1));
  int failed = 0, k;
  for (k = 1; k < 200; k++) {
    ct_assert_ok(ct_autocast_begin(CT_CPU, CT_BF16, 1));
    ct_clear_error();
    ct__fault_inject_alloc(k);
    ct_tensor *y = ct_linear(x, w, b), *c = y ? ct_cat(2, (ct_tensor *[]){h, x}, 0) : NULL;
    int fired = ct__fault_alloc_fired() > 0;
    ct__fault_inject_alloc(0);
    if (c) {
      assert_int_equal(ct_tensor_dtype(y), CT_BF16);
      assert_int_equal(ct_tensor_dtype(c), CT_F32);
      if (fired) assert_true(ct__autocast_cache_size() < 2); /* only the cache's growth may fail unseen */
    } else {
      assert_true(fired);
      assert_int_equal(ct_last_status(), CT_ENOMEM);
      failed++;
    }
    ct_tensor_free(y), ct_tensor_free(c);
    ct_tensor *xt = ct_assert_nonnull(ct_transpose(x, 0, 1)), *z = ct_assert_nonnull(ct_matmul(x, xt));
    assert_int_equal(ct_tensor_dtype(z), CT_BF16); /* autocast still on: no exclusion left behind */
    ct_tensor_free(xt), ct_tensor_free(z);
    ct_assert_ok(ct_autocast_end());
    assert_int_equal(ct__autocast_cache_size(), 0);
    if (!fired) break; /* k passed every allocation: nothing left to fail */
  }
  fprintf(stderr, "allocation failures: %d of %d allocation points failed the ops cleanly (the others: the cache could not grow)\n", failed, k - 1);
  assert_true(failed > 5);
  ct_tensor_free(x), ct_tensor_free(w), ct_tensor_free(b), ct_tensor_free(h);
}

/* ---- devices of another kind */

static void test_opencl_kind(void **st) {
  (void)st;
#ifndef CUTTLE_WITH_OPENCL
  /* a build without the OpenCL backend (the GPU kit's, for a node without OpenCL) */
  printf("# skipped: cuttle was built without the OpenCL backend\n");
  skip();
#endif
  if (!ct_test_require_opencl(1)) {
    fail(); /* only GPU-only tests may skip (docs/design.md): PoCL is there wherever the tests run */
  }
  ct_device d = CT_DEVICE_OPENCL(0);
  ct_tensor *a = MK(CT_F32, 2, 3), *b = MK(CT_F32, 3, 2);
  ct_tensor *da = ct_assert_nonnull(ct_to(a, d, 0)), *db = ct_assert_nonnull(ct_to(b, d, 0));
  ct_assert_ok(ct_autocast_begin(CT_CPU, CT_F16, 1));
  ct_tensor *y = ct_assert_nonnull(ct_matmul(da, db)), *s = ct_assert_nonnull(ct_softmax(y, 1));
  ct_tensor *yc = ct_assert_nonnull(ct_matmul(a, b));
  assert_int_equal(ct_tensor_dtype(y), CT_F32);
  assert_int_equal(ct_tensor_dtype(s), CT_F32);
  assert_int_equal(ct_tensor_dtype(yc), CT_F16); /* the CPU tensors on the same line are cast */
  ct_assert_ok(ct_autocast_end());
  ct_tensor_free(y), ct_tensor_free(s), ct_tensor_free(yc);
  /* autocast for OpenCL does reach them: matmul in float16, softmax in float32, and backward outside
   * the region gives the float32 leaf a float32 gradient */
  ct_assert_ok(ct_requires_grad_(db, 1));
  ct_assert_ok(ct_autocast_begin(CT_OPENCL, CT_F16, 1));
  y = ct_assert_nonnull(ct_matmul(da, db));
  s = ct_assert_nonnull(ct_softmax(y, 1));
  assert_int_equal(ct_tensor_dtype(y), CT_F16);
  assert_int_equal(ct_tensor_dtype(s), CT_F32);
  yc = ct_assert_nonnull(ct_matmul(a, b)); /* and leaves the CPU alone */
  assert_int_equal(ct_tensor_dtype(yc), CT_F32);
  ct_tensor *sq = ct_assert_nonnull(ct_mul(s, s)), *l = ct_assert_nonnull(ct_sum(sq, 0, NULL, 0));
  ct_assert_ok(ct_autocast_end());
  ct_assert_ok(ct_backward(l));
  assert_int_equal(ct_tensor_dtype(ct_grad(db)), CT_F32);
  assert_true(ct_device_eq(ct_tensor_device(ct_grad(db)), d));
  ct_tensor_free(sq), ct_tensor_free(l), ct_tensor_free(y), ct_tensor_free(s), ct_tensor_free(yc), ct_tensor_free(da), ct_tensor_free(db),
      ct_tensor_free(a), ct_tensor_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_policy_table), cmocka_unit_test(test_regions_nest),      cmocka_unit_test(test_thread_local),
      cmocka_unit_test(test_cache),        cmocka_unit_test(test_linear_grads_bf16), cmocka_unit_test(test_cnn_step_bf16),
      cmocka_unit_test(test_cnn_step_peak_memory), cmocka_unit_test(test_alloc_failures),
      cmocka_unit_test(test_batch_norm_mixed_in_region), cmocka_unit_test(test_opencl_kind),
      cmocka_unit_test(test_policy_table_opencl),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
