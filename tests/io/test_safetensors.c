/* tests/io/test_safetensors.c: the safetensors reader and writer (src/io/safetensors.c) and model and
 * training checkpoints (src/io/checkpoint.c).
 *
 * Interop without Python: files whose bytes are written out by hand from the format's description
 * (https://github.com/huggingface/safetensors, README "Format") must read back right, and the writer
 * must produce exactly the bytes the reference writer produces (its ordering and padding rules).
 * Every check of the reader has a case that trips it and must give CT_EFORMAT naming the problem. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "testutil.h"

/* ---- helpers */

static uint8_t *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
  *n = fread(b, 1, (size_t)len, f);
  fclose(f);
  return b;
}

static void write_all(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  fclose(f);
}

/* A file image: the 8-byte little-endian length of header (used as is: no padding), the header,
 * then dn bytes of data. */
static uint8_t *image(const char *header, const void *data, size_t dn, size_t *n) {
  size_t hn = strlen(header);
  uint8_t *b = malloc(8 + hn + dn + 1);
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hn >> (8 * i));
  memcpy(b + 8, header, hn);
  if (dn) memcpy(b + 8 + hn, data, dn);
  *n = 8 + hn + dn;
  return b;
}

/* Parsing buf must fail with CT_EFORMAT and a message naming the label and containing needle. */
static void expect_bad(const void *buf, size_t n, const char *needle) {
  ct_clear_error();
  ct_safetensors *f = ct_safetensors_parse(buf, n, "case.safetensors");
  if (f) {
    fprintf(stderr, "expected a CT_EFORMAT containing \"%s\", but the file parsed\n", needle);
    ct_safetensors_close(f);
    fail();
  }
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains("case.safetensors: ");
  ct_assert_error_contains(needle);
}

static void expect_bad_header(const char *header, size_t dn, const char *needle) {
  size_t n;
  uint8_t *zeros = calloc(dn + 1, 1);
  uint8_t *b = image(header, zeros, dn, &n);
  expect_bad(b, n, needle);
  free(b);
  free(zeros);
}

static int count_dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  if (d) closedir(d);
  return n;
}

/* Bytes of t in its own dtype (malloc'd). */
static uint8_t *bytes_of(ct_tensor *t, size_t *n) {
  *n = (size_t)ct_tensor_numel(t) * ct_dtype_size(ct_tensor_dtype(t));
  uint8_t *b = malloc(*n + 1);
  ct_assert_ok(ct_to_host(t, b, *n, ct_tensor_dtype(t)));
  return b;
}

