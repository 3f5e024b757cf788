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
#endif
