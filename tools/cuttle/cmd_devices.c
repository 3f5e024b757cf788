/* tools/cuttle/cmd_devices.c: `cuttle devices`: every device try_all_gpus would give, plus the
 * CPU, with their properties. */
#include <stdio.h>
#include "commands.h"
#include "cuttle.h"

static void row(ct_device d) {
  ct_device_props p;
  char name[32];
  if (ct_device_props_get(d, &p) != CT_OK) {
    printf("%-8s error: %s\n", ct_device_str(d, name, sizeof name), ct_last_error());
    return;
  }
  printf("%-8s %s\n", ct_device_str(d, name, sizeof name), p.name);
  printf("         memory %.1f GiB total, %.1f GiB free; %d %s\n", p.total_memory / 1073741824.0, p.free_memory / 1073741824.0,
         p.cores, d.kind == CT_CPU ? "cores" : "SMs");
  if (d.kind == CT_CUDA)
    printf("         compute capability %d.%d, bus %s, %s\n", p.compute_major, p.compute_minor, p.pci_bus_id, p.uuid);
}

int ct_cmd_devices(int argc, char **argv) {
  (void)argc, (void)argv;
  ct_device all[64];
  int n = ct_try_all_gpus(all, 64);
  char name[32];
  printf("try_all_gpus(): [");
  for (int i = 0; i < n && i < 64; i++) printf("%s%s", i ? ", " : "", ct_device_str(all[i], name, sizeof name));
  printf("]\n");
  int gpus = ct_device_count(CT_CUDA);
  if (gpus == 0) printf("no CUDA GPU found: cuttle runs on the CPU\n");
  row(CT_DEVICE_CPU);
  for (int i = 0; i < gpus; i++) row(CT_DEVICE_CUDA(i));
  return 0;
}