static void assert_same_tensor(ct_tensor *a, ct_tensor *b) {
  assert_int_equal(ct_tensor_dtype(a), ct_tensor_dtype(b));
  assert_int_equal(ct_tensor_ndim(a), ct_tensor_ndim(b));
  for (int d = 0; d < ct_tensor_ndim(a); d++) assert_int_equal(ct_tensor_shape(a)[d], ct_tensor_shape(b)[d]);
  size_t na, nb;
  uint8_t *ba = bytes_of(a, &na), *bb = bytes_of(b, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(ba, bb, na);
  free(ba);
  free(bb);
}

/* ---- round trips */

static void test_roundtrip_all_dtypes(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/all.safetensors", dir);
  int64_t shape[3] = {2, 3, 1};
  const float f32[6] = {1.5f, -2.25f, 3e-8f, 1e30f, -0.0f, 7};
  const double f64[6] = {M_PI, -1e-300, 2, 3, 1e300, -7.125};
  const uint16_t f16[6] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x3555, 0x8400}; /* bit patterns */
  const uint16_t bf16[6] = {0x3F80, 0xC040, 0x7F7F, 0x0080, 0x3EAB, 0xBF00};
  const int32_t i32[6] = {1, -2, 2147483647, -2147483647 - 1, 65536, -9};
  const int64_t i64[6] = {1, -2, INT64_MAX, INT64_MIN, 1LL << 40, -9};
  const uint8_t u8[6] = {0, 1, 127, 128, 255, 42};
  const uint8_t b8[6] = {1, 0, 0, 1, 1, 0};
  const void *data[8] = {f32, f64, f16, bf16, i32, i64, u8, b8};
  ct_dtype dts[8] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_I32, CT_I64, CT_U8, CT_BOOL};
  const char *names[10] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool", "scalar", "empty"};
  ct_tensor *ts[10];
  for (int i = 0; i < 8; i++) ts[i] = ct_assert_nonnull(ct_from_host(data[i], 3, shape, dts[i], CT_DEVICE_CPU));
  double one = 42.5;
  ts[8] = ct_assert_nonnull(ct_from_host(&one, 0, NULL, CT_F64, CT_DEVICE_CPU));
  int64_t eshape[2] = {0, 4};
  ts[9] = ct_assert_nonnull(ct_empty(2, eshape, CT_F32, CT_DEVICE_CPU));
  ct_metadata_kv meta[2] = {{"format", "pt"}, {"note", "ünïcode \"quoted\"\n"}};
  ct_assert_ok(ct_safetensors_save(path, 10, names, ts, 2, meta));

  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  assert_int_equal(ct_safetensors_count(f), 10);
  for (int i = 0; i < 10; i++) {
    ct_tensor *r = ct_assert_nonnull(ct_safetensors_get(f, names[i], CT_DEVICE_CPU));
    assert_same_tensor(r, ts[i]);
    ct_tensor_free(r);
    ct_safetensors_info in;
    ct_assert_ok(ct_safetensors_info_at(f, ct_safetensors_find(f, names[i]), &in));
    assert_string_equal(in.name, names[i]);
    assert_int_equal(in.dtype, ct_tensor_dtype(ts[i]));
    /* the reference writer's layout: every tensor aligned to its dtype size */
    assert_int_equal(in.offset % ct_dtype_size(in.dtype), 0);
  }
  assert_int_equal(ct_safetensors_find(f, "nope"), -1);
  assert_null(ct_safetensors_get(f, "nope", CT_DEVICE_CPU));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_assert_error_contains("no tensor \"nope\"");
  assert_string_equal(ct_safetensors_metadata(f, "format"), "pt");
  assert_string_equal(ct_safetensors_metadata(f, "note"), "ünïcode \"quoted\"\n");
  assert_null(ct_safetensors_metadata(f, "absent"));
  assert_int_equal(ct_safetensors_metadata_count(f), 2);
  ct_safetensors_close(f);

  /* the header is padded to a multiple of 8 with spaces */
  size_t n;
  uint8_t *b = read_all(path, &n);
  uint64_t hn = 0;
  for (int i = 7; i >= 0; i--) hn = (hn << 8) | b[i];
  assert_int_equal(hn % 8, 0);
  free(b);
  for (int i = 0; i < 10; i++) ct_tensor_free(ts[i]);
  ct_test_rmdir(dir);
}

/* A non-contiguous view is written row-major, as its values read. */
static void test_save_view(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/view.safetensors", dir);
  const float v[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  ct_tensor *t = ct_assert_nonnull(ct_from_host(v, 2, shape, CT_F32, CT_DEVICE_CPU));
  ct_tensor *tt = ct_assert_nonnull(ct_transpose(t, 0, 1));
  const char *name = "t";
  ct_assert_ok(ct_safetensors_save(path, 1, &name, &tt, 0, NULL));
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  ct_tensor *r = ct_assert_nonnull(ct_safetensors_get(f, "t", CT_DEVICE_CPU));
  float got[6];
  ct_assert_ok(ct_to_host(r, got, sizeof got, CT_F32));
  const float want[6] = {1, 4, 2, 5, 3, 6};
  assert_memory_equal(got, want, sizeof want);
  ct_tensor_free(r);
  ct_safetensors_close(f);
  ct_tensor_free(tt);
  ct_tensor_free(t);
  ct_test_rmdir(dir);
}

/* ---- byte-exact interop, computed by hand from the format's description */

/* The writer's bytes equal expected (header text + padding spaces, then data). */
static void expect_written(int n, const char *const *names, ct_tensor *const *ts, int n_meta, const ct_metadata_kv *meta,
                           const char *header, const uint8_t *data, size_t dn) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/exact.safetensors", dir);
  ct_assert_ok(ct_safetensors_save(path, n, names, ts, n_meta, meta));
  size_t hl = strlen(header), padded = (hl + 7) / 8 * 8, got_n;
  uint8_t *got = read_all(path, &got_n);
  assert_int_equal(got_n, 8 + padded + dn);
  for (int i = 0; i < 8; i++) assert_int_equal(got[i], (uint8_t)((uint64_t)padded >> (8 * i)));
  if (memcmp(got + 8, header, hl) != 0) {
    fprintf(stderr, "header\n  got:  %.*s\n  want: %s\n", (int)hl, (const char *)got + 8, header);
    fail();
  }
  for (size_t i = hl; i < padded; i++) assert_int_equal(got[8 + i], ' ');
  if (dn) assert_memory_equal(got + 8 + padded, data, dn);
  free(got);
  ct_test_rmdir(dir);
}

