/* tests/core/test_tensor.c: the core layer: devices, creation, random numbers (with Philox's
 * published known answers), views and strides, dtype promotion, half-precision conversions,
 * printing, ct_to and the ledger, ct_item, and scopes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "core/internal.h"

static ct_tensor *vec(const double *v, int ndim, const int64_t *shape, ct_dtype dt) {
  ct_tensor *h = ct_assert_nonnull(ct_from_host(v, ndim, shape, CT_F64, CT_DEVICE_CPU));
  ct_tensor *t = ct_assert_nonnull(ct_cast(h, dt));
  ct_tensor_free(h);
  return t;
}

static void test_device_parse_print(void **state) {
  (void)state;
  struct { const char *s; ct_device_kind k; int i; const char *canon; } ok[] = {
      {"cpu", CT_CPU, 0, "cpu"}, {"cuda", CT_CUDA, 0, "cuda:0"}, {"cuda:1", CT_CUDA, 1, "cuda:1"},
      {"gpu", CT_CUDA, 0, "cuda:0"}, {"gpu:3", CT_CUDA, 3, "cuda:3"}, {"cuda:12", CT_CUDA, 12, "cuda:12"}};
  for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
    ct_device d = {CT_CPU, -1};
    ct_assert_ok(ct_device_parse(ok[k].s, &d));
    assert_int_equal(d.kind, ok[k].k);
    assert_int_equal(d.index, ok[k].i);
    char buf[32];
    assert_string_equal(ct_device_str(d, buf, sizeof buf), ok[k].canon);
  }
  const char *bad[] = {"", "CPU", "cuda:", "cuda:-1", "cuda:x", "gpu1", "tpu", "cuda:1x", "cpu:0x", " cpu"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    ct_device d;
    assert_int_equal(ct_device_parse(bad[k], &d), CT_EINVAL);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", bad[k]);
    ct_assert_error_contains(quoted);
  }
  assert_int_equal(ct_device_parse(NULL, &(ct_device){0}), CT_EINVAL);
  assert_true(ct_device_eq(CT_DEVICE_CPU, CT_DEVICE_CPU));
  assert_false(ct_device_eq(CT_DEVICE_CUDA(0), CT_DEVICE_CUDA(1)));
}

static void test_device_choice_without_gpu(void **state) {
  (void)state;
  if (ct_device_count(CT_CUDA) > 0) skip();
  assert_int_equal(ct_device_count(CT_CPU), 1);
  assert_true(ct_device_eq(ct_try_gpu(0), CT_DEVICE_CPU));
  assert_true(ct_device_eq(ct_try_gpu(5), CT_DEVICE_CPU));
  ct_device all[4];
  assert_int_equal(ct_try_all_gpus(all, 4), 1);
  assert_true(ct_device_eq(all[0], CT_DEVICE_CPU));
  assert_true(ct_device_eq(ct_device_best(CT_BEST_MOST_FREE_MEMORY), CT_DEVICE_CPU));
  assert_true(ct_device_eq(ct_device_best(CT_BEST_LEAST_UTILIZATION), CT_DEVICE_CPU));
  assert_false(ct_device_available(CT_DEVICE_CUDA(0)));
  ct_device_props p;
  assert_int_equal(ct_device_props_get(CT_DEVICE_CUDA(0), &p), CT_EDEVICE);
  ct_assert_error_contains("cuda:0");
  int64_t n = 2;
  assert_null(ct_zeros(1, &n, CT_F32, CT_DEVICE_CUDA(0)));
  assert_int_equal(ct_last_status(), CT_EDEVICE);
}

static void test_creation(void **state) {
  (void)state;
  int64_t sh[2] = {2, 3};
  ct_tensor *z = ct_assert_nonnull(ct_zeros(2, sh, CT_F32, CT_DEVICE_CPU));
  ct_tensor *o = ct_assert_nonnull(ct_ones(2, sh, CT_I64, CT_DEVICE_CPU));
  ct_tensor *f = ct_assert_nonnull(ct_full(2, sh, 2.5, CT_F64, CT_DEVICE_CPU));
  double *vz = ct_test_values(z), *vo = ct_test_values(o), *vf = ct_test_values(f);
  for (int i = 0; i < 6; i++) assert_true(vz[i] == 0 && vo[i] == 1 && vf[i] == 2.5);
  assert_int_equal(ct_tensor_dtype(o), CT_I64);
  assert_int_equal(ct_tensor_numel(z), 6);
  assert_int_equal(ct_tensor_size(z, -1), 3);
  assert_int_equal(ct_tensor_size(z, 2), -1);
  free(vz), free(vo), free(vf);
  ct_tensor *a = ct_assert_nonnull(ct_arange(1, 2, 0.25, CT_F32, CT_DEVICE_CPU));
  assert_int_equal(ct_tensor_numel(a), 4);
  double *va = ct_test_values(a);
  for (int i = 0; i < 4; i++) assert_true(va[i] == 1 + 0.25 * i);
  free(va);
  ct_tensor *ad = ct_assert_nonnull(ct_arange(5, 0, -2, CT_I64, CT_DEVICE_CPU));
  assert_int_equal(ct_tensor_numel(ad), 3); /* 5, 3, 1 */
  va = ct_test_values(ad);
  assert_true(va[0] == 5 && va[1] == 3 && va[2] == 1);
  free(va);
  float host[6] = {1, -2, 3.5f, 4, 5, 6};
  ct_tensor *h = ct_assert_nonnull(ct_from_host(host, 2, sh, CT_F32, CT_DEVICE_CPU));
  host[0] = 100; /* the tensor holds a copy */
  double *vh = ct_test_values(h);
  assert_true(vh[0] == 1 && vh[1] == -2 && vh[2] == 3.5 && vh[5] == 6);
  free(vh);
  ct_tensor *s = ct_assert_nonnull(ct_scalar(3, CT_I32, CT_DEVICE_CPU));
  assert_int_equal(ct_tensor_ndim(s), 0);
  assert_true(ct_item(s) == 3);
  assert_null(ct_zeros(1, (int64_t[]){-1}, CT_F32, CT_DEVICE_CPU));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_zeros(9, (int64_t[9]){1, 1, 1, 1, 1, 1, 1, 1, 1}, CT_F32, CT_DEVICE_CPU));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_tensor_free(z), ct_tensor_free(o), ct_tensor_free(f), ct_tensor_free(a), ct_tensor_free(ad), ct_tensor_free(h), ct_tensor_free(s);
}

