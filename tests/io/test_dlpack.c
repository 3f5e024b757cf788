/* tests/io/test_dlpack.c: DLPack export and import (cuttle/dlpack.h) on the CPU and on OpenCL
 * devices (PoCL, two devices), checked by consumers written here against dlpack/dlpack.h alone:
 *  - every dtype: the exported struct's device, dtype code/bits/lanes, shape, strides and data are
 *    what DLPack says, and a consumer that walks data + byte_offset by the strides reads cuttle's
 *    values;
 *  - views keep their layout: a slice with an offset, a transpose, an expanded (stride-0) dim, a
 *    channels_last tensor; the round trip ct_from_dlpack(ct_to_dlpack(t)) gives the same shape and
 *    strides over the same memory (a write through either is seen by the other);
 *  - lifetimes: the tensor freed before the deleter and after it (ASan sees any use after free),
 *    inside a scope;
 *  - a foreign tensor (a C producer's malloc'd buffer, with strides and a byte_offset) imported
 *    without a copy: its values, an op on it, autograd with it as a leaf, the deleter called once and
 *    only when the last view of it is freed;
 *  - errors with their messages, the deleter left uncalled: NULL, a dtype cuttle lacks, lanes,
 *    negative strides, ROCm and Vulkan, a CUDA device this process lacks, a foreign cl_mem, 9 dims,
 *    NULL data, misaligned data;
 *  - kDLOpenCL: the data is a cl_mem that a consumer reads with clEnqueueReadBuffer at byte_offset
 *    on a queue of the buffer's own context, on opencl:0 and opencl:1, views included, and the
 *    round trip shares the buffer;
 *  - DLPack 1.x's versioned struct (as cuttle lays it out without a 1.x header; test_dlpack_v1.c
 *    checks the layout against DLPack 1.1's header). */
#define CL_TARGET_OPENCL_VERSION 120
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlpack/dlpack.h>
#ifdef CUTTLE_WITH_OPENCL
#include <CL/cl.h>
#endif

#include "testutil.h"

#define NDT 8
static const ct_dtype dtypes[NDT] = {CT_F64, CT_F32, CT_F16, CT_BF16, CT_I64, CT_I32, CT_U8, CT_BOOL};
static const struct {
  uint8_t code, bits;
} dl_codes[NDT] = {{kDLFloat, 64}, {kDLFloat, 32}, {kDLFloat, 16}, {kDLBfloat, 16},
                   {kDLInt, 64},   {kDLInt, 32},   {kDLUInt, 8},   {6 /* kDLBool */, 8}};

/* Element i's value, exact in every dtype. */
static double value(ct_dtype dt, int64_t i) {
  if (dt == CT_BOOL) return i % 3 == 1;
  if (dt == CT_U8) return (double)((i * 7) % 256);
  if (ct_dtype_is_floating(dt)) return (double)(i - 5) * 0.5;
  return (double)(i * 3 - 7);
}

/* A contiguous tensor of shape (ndim dims) holding value(dt, i) in element i, on dev. */
static ct_tensor *make(ct_dtype dt, int ndim, const int64_t *shape, ct_device dev) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = value(dt, i);
  ct_tensor *f = ct_assert_nonnull(ct_from_host(v, ndim, shape, CT_F64, CT_DEVICE_CPU));
  ct_tensor *c = ct_assert_nonnull(ct_cast(f, dt));
  ct_tensor *t = ct_assert_nonnull(ct_to(c, dev, CT_COPY));
  ct_tensor_free(f), ct_tensor_free(c), free(v);
  return t;
}

/* The consumer: element at byte address p of a DLPack dtype, as a double. */
static double load(const void *p, DLDataType d) {
  switch (d.code) {
    case kDLFloat:
      if (d.bits == 64) return *(const double *)p;
      if (d.bits == 32) return *(const float *)p;
      return ct_f16_to_f32(*(const uint16_t *)p);
    case kDLBfloat: return ct_bf16_to_f32(*(const uint16_t *)p);
    case kDLInt: return d.bits == 64 ? (double)*(const int64_t *)p : *(const int32_t *)p;
    case kDLUInt: return *(const uint8_t *)p;
    case 6: return *(const uint8_t *)p != 0;
  }
  fail_msg("unknown DLPack dtype code %u", d.code);
  return 0;
}

