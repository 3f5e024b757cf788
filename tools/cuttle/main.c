/* tools/cuttle/main.c: the cuttle CLI, one table of subcommands. */
#include <stdio.h>
#include <string.h>
#include "cli_commit.h"
#include "commands.h"

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
} commands[] = {
    {"train", ct_cmd_train, "train an image classifier (Fashion-MNIST by default) and keep the run in a folder"},
    {"eval", ct_cmd_eval, "the test accuracy of a checkpoint, on the split its run held out"},
    {"sample", ct_cmd_sample, "continue a prompt with a GPT-2 (KV cache, temperature, top-k, a seed)"},
    {"devices", ct_cmd_devices, "list the devices, like try_all_gpus, with their properties"},
    {"smi", ct_cmd_smi, "a device monitor in the spirit of nvidia-smi"},
    {"bench", ct_cmd_bench, "benchmarks (below), each against PyTorch where it has a peer"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: cuttle <command> [options]   (cuttle <command> --help for its options)\n"
             "       cuttle --version\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "\nbenchmarks (cuttle bench <name>):\n");
  ct_bench_list(f, "  ");
}

/* `cuttle --version`: the library's version, the commit it was built from, and the backends built. */
static int version(void) {
  printf("cuttle %s (commit %s; backends: cpu", ct_version(), CT_CLI_COMMIT);
#ifdef CUTTLE_CLI_OPENCL
  printf(", opencl");
#endif
#ifdef CUTTLE_WITH_CUDA
  printf(", cuda");
#endif
#ifdef CUTTLE_WITH_MPI
  printf("; mpi");
#endif
  printf(")\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) return version();
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "cuttle: unknown command \"%s\"\n", argv[1]);
  usage(stderr);
  return 2;
}