static void test_writer_bytes_exact(void **state) {
  /* No tensors: "{}" and 6 spaces, N = 8. */
  expect_written(0, NULL, NULL, 0, NULL, "{}", NULL, 0);
  /* Metadata only: 35 characters, padded to 40. */
  ct_metadata_kv fw = {"framework", "pt"};
  assert_int_equal(strlen("{\"__metadata__\":{\"framework\":\"pt\"}}"), 35);
  expect_written(0, NULL, NULL, 1, &fw, "{\"__metadata__\":{\"framework\":\"pt\"}}", NULL, 0);

  /* One F32 tensor (1, 2, 3) holding 0..5: a 64-byte header needing no padding; float32 bit patterns
   * 0 = 00000000, 1 = 3f800000, 2 = 40000000, 3 = 40400000, 4 = 40800000, 5 = 40a00000, stored
   * little-endian. */
  const float v[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[3] = {1, 2, 3};
  ct_tensor *t = ct_assert_nonnull(ct_from_host(v, 3, shape, CT_F32, CT_DEVICE_CPU));
  const char *name = "attn.0";
  const char *h1 = "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}";
  assert_int_equal(strlen(h1), 64);
  const uint8_t d1[24] = {0, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40, 0, 0, 0xa0, 0x40};
  expect_written(1, &name, &t, 0, NULL, h1, d1, sizeof d1);
  ct_tensor_free(t);

  /* Four dtypes, given out of order: the reference lays them out by its Dtype order, largest first
   * (F64, I32, BF16, U8 here), then by name, and the metadata comes first.
   * 1.5 as float64 = 3ff8000000000000; int32 1, -1; bfloat16 1.0 = 3f80; u8 1 2 3. */
  const double c = 1.5;
  const int32_t bi[2] = {1, -1};
  const uint16_t d = 0x3F80;
  const uint8_t a[3] = {1, 2, 3};
  int64_t s1 = 1, s2 = 2, s3 = 3;
  ct_tensor *ts[4] = {ct_from_host(a, 1, &s3, CT_U8, CT_DEVICE_CPU), ct_from_host(bi, 1, &s2, CT_I32, CT_DEVICE_CPU),
                      ct_from_host(&c, 1, &s1, CT_F64, CT_DEVICE_CPU), ct_from_host(&d, 1, &s1, CT_BF16, CT_DEVICE_CPU)};
  const char *names[4] = {"a", "b", "c", "d"};
  const char *h2 =
      "{\"__metadata__\":{\"k\":\"v\"},"
      "\"c\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[8,16]},"
      "\"d\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[16,18]},"
      "\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[18,21]}}";
  const uint8_t d2[21] = {0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x80, 0x3f, 1, 2, 3};
  ct_metadata_kv kv = {"k", "v"};
  expect_written(4, names, ts, 1, &kv, h2, d2, sizeof d2);

  /* ... and the same bytes, written by hand, read back to those values. */
  size_t n;
  uint8_t *img = image(h2, d2, sizeof d2, &n);
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_parse(img, n, "hand"));
  free(img);
  for (int i = 0; i < 4; i++) {
    ct_tensor *r = ct_assert_nonnull(ct_safetensors_get(f, names[i], CT_DEVICE_CPU));
    assert_same_tensor(r, ts[i]);
    ct_tensor_free(r);
  }
  assert_string_equal(ct_safetensors_metadata(f, "k"), "v");
  ct_safetensors_close(f);
  for (int i = 0; i < 4; i++) ct_tensor_free(ts[i]);
}