/* Byte offset (from data + byte_offset) of the element with row-major index i of dl. */
static int64_t elem_byte(const DLTensor *dl, int64_t i) {
  int64_t off = 0;
  for (int d = dl->ndim - 1; d >= 0; d--) {
    int64_t k = i % dl->shape[d];
    i /= dl->shape[d];
    int64_t stride = dl->strides ? dl->strides[d] : 0;
    if (!dl->strides) {
      stride = 1;
      for (int e = d + 1; e < dl->ndim; e++) stride *= dl->shape[e];
    }
    off += k * stride;
  }
  return off * (dl->dtype.bits / 8);
}

static int64_t dl_numel(const DLTensor *dl) {
  int64_t n = 1;
  for (int d = 0; d < dl->ndim; d++) n *= dl->shape[d];
  return n;
}

/* A CPU consumer: every element of dl (walked by its strides) equals t's, read by cuttle. */
static void assert_dl_equals(const DLTensor *dl, ct_tensor *t) {
  int64_t n = dl_numel(dl);
  assert_int_equal(n, ct_tensor_numel(t));
  double *want = ct_test_values(t);
  for (int64_t i = 0; i < n; i++) {
    double got = load((const char *)dl->data + dl->byte_offset + elem_byte(dl, i), dl->dtype);
    if (got != want[i]) fail_msg("element %lld: the consumer reads %g, cuttle has %g", (long long)i, got, want[i]);
  }
  free(want);
}

static void assert_layout(const DLTensor *dl, ct_tensor *t) {
  assert_int_equal(dl->ndim, ct_tensor_ndim(t));
  assert_non_null(dl->shape);
  assert_non_null(dl->strides);
  for (int d = 0; d < dl->ndim; d++) {
    assert_int_equal(dl->shape[d], ct_tensor_shape(t)[d]);
    assert_int_equal(dl->strides[d], ct_tensor_strides(t)[d]);
  }
}

static void test_cpu_all_dtypes(void **state) {
  (void)state;
  int64_t shape[2] = {3, 4};
  for (int k = 0; k < NDT; k++) {
    ct_tensor *t = make(dtypes[k], 2, shape, CT_DEVICE_CPU);
    DLManagedTensor *m = ct_assert_nonnull(ct_to_dlpack(t));
    DLTensor *dl = &m->dl_tensor;
    assert_int_equal(dl->device.device_type, kDLCPU);
    assert_int_equal(dl->device.device_id, 0);
    assert_int_equal(dl->dtype.code, dl_codes[k].code);
    assert_int_equal(dl->dtype.bits, dl_codes[k].bits);
    assert_int_equal(dl->dtype.lanes, 1);
    assert_ptr_equal(dl->data, ct_tensor_data(t));
    assert_int_equal(dl->byte_offset, 0);
    assert_ptr_equal(m->manager_ctx != NULL, 1);
    assert_layout(dl, t);
    assert_dl_equals(dl, t);
    /* the round trip: the same memory, layout and dtype */
    ct_tensor *u = ct_assert_nonnull(ct_from_dlpack(m));
    assert_int_equal(ct_tensor_dtype(u), dtypes[k]);
    assert_ptr_equal(ct_tensor_data(u), ct_tensor_data(t));
    ct_assert_close(u, t, 0, 0);
    ct_tensor_free(u);
    ct_tensor_free(t);
  }
}

/* Views: an exported view reads right, its round trip has its strides, and writes go both ways. */
static void check_view(ct_tensor *v, const char *what) {
  DLManagedTensor *m = ct_assert_nonnull(ct_to_dlpack(v));
  assert_layout(&m->dl_tensor, v);
  assert_dl_equals(&m->dl_tensor, v);
  ct_tensor *u = ct_assert_nonnull(ct_from_dlpack(m));
  assert_int_equal(ct_tensor_ndim(u), ct_tensor_ndim(v));
  for (int d = 0; d < ct_tensor_ndim(v); d++) {
    assert_int_equal(ct_tensor_shape(u)[d], ct_tensor_shape(v)[d]);
    assert_int_equal(ct_tensor_strides(u)[d], ct_tensor_strides(v)[d]);
  }
  assert_ptr_equal(ct_tensor_data(u), ct_tensor_data(v));
  ct_assert_close(u, v, 0, 0);
  /* a write through the import is a write to the view */
  float *p = ct_tensor_data(u);
  float old = p[0];
  p[0] = 1234.5f;
  assert_true(((float *)ct_tensor_data(v))[0] == 1234.5f);
  p[0] = old;
  printf("view %s: layout and values kept both ways\n", what);
  ct_tensor_free(u);
}

