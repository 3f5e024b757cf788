/* tests/opencl/test_opencl_channels_last.c: the channels_last memory format on an OpenCL device
 * (PoCL in CI). OpenCL has no NHWC kernels of its own, so conv2d and pooling go through the
 * front-end's NCHW copies (src/ops/memory_format.c) and the elementwise kernels see NHWC views;
 * every case of channels_last_cases.h must give the NCHW result, in channels_last. */
#include "../ops/channels_last_cases.h"

int main(void) {
  if (!ct_test_require_opencl(1)) return 1;
  ct_assert_ok(ct_device_parse("opencl:0", &cl_dev));
  const struct CMUnitTest tests[] = {CL_TESTS};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
