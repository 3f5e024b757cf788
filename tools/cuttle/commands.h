/* tools/cuttle/commands.h: the subcommands; each takes argv from its own name on and returns the
 * process exit status (0 ok, 1 failure, 2 usage). */
#ifndef CUTTLE_COMMANDS_H
#define CUTTLE_COMMANDS_H
#include "cuttle.h"
int ct_cmd_train(int argc, char **argv);
int ct_cmd_eval(int argc, char **argv);
int ct_cmd_devices(int argc, char **argv);
int ct_cmd_smi(int argc, char **argv);
int ct_cmd_bench(int argc, char **argv); /* bench/bench.c */

/* Read a --device argument (device_arg.c), for the CLI and the benchmarks alike: "auto" or a
 * registry name of a device that exists. A malformed name returns its status with ct_last_error()
 * set and prints nothing; a missing device prints why, prefixed with prog, and returns CT_EDEVICE. */
ct_status ct_cli_device(const char *prog, const char *s, ct_device *out);

/* Read a --devices list, "opencl:0,opencl:1" (device_arg.c): each name as ct_cli_device reads it
 * ("auto" is not allowed in a list), no device twice, at most cap. Returns the number of devices,
 * or -1 after printing why, prefixed with prog. */
#define CT_CLI_MAX_DEVICES 16
int ct_cli_device_list(const char *prog, const char *s, ct_device *out, int cap);

/* --amp on a GPU (alignment_report.c): print once, to stderr, every layer of m whose features,
 * channels or batch size break the tensor-core rule for dtype (ct_module_check_alignment, for a
 * Fashion-MNIST batch (batch, 1, 28, 28)), with the fix. Prints nothing on a device that is not a
 * GPU (the rule is about tensor cores) or when every size is aligned. */
void ct_cli_print_alignment(ct_module *m, ct_device dev, int64_t batch, ct_dtype dtype);
#endif