static void test_cpu_views(void **state) {
  (void)state;
  ct_scope_begin();
  int64_t shape[4] = {2, 3, 4, 5};
  ct_tensor *t = make(CT_F32, 4, shape, CT_DEVICE_CPU);
  check_view(ct_assert_nonnull(ct_slice(t, 1, 1, 3, 1)), "slice (offset 20)");
  check_view(ct_assert_nonnull(ct_transpose(t, 1, 3)), "transpose");
  check_view(ct_assert_nonnull(ct_narrow(ct_transpose(t, 0, 2), 0, 1, 2)), "narrowed transpose");
  int64_t one[4] = {2, 1, 4, 5}, wide[4] = {2, 6, 4, 5};
  ct_tensor *n = ct_assert_nonnull(ct_narrow(t, 1, 2, 1));
  assert_int_equal(ct_tensor_shape(n)[1], one[1]);
  check_view(ct_assert_nonnull(ct_expand(n, 4, wide)), "expand (stride 0)");
  ct_tensor *cl = ct_assert_nonnull(ct_contiguous_format(t, CT_CHANNELS_LAST));
  assert_int_equal(ct_tensor_strides(cl)[1], 1);
  check_view(cl, "channels_last");
  DLManagedTensor *m = ct_assert_nonnull(ct_to_dlpack(cl));
  ct_tensor *u = ct_assert_nonnull(ct_from_dlpack(m));
  assert_true(ct_tensor_is_contiguous_format(u, CT_CHANNELS_LAST));
  ct_scope_end();
}

/* Either side may be freed first; under a scope the export keeps its own reference. */
static void test_lifetimes(void **state) {
  (void)state;
  int64_t n = 1000;
  ct_tensor *t = make(CT_F64, 1, &n, CT_DEVICE_CPU);
  DLManagedTensor *m = ct_assert_nonnull(ct_to_dlpack(t));
  ct_tensor_free(t); /* the struct keeps the memory */
  assert_true(((double *)m->dl_tensor.data)[999] == value(CT_F64, 999));
  m->deleter(m);

  ct_scope_begin();
  t = make(CT_F64, 1, &n, CT_DEVICE_CPU);
  m = ct_assert_nonnull(ct_to_dlpack(ct_slice(t, 0, 10, 20, 2)));
  ct_scope_end(); /* t and the slice are gone; the struct is not */
  assert_int_equal(m->dl_tensor.shape[0], 5);
  assert_int_equal(m->dl_tensor.strides[0], 2);
  assert_true(((double *)m->dl_tensor.data)[2] == value(CT_F64, 12));
  m->deleter(m);

  t = make(CT_F64, 1, &n, CT_DEVICE_CPU);
  m = ct_assert_nonnull(ct_to_dlpack(t));
  m->deleter(m); /* the deleter first */
  assert_true(((double *)ct_tensor_data(t))[1] == value(CT_F64, 1));
  ct_tensor_free(t);
}

/* ---- a foreign producer: a malloc'd buffer and a counting deleter */

typedef struct {
  DLManagedTensor m;
  int64_t shape[CT_MAX_DIMS + 2], strides[CT_MAX_DIMS + 2];
  void *buf;
  int *deleted;
} foreign;

static void foreign_deleter(DLManagedTensor *self) {
  foreign *f = self->manager_ctx;
  (*f->deleted)++;
  free(f->buf);
  free(f);
}

/* A (rows, cols) float32 matrix stored transposed (column-major) after `pad` bytes of padding that
 * byte_offset skips; element (i, j) is 10 i + j. */