static void test_random(void **state) {
  (void)state;
  int64_t n = 100000;
  ct_generator g = ct_generator_new(42);
  ct_tensor *u = ct_assert_nonnull(ct_rand(1, &n, -1, 3, CT_F32, CT_DEVICE_CPU, &g));
  double *v = ct_test_values(u), mean = 0;
  for (int64_t i = 0; i < n; i++) {
    assert_true(v[i] >= -1 && v[i] < 3);
    mean += v[i] / (double)n;
  }
  assert_true(fabs(mean - 1) < 0.02);
  free(v);
  ct_tensor *r = ct_assert_nonnull(ct_randn(1, &n, 2, 3, CT_F64, CT_DEVICE_CPU, &g));
  v = ct_test_values(r);
  double m = 0, var = 0;
  for (int64_t i = 0; i < n; i++) m += v[i] / (double)n;
  for (int64_t i = 0; i < n; i++) var += (v[i] - m) * (v[i] - m) / (double)(n - 1);
  assert_true(fabs(m - 2) < 0.05);
  assert_true(fabs(sqrt(var) - 3) < 0.05);
  free(v);
  ct_tensor *ri = ct_assert_nonnull(ct_randint(1, &n, -3, 4, CT_I64, CT_DEVICE_CPU, &g));
  v = ct_test_values(ri);
  int seen[7] = {0};
  for (int64_t i = 0; i < n; i++) {
    assert_true(v[i] >= -3 && v[i] < 4 && v[i] == floor(v[i]));
    seen[(int)v[i] + 3]++;
  }
  for (int k = 0; k < 7; k++) assert_true(seen[k] > n / 7 - 1000 && seen[k] < n / 7 + 1000);
  free(v);
  assert_null(ct_rand(1, &n, 0, 1, CT_I32, CT_DEVICE_CPU, &g));
  assert_null(ct_randint(1, &n, 3, 3, CT_I64, CT_DEVICE_CPU, &g));
  /* same seed: identical; different seed or a later draw: different */
  int64_t k = 1000;
  ct_generator g1 = ct_generator_new(5), g2 = ct_generator_new(5), g3 = ct_generator_new(6);
  ct_tensor *a = ct_rand(1, &k, 0, 1, CT_F32, CT_DEVICE_CPU, &g1), *b = ct_rand(1, &k, 0, 1, CT_F32, CT_DEVICE_CPU, &g2);
  ct_tensor *c = ct_rand(1, &k, 0, 1, CT_F32, CT_DEVICE_CPU, &g3), *d = ct_rand(1, &k, 0, 1, CT_F32, CT_DEVICE_CPU, &g1);
  double *va = ct_test_values(a), *vb = ct_test_values(b), *vc = ct_test_values(c), *vd = ct_test_values(d);
  assert_memory_equal(va, vb, (size_t)k * sizeof(double));
  assert_true(memcmp(va, vc, (size_t)k * sizeof(double)) != 0);
  assert_true(memcmp(va, vd, (size_t)k * sizeof(double)) != 0);
  /* the default generator follows ct_manual_seed */
  ct_manual_seed(9);
  ct_tensor *e = ct_rand(1, &k, 0, 1, CT_F32, CT_DEVICE_CPU, NULL);
  ct_manual_seed(9);
  ct_tensor *f = ct_rand(1, &k, 0, 1, CT_F32, CT_DEVICE_CPU, NULL);
  double *ve = ct_test_values(e), *vf = ct_test_values(f);
  assert_memory_equal(ve, vf, (size_t)k * sizeof(double));
  free(va), free(vb), free(vc), free(vd), free(ve), free(vf);
  ct_tensor *all[] = {u, r, ri, a, b, c, d, e, f};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

/* Random123's published known-answer vectors for philox4x32_10 (kat_vectors). */
static void test_philox_known_answers(void **state) {
  (void)state;
  uint32_t out[4];
  ct__philox(0, 0, 0, out);
  assert_int_equal(out[0], 0x6627e8d5u);
  assert_int_equal(out[1], 0xe169c58du);
  assert_int_equal(out[2], 0xbc57ac4cu);
  assert_int_equal(out[3], 0x9b00dbd8u);
  ct__philox(UINT64_MAX, UINT64_MAX, UINT64_MAX, out);
  assert_int_equal(out[0], 0x408f276du);
  assert_int_equal(out[1], 0x41c83b0eu);
  assert_int_equal(out[2], 0xa20bc7c6u);
  assert_int_equal(out[3], 0x6d5451fdu);
}

static void test_views(void **state) {
  (void)state;
  int64_t sh[2] = {3, 4};
  ct_tensor *base = ct_assert_nonnull(ct_arange(0, 12, 1, CT_F32, CT_DEVICE_CPU));
  ct_tensor *m = ct_assert_nonnull(ct_view(base, 2, sh));
  ct_tensor *t = ct_assert_nonnull(ct_transpose(m, 0, 1));
  assert_int_equal(ct_tensor_strides(t)[0], 1);
  assert_int_equal(ct_tensor_strides(t)[1], 4);
  assert_false(ct_tensor_is_contiguous(t));
  ct_tensor *v3 = ct_assert_nonnull(ct_view(base, 3, (int64_t[]){2, 3, 2}));
  ct_tensor *p = ct_assert_nonnull(ct_permute(v3, (int[]){2, 0, 1}));
  ct_tensor_free(v3);
  const int64_t *ps = ct_tensor_strides(p);
  assert_true(ps[0] == 1 && ps[1] == 6 && ps[2] == 2);
  ct_tensor *col = ct_assert_nonnull(ct_narrow(m, 1, 2, 1)); /* (3, 1) */
  ct_tensor *e = ct_assert_nonnull(ct_expand(col, 3, (int64_t[]){2, 3, 5}));
  const int64_t *es = ct_tensor_strides(e);
  assert_true(es[0] == 0 && es[1] == 4 && es[2] == 0);
  /* a write through a view is visible in the base */
  ((float *)ct_tensor_data(t))[4] = 100; /* storage offset 4: t[0][1] = m[1][0] = base[4] */
  assert_true(((float *)ct_tensor_data(base))[4] == 100);
  ct_tensor *sl = ct_assert_nonnull(ct_slice(m, 0, 1, 3, 1));
  ct_assert_ok(ct_fill_(sl, -1));
  double *vb = ct_test_values(base);
  for (int i = 0; i < 12; i++) assert_true(i >= 4 ? vb[i] == -1 : vb[i] == i);
  free(vb);
  /* reshape of a non-contiguous tensor copies; view of it fails */
  ct_tensor *r = ct_assert_nonnull(ct_reshape(t, 1, (int64_t[]){12}));
  assert_true(ct_tensor_data(r) != ct_tensor_data(base));
  assert_null(ct_view(t, 1, (int64_t[]){12}));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_assert_error_contains("(4, 3)");
  ct_tensor *c = ct_assert_nonnull(ct_contiguous(t));
  assert_true(ct_tensor_is_contiguous(c));
  /* r is t flattened: compare it with c, t's contiguous copy, viewed flat the same way */
  ct_tensor *c_flat = ct_assert_nonnull(ct_view(c, 1, (int64_t[]){12}));
  ct_assert_close(c_flat, r, 0, 0);
  ct_tensor_free(c_flat);
  ct_tensor *c2 = ct_assert_nonnull(ct_contiguous(m));
  assert_ptr_equal(c2, m); /* already contiguous: the same tensor */
  ct_tensor_free(c2);
  assert_null(ct_reshape(m, 1, (int64_t[]){5}));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  /* freeing the base before its views is fine: storage is reference-counted */
  ct_tensor_free(base), ct_tensor_free(m);
  vb = ct_test_values(e);
  assert_true(vb[0] == 2 && vb[5] == -1);
  free(vb);
  ct_tensor_free(t), ct_tensor_free(p), ct_tensor_free(col), ct_tensor_free(e), ct_tensor_free(sl), ct_tensor_free(r), ct_tensor_free(c);
}

static void test_promotion(void **state) {
  (void)state;
  assert_int_equal(ct_promote_types(CT_I32, CT_F32), CT_F32);
  assert_int_equal(ct_promote_types(CT_U8, CT_I64), CT_I64);
  assert_int_equal(ct_promote_types(CT_F16, CT_BF16), CT_F32);
  assert_int_equal(ct_promote_types(CT_BOOL, CT_U8), CT_U8);
  assert_int_equal(ct_promote_types(CT_BOOL, CT_BOOL), CT_BOOL);
  assert_int_equal(ct_promote_types(CT_I64, CT_F16), CT_F16);
  assert_int_equal(ct_promote_types(CT_F32, CT_F64), CT_F64);
  assert_int_equal(ct_promote_types(CT_U8, CT_I32), CT_I32);
  int64_t sh = 2;
  ct_tensor *i32 = vec((double[]){1, 2}, 1, &sh, CT_I32), *f32 = vec((double[]){0.5, 1}, 1, &sh, CT_F32);
  ct_tensor *u8 = vec((double[]){3, 4}, 1, &sh, CT_U8), *i64 = vec((double[]){5, 6}, 1, &sh, CT_I64);
  ct_tensor *f16 = vec((double[]){1, 2}, 1, &sh, CT_F16), *bf16 = vec((double[]){1, 2}, 1, &sh, CT_BF16);
  ct_tensor *d0 = ct_scalar(1.5, CT_F64, CT_DEVICE_CPU), *i0 = ct_scalar(2, CT_I64, CT_DEVICE_CPU);
  struct { ct_tensor *r; ct_dtype want; } cases[] = {
      {ct_add(i32, f32), CT_F32}, {ct_add(u8, i64), CT_I64}, {ct_add(f16, bf16), CT_F32}, {ct_div(i32, i32), CT_F32},
      {ct_add(d0, f32), CT_F32},  {ct_add(i0, u8), CT_U8},   {ct_add(d0, i32), CT_F32},  {ct_mul(f16, i64), CT_F16},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    ct_assert_nonnull(cases[k].r);
    if (ct_tensor_dtype(cases[k].r) != cases[k].want)
      fprintf(stderr, "case %zu: got %s, want %s\n", k, ct_dtype_name(ct_tensor_dtype(cases[k].r)), ct_dtype_name(cases[k].want));
    assert_int_equal(ct_tensor_dtype(cases[k].r), cases[k].want);
    ct_tensor_free(cases[k].r);
  }
  ct_tensor *q = ct_div(i32, i32);
  double *v = ct_test_values(q);
  assert_true(v[0] == 1 && v[1] == 1);
  free(v);
  ct_tensor *w = ct_add(d0, f32);
  v = ct_test_values(w);
  assert_true(v[0] == 2 && v[1] == 2.5);
  free(v);
  ct_dtype dt;
  ct_assert_ok(ct_dtype_parse("f32", &dt));
  assert_int_equal(dt, CT_F32);
  ct_assert_ok(ct_dtype_parse("bfloat16", &dt));
  assert_int_equal(dt, CT_BF16);
  assert_int_equal(ct_dtype_parse("float128", &dt), CT_EINVAL);
  ct_tensor *all[] = {i32, f32, u8, i64, f16, bf16, d0, i0, q, w};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) ct_tensor_free(all[k]);
}

