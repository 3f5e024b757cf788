/* tools/cuttle/device_arg.c: the one reading of a --device argument, shared by the CLI's commands
 * and every `cuttle bench` benchmark (commands.h), so that the two never parse devices differently.
 * "auto" is the best GPU (CUDA first, then OpenCL GPUs) or the CPU; anything else goes through the
 * device registry ("cpu", "cuda:N", "gpu:N", "opencl:N") and must exist on this machine. */
#include <stdio.h>
#include <string.h>
#include "commands.h"
#include "cuttle.h"

ct_status ct_cli_device(const char *prog, const char *s, ct_device *out) {
  if (strcmp(s, "auto") == 0) {
    *out = ct_device_best(CT_BEST_MOST_FREE_MEMORY);
    return CT_OK;
  }
  ct_status st = ct_device_parse(s, out);
  if (st != CT_OK) return st;
  if (!ct_device_available(*out)) {
    char name[32];
    fprintf(stderr, "%s: device %s is not available (%d cuda device(s), %d opencl device(s)); use --device cpu or auto\n",
            prog, ct_device_str(*out, name, sizeof name), ct_device_count(CT_CUDA), ct_device_count(CT_OPENCL));
    /* PoCL shows one CPU device unless told otherwise; more are one variable away. */
    if (out->kind == CT_OPENCL && ct_device_count(CT_OPENCL) > 0)
      fprintf(stderr, "%s: PoCL makes one device per word of POCL_DEVICES: POCL_DEVICES=\"pthread pthread\" gives two\n",
              prog);
    return CT_EDEVICE;
  }
  return CT_OK;
}

int ct_cli_device_list(const char *prog, const char *s, ct_device *out, int cap) {
  char buf[512];
  if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) {
    fprintf(stderr, "%s: the --devices list is too long\n", prog);
    return -1;
  }
  int n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (n == cap) {
      fprintf(stderr, "%s: --devices takes at most %d devices\n", prog, cap);
      return -1;
    }
    if (strcmp(tok, "auto") == 0) {
      fprintf(stderr, "%s: --devices wants device names (cpu, opencl:N, cuda:N), not auto\n", prog);
      return -1;
    }
    ct_status st = ct_cli_device(prog, tok, &out[n]);
    if (st != CT_OK) {
      if (st != CT_EDEVICE) fprintf(stderr, "%s: --devices: %s\n", prog, ct_last_error());
      return -1;
    }
    for (int i = 0; i < n; i++)
      if (ct_device_eq(out[i], out[n])) {
        fprintf(stderr, "%s: --devices names %s twice\n", prog, tok);
        return -1;
      }
    n++;
  }
  if (n == 0) fprintf(stderr, "%s: --devices needs at least one device\n", prog);
  return n > 0 ? n : -1;
}