static foreign *foreign_matrix(int64_t rows, int64_t cols, int pad, int *deleted) {
  foreign *f = calloc(1, sizeof *f);
  f->buf = malloc((size_t)pad + (size_t)(rows * cols) * sizeof(float));
  float *v = (float *)((char *)f->buf + pad);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) v[j * rows + i] = (float)(10 * i + j);
  f->shape[0] = rows, f->shape[1] = cols;
  f->strides[0] = 1, f->strides[1] = rows;
  f->deleted = deleted;
  f->m.dl_tensor = (DLTensor){.data = f->buf,
                              .device = {kDLCPU, 0},
                              .ndim = 2,
                              .dtype = {kDLFloat, 32, 1},
                              .shape = f->shape,
                              .strides = f->strides,
                              .byte_offset = (uint64_t)pad};
  f->m.manager_ctx = f;
  f->m.deleter = foreign_deleter;
  return f;
}

static void test_foreign_import(void **state) {
  (void)state;
  int deleted = 0;
  foreign *f = foreign_matrix(3, 4, 16, &deleted);
  ct_tensor *t = ct_assert_nonnull(ct_from_dlpack(&f->m));
  assert_int_equal(ct_tensor_strides(t)[0], 1);
  assert_int_equal(ct_tensor_strides(t)[1], 3);
  assert_ptr_equal(ct_tensor_data(t), (char *)f->buf + 16); /* no copy */
  double *v = ct_test_values(t);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) assert_true(v[i * 4 + j] == 10 * i + j);
  free(v);
  /* an op on it, and a view that outlives it */
  ct_tensor *s = ct_assert_nonnull(ct_add(t, t));
  ct_tensor *total = ct_assert_nonnull(ct_sum(s, 0, NULL, 0));
  assert_true(ct_item(total) == 276.0); /* 2 (sum of 10 i + j) */
  ct_tensor_free(total);
  ct_tensor *row = ct_assert_nonnull(ct_narrow(t, 0, 2, 1));
  ct_tensor_free(t);
  assert_int_equal(deleted, 0); /* the row still uses the memory */
  v = ct_test_values(row);
  assert_true(v[3] == 23);
  free(v);
  ct_tensor_free(row);
  assert_int_equal(deleted, 1);
  ct_tensor_free(s);
  assert_int_equal(deleted, 1);

  /* strides NULL: row-major */
  f = foreign_matrix(2, 2, 0, &deleted);
  f->m.dl_tensor.strides = NULL;
  t = ct_assert_nonnull(ct_from_dlpack(&f->m));
  assert_true(ct_tensor_is_contiguous(t));
  ct_tensor_free(t);
  assert_int_equal(deleted, 2);
}

/* An imported tensor is a leaf that autograd can differentiate: d sum(t * t) / dt = 2 t. */
static void test_foreign_autograd_leaf(void **state) {
  (void)state;
  int deleted = 0;
  foreign *f = foreign_matrix(3, 4, 0, &deleted);
  ct_tensor *t = ct_assert_nonnull(ct_from_dlpack(&f->m));
  assert_true(ct_is_leaf(t));
  assert_false(ct_requires_grad(t));
  ct_assert_ok(ct_requires_grad_(t, 1));
  ct_scope_begin();
  ct_tensor *loss = ct_assert_nonnull(ct_sum(ct_mul(t, t), 0, NULL, 0));
  ct_assert_ok(ct_backward(loss));
  ct_scope_end();
  ct_tensor *g = ct_assert_nonnull(ct_grad(t));
  double *gv = ct_test_values(g);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) assert_true(gv[i * 4 + j] == 2.0 * (10 * i + j));
  free(gv); /* g is borrowed from t */
  ct_tensor_free(t);
  assert_int_equal(deleted, 1);
}

/* Each refusal: the status, a message naming the problem, and the struct still the caller's. */
static void expect_refusal(foreign *f, ct_status want, const char *needle) {
  int before = *f->deleted;
  ct_clear_error();
  assert_null(ct_from_dlpack(&f->m));
  assert_int_equal(ct_last_status(), want);
  ct_assert_error_contains(needle);
  printf("refused: %s\n", ct_last_error());
  assert_int_equal(*f->deleted, before); /* not called: the struct is still ours */
}

