/* tools/cuttle/alignment_report.c: what `cuttle train --amp` prints on a GPU about the tensor-core
 * rule of the "GPU & Data Parallel" notes: in float16 and bfloat16, features, channels and the
 * batch size should be multiples of 8 (ct_module_check_alignment), else the GPU's tensor cores go
 * unused for that layer. Said once, at the start, with the fix for each layer. */
#include <stdio.h>
#include "commands.h"

void ct_cli_print_alignment(ct_module *m, ct_device dev, int64_t batch, const int64_t sample[3], ct_dtype dtype) {
  ct_device_props p;
  if (ct_device_props_get(dev, &p) != CT_OK || p.device_type != CT_DEVICE_TYPE_GPU) {
    ct_clear_error();
    return;
  }
  ct_alignment_issue issues[32];
  int count = 0;
  ct_status s = ct_module_check_alignment(m, 4, (int64_t[]){batch, sample[0], sample[1], sample[2]}, dtype, issues, 32, &count);
  if (s != CT_OK) {
    fprintf(stderr, "cuttle: the tensor-core alignment check failed: %s\n", ct_last_error());
    ct_clear_error();
    return;
  }
  if (count == 0) return;
  fprintf(stderr, "tensor cores: %d size(s) are not multiples of %d for %s, so those layers cannot use them:\n", count,
          ct_alignment_multiple(dtype), ct_dtype_name(dtype));
  for (int i = 0; i < count && i < 32; i++) fprintf(stderr, "  %s\n", issues[i].message);
}