/* Other writers may order tensors any way, leave the header unpadded and the data unaligned; extra
 * fields in an entry are ignored; BOOL bytes other than 0 are true. */
static void test_read_hand_written(void **state) {
  const char *h =
      "{\"y\":{\"data_offsets\":[1,9],\"shape\":[2],\"dtype\":\"F32\",\"extra\":[1]},\n"
      "  \"x\":{\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[0,1]},"
      "\"z\":{\"dtype\":\"I64\",\"shape\":[0,3],\"data_offsets\":[9,9]}}   ";
  /* x = bool 7 (true); y = float32 [-2, 0.5] = c0000000, 3f000000 */
  const uint8_t data[9] = {7, 0, 0, 0, 0xc0, 0, 0, 0, 0x3f};
  size_t n;
  uint8_t *img = image(h, data, sizeof data, &n);
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_parse(img, n, NULL));
  free(img);
  assert_int_equal(ct_safetensors_count(f), 3);
  ct_tensor *x = ct_assert_nonnull(ct_safetensors_get(f, "x", CT_DEVICE_CPU));
  assert_int_equal(ct_tensor_ndim(x), 0);
  assert_int_equal(ct_tensor_dtype(x), CT_BOOL);
  uint8_t xb;
  ct_assert_ok(ct_to_host(x, &xb, 1, CT_U8));
  assert_int_equal(xb, 1);
  ct_tensor *y = ct_assert_nonnull(ct_safetensors_get(f, "y", CT_DEVICE_CPU));
  float yv[2];
  ct_assert_ok(ct_to_host(y, yv, sizeof yv, CT_F32));
  assert_true(yv[0] == -2.0f && yv[1] == 0.5f);
  ct_tensor *z = ct_assert_nonnull(ct_safetensors_get(f, "z", CT_DEVICE_CPU));
  assert_int_equal(ct_tensor_numel(z), 0);
  assert_int_equal(ct_tensor_shape(z)[1], 3);
  ct_safetensors_info in;
  ct_assert_ok(ct_safetensors_info_at(f, 1, &in)); /* name order: x, y, z */
  assert_string_equal(in.name, "y");
  assert_string_equal(in.format_dtype, "F32");
  assert_int_equal(in.offset, 1);
  assert_int_equal(in.nbytes, 8);
  assert_int_equal(ct_safetensors_info_at(f, 3, &in), CT_EINVAL);
  ct_tensor_free(x);
  ct_tensor_free(y);
  ct_tensor_free(z);
  ct_safetensors_close(f);

  /* dtypes of the format that cuttle lacks: the file parses, only those tensors fail */
  uint8_t d2[4] = {1, 2, 3, 4};
  img = image("{\"h\":{\"dtype\":\"I16\",\"shape\":[1],\"data_offsets\":[0,2]},"
              "\"u\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}",
              d2, 4, &n);
  f = ct_assert_nonnull(ct_safetensors_parse(img, n, "mixed"));
  free(img);
  assert_null(ct_safetensors_get(f, "h", CT_DEVICE_CPU));
  assert_int_equal(ct_last_status(), CT_EDTYPE);
  ct_assert_error_contains("I16");
  ct_tensor *u = ct_assert_nonnull(ct_safetensors_get(f, "u", CT_DEVICE_CPU));
  ct_tensor_free(u);
  ct_safetensors_close(f);
}

/* ---- every validation path */

