/* tests/ops/test_channels_last.c: the channels_last memory format on the CPU, whose conv2d and
 * pooling run NHWC kernels of their own (src/backend/cpu/conv_nhwc.c, pool_nhwc.c): every case of
 * channels_last_cases.h against the same op on NCHW tensors. */
#include "channels_last_cases.h"

int main(void) {
  cl_dev = CT_DEVICE_CPU;
  const struct CMUnitTest tests[] = {CL_TESTS};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
