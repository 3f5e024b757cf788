/* tests/cuda/test_ops_cuda.c: every row of the op table on cuda:0, against the CPU backend, with
 * gradchecks on the GPU: the harness and its tolerances are tests/ops/op_device.h, shared with the
 * OpenCL test; then batch norm and layer norm on the GPU's own kernels (norm.cu) against the CPU's
 * (norm_kernels.h), max pooling's ties and NaNs (pool_kernels.h) and conv2d at a larger size
 * (conv_kernels.h). TF32 is off, so float32 matmul and convolution round like the CPU's. Exits 77
 * (skipped, the reason printed) when cuttle was built without CUDA or no GPU is visible. */
#include "../ops/op_device.h"
#include "../ops/norm_kernels.h"
#include "../ops/pool_kernels.h"
#include "../ops/seq_kernels.h"
#include "../ops/conv_kernels.h"
#include "../ops/attention_kernels.h"

int main(void) {
  if (ct_device_count(CT_CUDA) == 0) {
#ifdef CUTTLE_WITH_CUDA
    printf("# skipped: the CUDA backend is built but no GPU is visible\n");
#else
    printf("# skipped: cuttle was built without the CUDA backend\n");
#endif
    return CT_TEST_SKIP;
  }
  ct_set_allow_tf32(0); /* float32 matmul / convolution in full float32, like the CPU */
  int r = od_run_table(CT_DEVICE_CUDA(0), "ops_cuda");
  nk_dev = CT_DEVICE_CUDA(0);
  sk_dev = CT_DEVICE_CUDA(0); /* embedding's index checks and backward, multinomial (seq_kernels.h) */
  ak_dev = CT_DEVICE_CUDA(0); /* CUDA's fused attention (attention.cu) against the CPU's (attention_kernels.h) */
  pk_dev = CT_DEVICE_CUDA(0); /* max pooling's ties and NaNs as the CPU's (pool_kernels.h) */
  ck_dev = CT_DEVICE_CUDA(0); /* conv2d beyond the op table's sizes: the bias gradient's blocks (conv_kernels.h) */
  const struct CMUnitTest norms[] = {NK_TESTS, PK_TESTS, CK_TESTS, SK_TESTS, AK_TESTS};
  return r | cmocka_run_group_tests_name("norm_kernels_cuda", norms, NULL, NULL);
}