static void test_import_errors(void **state) {
  (void)state;
  ct_clear_error();
  assert_null(ct_from_dlpack(NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("m is NULL");
  ct_clear_error();
  assert_null(ct_to_dlpack(NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);

  int deleted = 0;
  foreign *f = foreign_matrix(3, 4, 0, &deleted);
  DLTensor *dl = &f->m.dl_tensor, keep = *dl;
  dl->dtype = (DLDataType){kDLComplex, 64, 1};
  expect_refusal(f, CT_EDTYPE, "code 5 = complex, 64 bits");
  dl->dtype = (DLDataType){kDLInt, 16, 1};
  expect_refusal(f, CT_EDTYPE, "code 0 = int, 16 bits");
  dl->dtype = (DLDataType){kDLFloat, 32, 4};
  expect_refusal(f, CT_EDTYPE, "lanes 4");
  *dl = keep;
  f->strides[1] = -3;
  expect_refusal(f, CT_EUNSUPPORTED, "stride -3 of dim 1 is negative");
  f->strides[1] = 3;
  dl->device = (DLDevice){kDLROCM, 0};
  expect_refusal(f, CT_EUNSUPPORTED, "kDLROCM");
  dl->device = (DLDevice){kDLVulkan, 0};
  expect_refusal(f, CT_EUNSUPPORTED, "kDLVulkan");
  dl->device = (DLDevice){kDLCUDA, 7};
  expect_refusal(f, CT_EDEVICE, "kDLCUDA device 7, which this process has not opened");
  dl->device = (DLDevice){kDLOpenCL, 0};
  expect_refusal(f, CT_EUNSUPPORTED, "cannot adopt a foreign cl_mem");
  dl->device = (DLDevice){kDLCPU, 0};
  dl->ndim = 9;
  expect_refusal(f, CT_ESHAPE, "9 dims");
  dl->ndim = 2;
  dl->shape = NULL;
  expect_refusal(f, CT_EINVAL, "NULL shape");
  dl->shape = f->shape;
  dl->data = NULL;
  expect_refusal(f, CT_EINVAL, "NULL data pointer");
  dl->data = f->buf;
  dl->byte_offset = 2;
  expect_refusal(f, CT_EINVAL, "not aligned to the 4 bytes of float32");
  dl->byte_offset = 0;
  f->shape[0] = -1;
  expect_refusal(f, CT_EINVAL, "negative size -1 at dim 0");
  f->shape[0] = 3;
  f->strides[1] = (int64_t)1 << 62;
  expect_refusal(f, CT_ESHAPE, "span more than 2^63 elements");
  f->strides[1] = 3;
  f->shape[0] = 3;
  /* still good after all that */
  ct_tensor *t = ct_assert_nonnull(ct_from_dlpack(&f->m));
  ct_tensor_free(t);
  assert_int_equal(deleted, 1);
}

/* An empty tensor and a 0-dim one. */
static void test_edge_shapes(void **state) {
  (void)state;
  int64_t zero[2] = {0, 3};
  ct_tensor *e = ct_assert_nonnull(ct_empty(2, zero, CT_F32, CT_DEVICE_CPU));
  DLManagedTensor *m = ct_assert_nonnull(ct_to_dlpack(e));
  assert_int_equal(m->dl_tensor.shape[0], 0);
  ct_tensor *u = ct_assert_nonnull(ct_from_dlpack(m));
  assert_int_equal(ct_tensor_numel(u), 0);
  ct_tensor_free(u), ct_tensor_free(e);
  ct_tensor *s = ct_assert_nonnull(ct_scalar(2.5, CT_F64, CT_DEVICE_CPU));
  m = ct_assert_nonnull(ct_to_dlpack(s));
  assert_int_equal(m->dl_tensor.ndim, 0);
  assert_true(*(double *)m->dl_tensor.data == 2.5);
  u = ct_assert_nonnull(ct_from_dlpack(m));
  assert_true(ct_item(u) == 2.5);
  ct_tensor_free(u), ct_tensor_free(s);
  /* a foreign empty tensor with a NULL data pointer */
  int deleted = 0;
  foreign *f = foreign_matrix(1, 1, 0, &deleted);
  f->shape[0] = 0;
  f->m.dl_tensor.data = NULL;
  u = ct_assert_nonnull(ct_from_dlpack(&f->m));
  assert_int_equal(ct_tensor_numel(u), 0);
  ct_tensor_free(u);
  assert_int_equal(deleted, 1);
}

/* kDLCUDAHost imports as pinned CPU memory; OpenCL-pinned memory exports as kDLCPU (only the CUDA
 * backend's pinned memory is kDLCUDAHost). */
static void test_host_devices(void **state) {
  (void)state;
  int deleted = 0;
  foreign *f = foreign_matrix(2, 3, 0, &deleted);
  f->m.dl_tensor.device = (DLDevice){kDLCUDAHost, 0};
  ct_tensor *t = ct_assert_nonnull(ct_from_dlpack(&f->m));
  assert_int_equal(ct_tensor_device(t).kind, CT_CPU);
  assert_true(ct_tensor_is_pinned(t));
  ct_tensor_free(t);
  assert_int_equal(deleted, 1);
  int64_t n = 6;
  ct_tensor *p = ct_assert_nonnull(ct_empty_pinned(1, &n, CT_F32));
  DLManagedTensor *m = ct_assert_nonnull(ct_to_dlpack(p));
  assert_int_equal(m->dl_tensor.device.device_type, ct_device_count(CT_CUDA) > 0 ? kDLCUDAHost : kDLCPU);
  m->deleter(m);
  ct_tensor_free(p);
}

/* ---- DLPack 1.x: the versioned struct, laid out as DLPack 1.0/1.1 define it */
typedef struct {
  uint32_t major, minor;
} v1_version;
typedef struct v1_managed {
  v1_version version;
  void *manager_ctx;
  void (*deleter)(struct v1_managed *self);
  uint64_t flags;
  DLTensor dl_tensor;
} v1_managed;

static int v1_deleted;
static void v1_deleter(v1_managed *self) {
  v1_deleted++;
  free(self->manager_ctx);
  free(self);
}

static void test_versioned(void **state) {
  (void)state;
  int64_t shape[2] = {4, 5};
  ct_tensor *t = make(CT_BF16, 2, shape, CT_DEVICE_CPU);
  ct_tensor *tt = ct_assert_nonnull(ct_transpose(t, 0, 1));
  v1_managed *m = (v1_managed *)ct_assert_nonnull(ct_to_dlpack_versioned(tt, NULL));
  assert_int_equal(m->version.major, 1);
  assert_int_equal(m->version.minor, 0);
  assert_int_equal(m->flags, 0);
  assert_layout(&m->dl_tensor, tt);
  assert_dl_equals(&m->dl_tensor, tt);
  ct_tensor *u = ct_assert_nonnull(ct_from_dlpack_versioned((struct DLManagedTensorVersioned *)m, NULL));
  ct_assert_close(u, tt, 0, 0);
  assert_ptr_equal(ct_tensor_data(u), ct_tensor_data(tt));
  ct_tensor_free(u), ct_tensor_free(tt), ct_tensor_free(t);

  /* a foreign versioned struct */
  float *buf = malloc(6 * sizeof *buf);
  for (int i = 0; i < 6; i++) buf[i] = (float)i;
  static int64_t fshape[2] = {2, 3};
  v1_managed *fm = calloc(1, sizeof *fm);
  *fm = (v1_managed){.version = {1, 1}, .manager_ctx = buf, .deleter = v1_deleter, .flags = 2 /* IS_COPIED */,
                     .dl_tensor = {.data = buf, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1},
                                   .shape = fshape, .strides = NULL, .byte_offset = 0}};
  fm->flags = 1; /* READ_ONLY: refused, still ours */
  v1_deleted = 0;
  ct_clear_error();
  assert_null(ct_from_dlpack_versioned((struct DLManagedTensorVersioned *)fm, NULL));
  assert_int_equal(ct_last_status(), CT_EUNSUPPORTED);
  ct_assert_error_contains("read-only");
  assert_int_equal(v1_deleted, 0);
  fm->flags = 2;
  u = ct_assert_nonnull(ct_from_dlpack_versioned((struct DLManagedTensorVersioned *)fm, NULL));
  ct_scope_begin();
  assert_true(ct_item(ct_sum(u, 0, NULL, 0)) == 15.0);
  ct_scope_end();
  ct_tensor_free(u);
  assert_int_equal(v1_deleted, 1);

  /* major version 2: DLPack requires the consumer to call the deleter */
  buf = malloc(4);
  fm = calloc(1, sizeof *fm);
  *fm = (v1_managed){.version = {2, 0}, .manager_ctx = buf, .deleter = v1_deleter};
  ct_clear_error();
  assert_null(ct_from_dlpack_versioned((struct DLManagedTensorVersioned *)fm, NULL));
  assert_int_equal(ct_last_status(), CT_EUNSUPPORTED);
  ct_assert_error_contains("DLPack 2.0");
  assert_int_equal(v1_deleted, 2);
}

/* ---- kDLOpenCL */
#ifdef CUTTLE_WITH_OPENCL
/* An OpenCL consumer that knows only the struct: the buffer's context from the cl_mem, a queue of
 * its own on that context's device, clEnqueueReadBuffer of the span from byte_offset, then the
 * elements by the strides. Every one must equal cuttle's value of t. */
static void assert_cl_equals(const DLTensor *dl, ct_tensor *t) {
  cl_mem mem = (cl_mem)dl->data;
  cl_context ctx;
  size_t size;
  assert_int_equal(clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof ctx, &ctx, NULL), CL_SUCCESS);
  assert_int_equal(clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL), CL_SUCCESS);
  cl_device_id dev;
  assert_int_equal(clGetContextInfo(ctx, CL_CONTEXT_DEVICES, sizeof dev, &dev, NULL), CL_SUCCESS);
  cl_int e;
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &e);
  assert_int_equal(e, CL_SUCCESS);
  int64_t n = dl_numel(dl), span = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t b = elem_byte(dl, i) + dl->dtype.bits / 8;
    if (b > span) span = b;
  }
  assert_true(dl->byte_offset + (uint64_t)span <= size);
  char *host = malloc((size_t)span + 1);
  if (span) assert_int_equal(clEnqueueReadBuffer(q, mem, CL_TRUE, dl->byte_offset, (size_t)span, host, 0, NULL, NULL), CL_SUCCESS);
  clReleaseCommandQueue(q);
  double *want = ct_test_values(t);
  for (int64_t i = 0; i < n; i++) {
    double got = load(host + elem_byte(dl, i), dl->dtype);
    if (got != want[i]) fail_msg("element %lld: the OpenCL consumer reads %g, cuttle has %g", (long long)i, got, want[i]);
  }
  free(want), free(host);
}

