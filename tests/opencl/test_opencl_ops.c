/* tests/opencl/test_opencl_ops.c: every row of the op table on opencl:0 (PoCL in CI), against the
 * CPU backend, with gradchecks on the device: the harness and its tolerances are tests/ops/
 * op_device.h, shared with the CUDA test; then the float16 / bfloat16 checks of lowp_checks.h.
 * Never skips: deps.sh installs PoCL, so the device exists wherever the tests run. */
#include "../ops/op_device.h"
#include "../ops/lowp_checks.h"

int main(void) {
  if (!ct_test_require_opencl(1)) return 1;
  int r = od_run_table(CT_DEVICE_OPENCL(0), "ops_opencl");
  /* float16 / bfloat16 on the device: float32 accumulation and no half overflow inside */
  lp_dev = CT_DEVICE_OPENCL(0);
  const struct CMUnitTest lowp[] = {LP_TESTS};
  return r | cmocka_run_group_tests_name("lowp_opencl", lowp, NULL, NULL);
}
