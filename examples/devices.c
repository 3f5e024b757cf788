/* examples/devices.c: which devices are there? (d2l's "Computing Devices": try_gpu, try_all_gpus)
 *
 *   PyTorch:  torch.device('cpu'), torch.cuda.device_count(), try_gpu(), try_gpu(10), try_all_gpus()
 *   cuttle:   ct_device_parse, ct_device_count, ct_try_gpu, ct_try_all_gpus, ct_device_best
 * The program checks what it prints (tests/CMakeLists.txt runs it) and exits 1 when a check fails. */
#include <stdio.h>
#include "cuttle.h"

int main(void) {
  char name[32], name2[32];
  ct_device cpu, gpu;
  if (ct_device_parse("cpu", &cpu) != CT_OK || ct_device_parse("gpu:1", &gpu) != CT_OK) { /* "gpu" is an alias of "cuda" */
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }
  printf("devices: %s %s\n", ct_device_str(cpu, name, sizeof name), ct_device_str(gpu, name2, sizeof name2));
  int count = ct_device_count(CT_CUDA);
  printf("cuda device count: %d\n", count);

  /* try_gpu(i) gives GPU i when it exists, else the CPU: code written this way runs anywhere */
  ct_device g0 = ct_try_gpu(0), g10 = ct_try_gpu(10);
  printf("try_gpu(0) = %s, try_gpu(10) = %s\n", ct_device_str(g0, name, sizeof name),
         ct_device_str(g10, name2, sizeof name2));

  ct_device all[16];
  int n = ct_try_all_gpus(all, 16);
  printf("try_all_gpus() = [");
  for (int i = 0; i < n && i < 16; i++) printf("%s%s", i ? ", " : "", ct_device_str(all[i], name, sizeof name));
  printf("]\n");
  /* try_gpu(i) is entry i of try_all_gpus() when there is one, else the CPU */
  int ok = n >= 1 && ct_device_eq(g0, all[0]) && ct_device_eq(g10, n > 10 ? all[10] : cpu);

  /* rather than rolling a dice: the GPU with the most free memory, or the CPU */
  ct_device best = ct_device_best(CT_BEST_MOST_FREE_MEMORY);
  ct_device_props p;
  if (ct_device_props_get(best, &p) != CT_OK) {
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }
  printf("best: %s (%s, %.1f GiB free)\n", ct_device_str(best, name, sizeof name), p.name, p.free_memory / 1073741824.0);
  ok &= ct_device_eq(best, cpu) == ct_device_eq(all[0], cpu); /* the CPU only when there is no GPU */
  return ok ? 0 : 1;
}