static void check_cl(ct_tensor *v, int index, const char *what) {
  DLManagedTensor *m = ct_assert_nonnull(ct_to_dlpack(v));
  unsigned long long byte_offset = (unsigned long long)m->dl_tensor.byte_offset;
  assert_int_equal(m->dl_tensor.device.device_type, kDLOpenCL);
  assert_int_equal(m->dl_tensor.device.device_id, index);
  assert_layout(&m->dl_tensor, v);
  assert_cl_equals(&m->dl_tensor, v);
  /* the round trip shares the buffer: a write through the import shows in v */
  ct_tensor *u = ct_assert_nonnull(ct_from_dlpack(m));
  assert_int_equal(ct_tensor_device(u).kind, CT_OPENCL);
  assert_int_equal(ct_tensor_device(u).index, index);
  for (int d = 0; d < ct_tensor_ndim(v); d++) assert_int_equal(ct_tensor_strides(u)[d], ct_tensor_strides(v)[d]);
  ct_assert_close(u, v, 0, 0);
  ct_tensor *seven = ct_assert_nonnull(ct_full(0, NULL, 7, ct_tensor_dtype(v), ct_tensor_device(v)));
  ct_assert_ok(ct_copy_(u, seven));
  double *got = ct_test_values(v);
  for (int64_t i = 0; i < ct_tensor_numel(v); i++) assert_true(got[i] == 7);
  free(got);
  printf("opencl:%d %s: the cl_mem reads right at byte_offset %llu; the round trip shares it\n", index, what, byte_offset);
  ct_tensor_free(seven), ct_tensor_free(u);
}

