/* tools/cuttle/commands.h: the subcommands; each takes argv from its own name on and returns the
 * process exit status (0 ok, 1 failure, 2 usage). */
#ifndef CUTTLE_COMMANDS_H
#define CUTTLE_COMMANDS_H
int ct_cmd_train(int argc, char **argv);
int ct_cmd_eval(int argc, char **argv);
int ct_cmd_devices(int argc, char **argv);
int ct_cmd_smi(int argc, char **argv);
int ct_cmd_bench(int argc, char **argv); /* bench/bench.c */
#endif
