/* examples/devices.c: which devices are there? (d2l's "Computing Devices": try_gpu, try_all_gpus)
 *
 *   PyTorch:  torch.device('cpu'), torch.cuda.device_count(), try_gpu(), try_gpu(10), try_all_gpus()
 *   cuttle:   ct_device_parse, ct_device_count, ct_try_gpu, ct_try_all_gpus, ct_device_best */
#include <stdio.h>
#include "cuttle.h"

int main(void) {
  char name[32];
  ct_device cpu, gpu;
  ct_device_parse("cpu", &cpu);
  ct_device_parse("gpu:1", &gpu); /* "gpu" is an alias of "cuda" */
  printf("devices: %s %s\n", ct_device_str(cpu, name, sizeof name), ct_device_str(gpu, name + 16, 16));
  printf("cuda device count: %d\n", ct_device_count(CT_CUDA));

  /* try_gpu(i) gives GPU i when it exists, else the CPU: code written this way runs anywhere */
  printf("try_gpu(0) = %s, try_gpu(10) = %s\n", ct_device_str(ct_try_gpu(0), name, sizeof name),
         ct_device_str(ct_try_gpu(10), name + 16, 16));

  ct_device all[16];
  int n = ct_try_all_gpus(all, 16);
  printf("try_all_gpus() = [");
  for (int i = 0; i < n && i < 16; i++) printf("%s%s", i ? ", " : "", ct_device_str(all[i], name, sizeof name));
  printf("]\n");

  /* rather than rolling a dice: the GPU with the most free memory, or the CPU */
  ct_device best = ct_device_best(CT_BEST_MOST_FREE_MEMORY);
  ct_device_props p;
  if (ct_device_props_get(best, &p) == CT_OK)
    printf("best: %s (%s, %.1f GiB free)\n", ct_device_str(best, name, sizeof name), p.name, p.free_memory / 1073741824.0);
  return 0;
}