static void test_half_conversions(void **state) {
  (void)state;
  assert_int_equal(ct_f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(ct_f32_to_f16(-2.0f), 0xc000);
  assert_int_equal(ct_f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(ct_f32_to_f16(65520.0f), 0x7c00); /* rounds up to inf */
  assert_int_equal(ct_f32_to_f16(INFINITY), 0x7c00);
  assert_int_equal(ct_f32_to_f16(-INFINITY), 0xfc00);
  assert_true(isnan(ct_f16_to_f32(ct_f32_to_f16(NAN))));
  /* round to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> 1 (even) */
  assert_int_equal(ct_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  assert_int_equal(ct_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02); /* halfway to odd 0x3c01 / even 0x3c02 */
  assert_int_equal(ct_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  /* subnormals */
  assert_int_equal(ct_f32_to_f16(0x1p-24f), 0x0001);
  assert_true(ct_f16_to_f32(0x0001) == 0x1p-24f);
  assert_true(ct_f16_to_f32(0x03ff) == 0x3ffp-24f);
  assert_int_equal(ct_f32_to_f16(0x1p-26f), 0x0000); /* below half the smallest subnormal */
  assert_true(ct_f16_to_f32(0x7c00) == INFINITY);
  assert_true(ct_f16_to_f32(0x3555) == 0x1.554p-2f);
  for (uint32_t h = 0; h < 0x7c00; h++) assert_int_equal(ct_f32_to_f16(ct_f16_to_f32((uint16_t)h)), h);
  /* bfloat16 */
  assert_int_equal(ct_f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(ct_f32_to_bf16(-2.0f), 0xc000);
  assert_int_equal(ct_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80); /* halfway -> even */
  assert_int_equal(ct_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  assert_int_equal(ct_f32_to_bf16(INFINITY), 0x7f80);
  assert_true(isnan(ct_bf16_to_f32(ct_f32_to_bf16(NAN))));
  assert_true(ct_bf16_to_f32(0x3fc0) == 1.5f);
  assert_true(ct_bf16_to_f32(0x0001) == 0x1p-133f); /* subnormal */
  for (uint32_t h = 0; h < 0x7f80; h++) assert_int_equal(ct_f32_to_bf16(ct_bf16_to_f32((uint16_t)h)), h);
  /* through tensors: a cast to f16 and back rounds */
  int64_t n = 3;
  ct_tensor *x = vec((double[]){0.1, 1000.3, -3e-6}, 1, &n, CT_F16);
  double *v = ct_test_values(x);
  assert_true(v[0] == ct_f16_to_f32(ct_f32_to_f16(0.1f)) && v[1] == 1000.5 && v[2] == ct_f16_to_f32(ct_f32_to_f16(-3e-6f)));
  free(v);
  ct_tensor_free(x);
}

static void expect_print(ct_tensor *t, const char *want) {
  char *s = ct_assert_nonnull(ct_tensor_to_string(t));
  if (strcmp(s, want) != 0) fprintf(stderr, "got:\n%s\nwant:\n%s\n", s, want);
  assert_string_equal(s, want);
  free(s);
  ct_tensor_free(t);
}

static void test_printing(void **state) {
  (void)state;
  int64_t s22[2] = {2, 2}, s3 = 3;
  expect_print(vec((double[]){1, 2.5, 3, 4}, 2, s22, CT_F32),
               "tensor([[1.0000, 2.5000],\n        [3.0000, 4.0000]], dtype=float32, device=cpu)");
  expect_print(vec((double[]){1, 2, -3}, 1, &s3, CT_F32), "tensor([ 1.,  2., -3.], dtype=float32, device=cpu)");
  expect_print(vec((double[]){1, 20, -3}, 1, &s3, CT_I64), "tensor([ 1, 20, -3], dtype=int64, device=cpu)");
  expect_print(vec((double[]){1, 0, 1}, 1, &s3, CT_BOOL), "tensor([ True, False,  True], dtype=bool, device=cpu)");
  expect_print(ct_scalar(2.5, CT_F64, CT_DEVICE_CPU), "tensor(2.5000, dtype=float64, device=cpu)");
  int64_t big = 2000;
  ct_tensor *a = ct_arange(0, 2000, 1, CT_I32, CT_DEVICE_CPU);
  char *s = ct_assert_nonnull(ct_tensor_to_string(a));
  assert_non_null(strstr(s, "..."));
  assert_non_null(strstr(s, "tensor([   0,    1,    2"));
  assert_non_null(strstr(s, "1997, 1998, 1999]"));
  assert_true(strlen(s) < 200);
  free(s);
  (void)big;
  ct_tensor_free(a);
}

static void test_to_and_ledger(void **state) {
  (void)state;
  int64_t n = 4;
  ct_tensor *x = ct_assert_nonnull(ct_arange(0, 4, 1, CT_F32, CT_DEVICE_CPU));
  ct_ledger_reset();
  ct_tensor *same = ct_to(x, CT_DEVICE_CPU, 0);
  assert_ptr_equal(same, x);
  ct_tensor *copy = ct_assert_nonnull(ct_to(x, CT_DEVICE_CPU, CT_COPY));
  assert_ptr_not_equal(copy, x);
  assert_ptr_not_equal(ct_tensor_data(copy), ct_tensor_data(x));
  ct_assert_close(copy, x, 0, 0);
  ct_ledger l = ct_ledger_get();
  assert_int_equal(l.h2d_copies + l.d2h_copies + l.h2d_bytes + l.d2h_bytes, 0);
  assert_null(ct_to(x, CT_DEVICE_CUDA(7), 0));
  assert_int_equal(ct_last_status(), CT_EDEVICE);
  /* ct_item: one element only */
  assert_true(isnan(ct_item(x)));
  assert_int_equal(ct_last_status(), CT_ESHAPE);
  ct_tensor *one = ct_assert_nonnull(ct_narrow(x, 0, 2, 1));
  assert_true(ct_item(one) == 2);
  float buf[4];
  ct_assert_ok(ct_to_host(x, buf, sizeof buf, CT_F32));
  assert_true(buf[3] == 3);
  assert_int_equal(ct_to_host(x, buf, 8, CT_F32), CT_EINVAL);
  (void)n;
  ct_tensor_free(same), ct_tensor_free(copy), ct_tensor_free(x), ct_tensor_free(one);
}

/* Scopes release what was created in them; LeakSanitizer in the sanitizer build checks that. */
static void test_scopes(void **state) {
  (void)state;
  int64_t n = 8;
  ct_tensor *kept, *outer_kept;
  ct_scope_begin();
  ct_tensor *a = ct_ones(1, &n, CT_F32, CT_DEVICE_CPU);
  ct_tensor *b = ct_add(a, a);
  ct_tensor *early = ct_mul(b, b);
  ct_tensor_free(early); /* released early: no double free at scope end */
  kept = ct_scope_keep(ct_mul_scalar(b, 3));
  ct_scope_begin();
  ct_tensor *inner = ct_add(b, a);
  outer_kept = ct_scope_keep(ct_add(inner, a)); /* moves to the outer scope */
  ct_scope_end();
  double *v = ct_test_values(outer_kept); /* still alive in the outer scope */
  assert_true(v[0] == 4);
  free(v);
  ct_tensor *r = ct_tensor_retain(b); /* an extra reference outlives the scope */
  ct_scope_end();
  v = ct_test_values(kept);
  assert_true(v[0] == 6);
  free(v);
  v = ct_test_values(r);
  assert_true(v[7] == 2);
  free(v);
  ct_tensor_free(r);
  ct_tensor_free(kept);
  ct_scope_end(); /* no scope open: a no-op */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_parse_print), cmocka_unit_test(test_device_choice_without_gpu),
      cmocka_unit_test(test_creation),           cmocka_unit_test(test_random),
      cmocka_unit_test(test_philox_known_answers), cmocka_unit_test(test_views),
      cmocka_unit_test(test_promotion),          cmocka_unit_test(test_half_conversions),
      cmocka_unit_test(test_printing),           cmocka_unit_test(test_to_and_ledger),
      cmocka_unit_test(test_scopes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
