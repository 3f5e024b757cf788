/* tests/io/test_dlpack_v1.c: cuttle's DLPack 1.x struct against DLPack 1.1's own header
 * (tests/io/dlpack_v1/dlpack.h, copied unchanged from github.com/dmlc/dlpack tag v1.1).
 *
 * libcuttle is built with Debian's dlpack.h 0.6, which lacks DLManagedTensorVersioned, so
 * src/io/dlpack.c lays the struct out itself. This test sees the struct only through the upstream
 * header: what ct_to_dlpack_versioned returns must read right through it (version, flags,
 * manager_ctx, deleter, the tensor), and a struct made with it (a foreign producer of DLPack 1.1,
 * with kDLBool, the code DLPack 0.8 added) must import. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlpack_v1/dlpack.h" /* quoted: this folder's copy, not the system's 0.6 */
#include "testutil.h"

#if DLPACK_MAJOR_VERSION != 1
#error "tests/io/dlpack_v1/dlpack.h must be a DLPack 1.x header"
#endif

static void test_export_reads_through_upstream_header(void **state) {
  (void)state;
  int64_t shape[3] = {2, 3, 4};
  float v[24];
  for (int i = 0; i < 24; i++) v[i] = (float)i * 0.5f;
  ct_tensor *t = ct_assert_nonnull(ct_from_host(v, 3, shape, CT_F32, CT_DEVICE_CPU));
  ct_tensor *s = ct_assert_nonnull(ct_slice(t, 2, 1, 4, 2)); /* (2, 3, 2), strides (12, 4, 2), offset 1 */
  struct DLManagedTensorVersioned *m = ct_assert_nonnull(ct_to_dlpack_versioned(s, NULL));
  assert_int_equal(m->version.major, DLPACK_MAJOR_VERSION);
  assert_int_equal(m->version.minor, 0);
  assert_int_equal(m->flags, 0);
  assert_non_null(m->manager_ctx);
  assert_non_null(m->deleter);
  DLTensor *dl = &m->dl_tensor;
  assert_int_equal(dl->device.device_type, kDLCPU);
  assert_int_equal(dl->ndim, 3);
  assert_int_equal(dl->dtype.code, kDLFloat);
  assert_int_equal(dl->dtype.bits, 32);
  assert_int_equal(dl->dtype.lanes, 1);
  assert_int_equal(dl->shape[2], 2);
  assert_int_equal(dl->strides[0], 12);
  assert_int_equal(dl->strides[2], 2);
  assert_ptr_equal(dl->data, ct_tensor_data(s));
  const float *p = (const float *)((const char *)dl->data + dl->byte_offset);
  assert_true(p[1 * 12 + 2 * 4 + 1 * 2] == v[12 + 8 + 1 + 2] );
  printf("DLManagedTensorVersioned: version %u.%u, flags %llu, dl_tensor at byte %zu, read through DLPack %d.%d's header\n",
         m->version.major, m->version.minor, (unsigned long long)m->flags, offsetof(struct DLManagedTensorVersioned, dl_tensor),
         DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
  ct_tensor_free(s);
  ct_tensor_free(t);
  m->deleter(m); /* the last reference: ASan checks the deleter frees what it should */
}

static int deleted;
static void deleter(struct DLManagedTensorVersioned *self) {
  deleted++;
  free(self->manager_ctx);
  free(self);
}

static void test_import_upstream_struct(void **state) {
  (void)state;
  uint8_t *buf = malloc(6);
  for (int i = 0; i < 6; i++) buf[i] = i % 2;
  static int64_t shape[2] = {3, 2};
  struct DLManagedTensorVersioned *m = calloc(1, sizeof *m);
  m->version = (DLPackVersion){DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  m->manager_ctx = buf;
  m->deleter = deleter;
  m->flags = DLPACK_FLAG_BITMASK_IS_COPIED;
  m->dl_tensor = (DLTensor){.data = buf, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLBool, 8, 1}, .shape = shape};
  ct_tensor *t = ct_assert_nonnull(ct_from_dlpack_versioned(m, NULL));
  assert_int_equal(ct_tensor_dtype(t), CT_BOOL);
  assert_ptr_equal(ct_tensor_data(t), buf);
  uint8_t got[6];
  ct_assert_ok(ct_to_host(t, got, sizeof got, CT_BOOL));
  for (int i = 0; i < 6; i++) assert_int_equal(got[i], i % 2);
  assert_int_equal(deleted, 0);
  ct_tensor_free(t);
  assert_int_equal(deleted, 1);

  /* read-only is refused and the struct stays ours */
  buf = malloc(4);
  m = calloc(1, sizeof *m);
  m->version = (DLPackVersion){1, 1};
  m->manager_ctx = buf;
  m->deleter = deleter;
  m->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  m->dl_tensor = (DLTensor){.data = buf, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = shape};
  assert_null(ct_from_dlpack_versioned(m, NULL));
  assert_int_equal(ct_last_status(), CT_EUNSUPPORTED);
  assert_int_equal(deleted, 1);
  m->deleter(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_export_reads_through_upstream_header),
      cmocka_unit_test(test_import_upstream_struct),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