static void test_reject_framing(void **state) {
  uint8_t tiny[7] = {2, 0, 0, 0, 0, 0, 0};
  expect_bad(tiny, sizeof tiny, "too short");
  expect_bad(tiny, 0, "too short");
  /* N above the reference's MAX_HEADER_SIZE, and N = 2^63 + 5 (no overflow in 8 + N) */
  uint8_t big[10] = {0x01, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{', '}'}; /* 100000001 */
  expect_bad(big, sizeof big, "exceeds the limit of 100000000");
  uint8_t huge[10] = {5, 0, 0, 0, 0, 0, 0, 0x80, '{', '}'};
  expect_bad(huge, sizeof huge, "exceeds the limit");
  uint8_t small[9] = {1, 0, 0, 0, 0, 0, 0, 0, '{'};
  expect_bad(small, sizeof small, "too small");
  uint8_t past[15] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '"', 'a', '"', ':', '1', '}'};
  expect_bad(past, sizeof past, "runs past the end");
  /* exactly at the limit is allowed by the length check (and then fails for running past the end) */
  uint8_t at[10] = {0x00, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{', '}'};
  expect_bad(at, sizeof at, "runs past the end");
}

static void test_reject_header_text(void **state) {
  size_t n;
  uint8_t *b = image("{\"a\xff\":1}", NULL, 0, &n);
  expect_bad(b, n, "not valid UTF-8");
  free(b);
  b = image("{\"\xed\xa0\x80\":1}", NULL, 0, &n); /* an encoded surrogate */
  expect_bad(b, n, "not valid UTF-8");
  free(b);
  b = image("{}  ", NULL, 0, &n);
  b[10] = 0; /* a NUL inside the header */
  expect_bad(b, n, "NUL byte");
  free(b);
  expect_bad_header(" {}", 0, "does not start with '{'");
  expect_bad_header("[1, 2]", 0, "does not start with '{'");
  expect_bad_header("{\"a\": [1, 2", 0, "not valid JSON");
  expect_bad_header("{} x", 0, "not valid JSON");
  expect_bad_header("{}{}", 0, "not valid JSON");
  expect_bad_header("{'a': 1}", 0, "not valid JSON");
}

static void test_reject_keys(void **state) {
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                    2, "duplicate tensor name \"a\"");
  expect_bad_header("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate key \"__metadata__\"");
  expect_bad_header("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "duplicate key \"k\" in \"__metadata__\"");
  expect_bad_header("{\"__metadata__\":{\"k\":1}}", 0, "value of \"k\" is not a string");
  expect_bad_header("{\"__metadata__\":[]}", 0, "\"__metadata__\" must be an object");
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
                    "tensor \"a\": duplicate field \"dtype\"");
  expect_bad_header("{\"a\":[1]}", 0, "tensor \"a\": entry is not an object");
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, "tensor \"a\": missing field \"shape\"");
  expect_bad_header("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "missing field \"dtype\"");
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "missing field \"data_offsets\"");
}

static void test_reject_entries(void **state) {
  expect_bad_header("{\"a\":{\"dtype\":\"F99\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "unknown dtype \"F99\"");
  expect_bad_header("{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype \"f32\"");
  /* sub-byte dtypes: 3 x 4 bits is not a whole number of bytes; 4 x 6 bits is 3 bytes */
  expect_bad_header("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "not a whole number of bytes");
  size_t n;
  uint8_t *b = image("{\"a\":{\"dtype\":\"F6_E2M3\",\"shape\":[4],\"data_offsets\":[0,3]}}", "abc", 3, &n);
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_parse(b, n, "f6"));
  free(b);
  assert_null(ct_safetensors_get(f, "a", CT_DEVICE_CPU));
  assert_int_equal(ct_last_status(), CT_EDTYPE);
  ct_safetensors_close(f);
  expect_bad_header("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "dtype is not a string");
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1,
                    "shape entry 0 is not a non-negative integer");
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,2.5],\"data_offsets\":[0,1]}}", 1,
                    "shape entry 1 is not a non-negative integer");
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[\"1\"],\"data_offsets\":[0,1]}}", 1, "shape entry 0");
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}}", 1, "shape is not an array");
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 1,
                    "data_offsets must be two non-negative integers");
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", 1, "data_offsets must be two");
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[1,0]}}", 1, "end before begin");
  expect_bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
                    "tensor \"a\": shape (2,) of F32 needs 8 bytes but data_offsets [0, 4] span 4");
  /* 2^53 * 2^53 overflows before any multiplication by the dtype size */
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[9007199254740992,9007199254740992],\"data_offsets\":[0,0]}}", 0,
                    "overflows 64 bits");
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,18014398509481984]}}", 1,
                    "data_offsets must be two");
}

