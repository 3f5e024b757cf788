/* tools/cuttle/cmd_devices.c: `cuttle devices`: every device try_all_gpus would give, plus the
 * CPU and every OpenCL device, with their properties. */
#include <stdio.h>
#include <string.h>
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
         p.cores, d.kind == CT_CPU ? "cores" : d.kind == CT_CUDA ? "SMs" : "compute units");
  if (d.kind == CT_CUDA)
    printf("         compute capability %d.%d, bus %s, %s\n", p.compute_major, p.compute_minor, p.pci_bus_id, p.uuid);
  if (d.kind == CT_OPENCL) {
    static const char *types[] = {"unknown", "CPU", "GPU", "accelerator"};
    printf("         %s, %s device, driver %s, max buffer %.1f GiB, fp16 %s, fp64 %s%s\n", p.vendor,
           types[p.device_type >= 0 && p.device_type <= 3 ? p.device_type : 0], p.driver_version, p.max_alloc / 1073741824.0,
           p.fp16 ? "yes" : "no", p.fp64 ? "yes" : "no", p.device_type == CT_DEVICE_TYPE_GPU ? "" : " (used only when named)");
  }
}

int ct_cmd_devices(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    int help = strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
    if (!help) fprintf(stderr, "cuttle devices: unexpected argument \"%s\"\n", argv[i]);
    fprintf(help ? stdout : stderr, "usage: cuttle devices\n"
                                    "Lists the devices try_all_gpus() would return, then the CPU, every CUDA GPU and every\n"
                                    "OpenCL device with its properties (memory, cores, SMs or compute units; for a CUDA GPU\n"
                                    "its compute capability, PCI bus id and UUID). Takes no options.\n");
    return help ? 0 : 2;
  }
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
  for (int i = 0; i < ct_device_count(CT_OPENCL); i++) row(CT_DEVICE_OPENCL(i));
  return 0;
}
