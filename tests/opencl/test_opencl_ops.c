/* tests/opencl/test_opencl_ops.c: every row of the op table on opencl:0 (PoCL in CI), against the
 * CPU backend, with gradchecks on the device: the harness and its tolerances are tests/ops/
 * op_device.h, shared with the CUDA test. Never skips: deps.sh installs PoCL, so the device exists
 * wherever the tests run. */
#include "../ops/op_device.h"

int main(void) {
  if (!ct_test_require_opencl(1)) return 1;
  return od_run_table(CT_DEVICE_OPENCL(0), "ops_opencl");
}