static void test_reject_layout(void **state) {
  const char *two = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%d,%d]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%d,%d]}}";
  char h[512];
  snprintf(h, sizeof h, two, 0, 8, 4, 8); /* b inside a */
  expect_bad_header(h, 8, "data_offsets [4, 8] overlap the previous tensor, which ends at 8");
  snprintf(h, sizeof h, two, 0, 8, 12, 16); /* 4 bytes nobody owns */
  expect_bad_header(h, 16, "tensor \"b\": gap in the byte buffer");
  snprintf(h, sizeof h, two, 4, 12, 12, 16); /* not starting at 0 */
  expect_bad_header(h, 16, "tensor \"a\": gap in the byte buffer: data_offsets begin at 4");
  snprintf(h, sizeof h, two, 0, 8, 8, 12);
  expect_bad_header(h, 11, "ends at byte 12 of the buffer, but the buffer holds 11 bytes (file truncated)");
  expect_bad_header(h, 13, "buffer holds 13 bytes (trailing bytes)");
  expect_bad_header("{}", 1, "trailing bytes");
  /* the same name twice with the same offsets is a duplicate, not an overlap */
  expect_bad_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                    1, "duplicate tensor name");
  /* a valid header with its data cut short, as a file truncated on disk */
  snprintf(h, sizeof h, two, 0, 8, 8, 12);
  expect_bad_header(h, 0, "file truncated");
}

static void test_open_errors(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/missing.safetensors", dir);
  assert_null(ct_safetensors_open(path));
  assert_int_equal(ct_last_status(), CT_EIO);
  ct_assert_error_contains(path);
  assert_null(ct_safetensors_open(dir));
  assert_int_equal(ct_last_status(), CT_EIO);
  snprintf(path, sizeof path, "%s/bad.safetensors", dir);
  write_all(path, "\x02\0\0\0\0\0\0\0[]", 10);
  assert_null(ct_safetensors_open(path));
  assert_int_equal(ct_last_status(), CT_EFORMAT);
  ct_assert_error_contains(path); /* the message names the file */
  ct_assert_error_contains("does not start with '{'");
  ct_test_rmdir(dir);
}

/* ---- the writer's argument checks and atomicity */

static void test_save_errors(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/x.safetensors", dir);
  float v = 1;
  int64_t one = 1;
  ct_tensor *t = ct_assert_nonnull(ct_from_host(&v, 1, &one, CT_F32, CT_DEVICE_CPU));
  ct_tensor *ts[2] = {t, t};
  const char *dup[2] = {"w", "w"}, *meta_name[1] = {"__metadata__"}, *null_name[1] = {NULL};
  assert_int_equal(ct_safetensors_save(path, 2, dup, ts, 0, NULL), CT_EINVAL);
  ct_assert_error_contains("\"w\" given twice");
  assert_int_equal(ct_safetensors_save(path, 1, meta_name, ts, 0, NULL), CT_EINVAL);
  ct_assert_error_contains("reserved");
  assert_int_equal(ct_safetensors_save(path, 1, null_name, ts, 0, NULL), CT_EINVAL);
  const char *bad_utf8[1] = {"\xc3("};
  assert_int_equal(ct_safetensors_save(path, 1, bad_utf8, ts, 0, NULL), CT_EINVAL);
  ct_assert_error_contains("UTF-8");
  ct_metadata_kv kv[2] = {{"a", "1"}, {"a", "2"}};
  const char *ok_name[1] = {"w"};
  assert_int_equal(ct_safetensors_save(path, 1, ok_name, ts, 2, kv), CT_EINVAL);
  ct_assert_error_contains("\"a\" given twice");
  assert_int_equal(ct_safetensors_save(NULL, 1, ok_name, ts, 0, NULL), CT_EINVAL);
  ct_tensor *nul[1] = {NULL};
  assert_int_equal(ct_safetensors_save(path, 1, ok_name, nul, 0, NULL), CT_EINVAL);
  assert_int_equal(count_dir_entries(dir), 0); /* nothing was created */
  ct_tensor_free(t);
  ct_test_rmdir(dir);
}

