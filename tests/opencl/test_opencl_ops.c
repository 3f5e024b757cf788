/* tests/opencl/test_opencl_ops.c: every row of the op table on opencl:0 (PoCL in CI), against the
 * CPU backend, with gradchecks on the device: the harness and its tolerances are tests/ops/
 * op_device.h, shared with the CUDA test. Never skips: deps.sh installs PoCL, so the device exists
 * wherever the tests run. */
#include "../ops/op_device.h"

int main(void) {
  setenv("POCL_DEVICES", "pthread pthread", 0); /* before the first OpenCL call: PoCL reads it once */
  if (ct_device_count(CT_OPENCL) == 0) {
    fprintf(stderr, "no OpenCL device: scripts/deps.sh installs PoCL (pocl-opencl-icd); this test must not skip\n");
    return 1;
  }
  return od_run_table(CT_DEVICE_OPENCL(0), "ops_opencl");
}