static void test_opencl(void **state) {
  (void)state;
  for (int index = 0; index < 2; index++) {
    ct_device dev = CT_DEVICE_OPENCL(index);
    int64_t shape[4] = {2, 3, 4, 5};
    for (int k = 0; k < NDT; k++) {
      ct_tensor *t = make(dtypes[k], 4, shape, dev);
      DLManagedTensor *m = ct_assert_nonnull(ct_to_dlpack(t));
      assert_int_equal(m->dl_tensor.dtype.code, dl_codes[k].code);
      assert_cl_equals(&m->dl_tensor, t);
      m->deleter(m);
      ct_tensor_free(t);
    }
    ct_scope_begin();
    ct_tensor *t = make(CT_F32, 4, shape, dev);
    check_cl(ct_slice(t, 1, 1, 3, 1), index, "slice");
    check_cl(ct_transpose(ct_narrow(t, 0, 1, 1), 1, 3), index, "narrowed transpose (offset 60)");
    check_cl(ct_contiguous_format(make(CT_F32, 4, shape, dev), CT_CHANNELS_LAST), index, "channels_last");
    check_cl(t, index, "whole");
    ct_scope_end();
  }
  /* the freed tensor's buffer stays valid until the deleter */
  int64_t n = 64;
  ct_tensor *t = make(CT_F32, 1, &n, CT_DEVICE_OPENCL(0));
  ct_tensor *ref = make(CT_F32, 1, &n, CT_DEVICE_CPU);
  ct_tensor *tail = ct_assert_nonnull(ct_slice(t, 0, 8, 64, 1));
  DLManagedTensor *m = ct_assert_nonnull(ct_to_dlpack(tail));
  ct_tensor_free(tail), ct_tensor_free(t);
  ct_tensor *want = ct_assert_nonnull(ct_slice(ref, 0, 8, 64, 1));
  assert_cl_equals(&m->dl_tensor, want);
  m->deleter(m);
  ct_tensor_free(want), ct_tensor_free(ref);
}
#else
static void test_opencl(void **state) {
  (void)state;
  skip(); /* a build without the OpenCL backend */
}
#endif