static void test_save_missing_dir(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/no/such/dir/x.safetensors", dir);
  float v = 1;
  int64_t one = 1;
  ct_tensor *t = ct_assert_nonnull(ct_from_host(&v, 1, &one, CT_F32, CT_DEVICE_CPU));
  const char *name = "w";
  assert_int_equal(ct_safetensors_save(path, 1, &name, &t, 0, NULL), CT_EIO);
  ct_assert_error_contains("cannot create");
  ct_assert_error_contains("/no/such/dir/x.safetensors.tmp.");
  assert_int_equal(count_dir_entries(dir), 0); /* no temp file anywhere */
  ct_tensor_free(t);
  ct_test_rmdir(dir);
}

/* A save that fails in the middle of writing (the file size limit, EFBIG) removes its temp file and
 * leaves the good file at path byte for byte; a successful one replaces it and leaves nothing else. */
static void test_failed_save_keeps_old_file(void **state) {
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  float small = 3;
  int64_t one = 1, big_n = 1 << 16;
  ct_tensor *t = ct_assert_nonnull(ct_from_host(&small, 1, &one, CT_F32, CT_DEVICE_CPU));
  ct_tensor *big = ct_assert_nonnull(ct_ones(1, &big_n, CT_F32, CT_DEVICE_CPU));
  const char *name = "w";
  ct_assert_ok(ct_safetensors_save(path, 1, &name, &t, 0, NULL));
  size_t n0, n1;
  uint8_t *before = read_all(path, &n0);

  struct rlimit old;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  struct rlimit lim = old;
  lim.rlim_cur = 4096;
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ct_status s = ct_safetensors_save(path, 1, &name, &big, 0, NULL);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, prev);
  assert_int_equal(s, CT_EIO);
  ct_assert_error_contains("cannot write");

  uint8_t *after = read_all(path, &n1);
  assert_int_equal(n0, n1);
  assert_memory_equal(before, after, n0);
  assert_int_equal(count_dir_entries(dir), 1); /* the temp file is gone */
  free(after);

  /* A file at our temp path can only be left by an earlier process that had our pid and was
   * killed mid-save (io.h): it is stale, so the save removes it instead of failing on it forever. */
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  write_all(tmp, "x", 1);
  assert_int_equal(count_dir_entries(dir), 2);
  ct_assert_ok(ct_safetensors_save(path, 1, &name, &big, 0, NULL));
  assert_int_equal(count_dir_entries(dir), 1);
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path));
  ct_tensor *r = ct_assert_nonnull(ct_safetensors_get(f, "w", CT_DEVICE_CPU));
  assert_int_equal(ct_tensor_numel(r), big_n);
  ct_tensor_free(r);
  ct_safetensors_close(f);
  free(before);
  ct_tensor_free(big);
  ct_tensor_free(t);
  ct_test_rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_all_dtypes),
      cmocka_unit_test(test_save_view),
      cmocka_unit_test(test_writer_bytes_exact),
      cmocka_unit_test(test_read_hand_written),
      cmocka_unit_test(test_reject_framing),
      cmocka_unit_test(test_reject_header_text),
      cmocka_unit_test(test_reject_keys),
      cmocka_unit_test(test_reject_entries),
      cmocka_unit_test(test_reject_layout),
      cmocka_unit_test(test_open_errors),
      cmocka_unit_test(test_save_errors),
      cmocka_unit_test(test_save_missing_dir),
      cmocka_unit_test(test_failed_save_keeps_old_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