/* ---- kDLCUDA: runs where a GPU is present (the GPU job), skips elsewhere */
static void test_cuda(void **state) {
  (void)state;
  if (ct_device_count(CT_CUDA) < 1) {
    printf("test_cuda: skipped: no CUDA device (the GPU job runs it)\n");
    skip();
  }
  ct_device dev = CT_DEVICE_CUDA(0);
  int64_t shape[4] = {2, 3, 4, 5};
  for (int k = 0; k < NDT; k++) {
    ct_tensor *t = make(dtypes[k], 4, shape, dev);
    ct_tensor *v = ct_assert_nonnull(ct_contiguous_format(t, CT_CHANNELS_LAST));
    DLManagedTensor *m = ct_assert_nonnull(ct_to_dlpack(v)); /* the legacy default stream waits for cuttle's */
    assert_int_equal(m->dl_tensor.device.device_type, kDLCUDA);
    assert_int_equal(m->dl_tensor.device.device_id, 0);
    assert_layout(&m->dl_tensor, v);
    /* a foreign producer over the same device memory (kept alive by m): the general import path,
     * with its stream wait */
    int deleted = 0;
    foreign *f = calloc(1, sizeof *f);
    memcpy(f->shape, m->dl_tensor.shape, 4 * sizeof(int64_t));
    memcpy(f->strides, m->dl_tensor.strides, 4 * sizeof(int64_t));
    f->deleted = &deleted;
    f->m.dl_tensor = m->dl_tensor;
    f->m.dl_tensor.shape = f->shape, f->m.dl_tensor.strides = f->strides;
    f->m.manager_ctx = f;
    f->m.deleter = foreign_deleter;
    ct_tensor *g = ct_assert_nonnull(ct_from_dlpack_ex(&f->m, &(ct_dlpack_opts){.stream = 2}));
    ct_assert_close(g, v, 0, 0);
    ct_tensor_free(g);
    assert_int_equal(deleted, 1);
    ct_tensor *u = ct_assert_nonnull(ct_from_dlpack(m)); /* the round trip */
    ct_assert_close(u, v, 0, 0);
    ct_tensor_free(u), ct_tensor_free(v), ct_tensor_free(t);
  }
  printf("cuda:0: every dtype, channels_last, round trip and foreign import\n");
}

int main(void) {
#ifdef CUTTLE_WITH_OPENCL
  if (!ct_test_require_opencl(2)) return 1;
#endif
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_all_dtypes),
      cmocka_unit_test(test_cpu_views),
      cmocka_unit_test(test_lifetimes),
      cmocka_unit_test(test_foreign_import),
      cmocka_unit_test(test_foreign_autograd_leaf),
      cmocka_unit_test(test_import_errors),
      cmocka_unit_test(test_edge_shapes),
      cmocka_unit_test(test_host_devices),
      cmocka_unit_test(test_versioned),
      cmocka_unit_test(test_opencl),
      cmocka_unit_test(test_cuda),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
