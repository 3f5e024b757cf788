/* tools/cuttle/commands.h: the subcommands; each takes argv from its own name on and returns the
 * process exit status (0 ok, 1 failure, 2 usage). */
#ifndef CUTTLE_COMMANDS_H
#define CUTTLE_COMMANDS_H
#include <stdio.h>
#include "cuttle.h"
int ct_cmd_train(int argc, char **argv);
int ct_cmd_eval(int argc, char **argv);
int ct_cmd_sample(int argc, char **argv); /* cmd_sample.c */
int ct_cmd_devices(int argc, char **argv);
int ct_cmd_smi(int argc, char **argv);
int ct_cmd_bench(int argc, char **argv); /* bench/bench.c */
/* Every benchmark of `cuttle bench`, a line each ("<indent><name> <what it measures>"; bench.c). */
void ct_bench_list(FILE *f, const char *indent);

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
 * batch (batch, sample[0], sample[1], sample[2]): the data set's sample shape), with the fix.
 * Prints nothing on a device that is not a GPU (the rule is about tensor cores) or when every size
 * is aligned. */
void ct_cli_print_alignment(ct_module *m, ct_device dev, int64_t batch, const int64_t sample[3], ct_dtype dtype);

/* The data options of `cuttle train` and `cuttle eval` (data_arg.c). The caller fills the options
 * as given; ct_cli_data_check reads the rest. */
enum { CT_CLI_FASHION_MNIST = 0, CT_CLI_CIFAR10 = 1, CT_CLI_CIFAR100 = 2, CT_CLI_IMAGEFOLDER = 3 };
enum { CT_CLI_MAX_CHANNELS = 4 }; /* --normalize takes at most this many values per list */
typedef struct {
  const char *data;       /* --data: fashion-mnist (NULL: the same), cifar10:DIR, cifar100:DIR, imagefolder:DIR */
  const char *data_dir;   /* --data-dir: Fashion-MNIST's folder (NULL: the default) */
  const char *image_size; /* --image-size H[,W] (image folders) */
  int gray, skip_bad;     /* --gray, --skip-bad-images (image folders) */
  int augment;            /* --augment: the train split only */
  double val_split;       /* --val-split F (image folders without train/ and val/) */
  uint64_t seed;          /* the --val-split draw's seed (--seed) */
  const char *normalize;  /* --normalize MEAN[,...]/STD[,...] (torchvision's Normalize; NULL: the data set's own) */
  /* read by ct_cli_data_check: */
  int kind;               /* CT_CLI_* */
  const char *dir;        /* the folder after "kind:" */
  int image_h, image_w;   /* --image-size, 0 without it */
  int norm_n;             /* --normalize's value count per list (1, or one per channel), 0 without it */
  float mean[CT_CLI_MAX_CHANNELS], std[CT_CLI_MAX_CHANNELS];
} ct_cli_data_opts;

/* Read --data and check the data options together. 0, or 2 after saying why (prefixed with prog). */
int ct_cli_data_check(const char *prog, ct_cli_data_opts *o);
/* What --normalize, --gray and --image-size make of a sample, as one canonical string for a
 * checkpoint's metadata (CT_CLI_TRANSFORM_KEY), "" when none of them was given (a data set's own
 * normalization given explicitly still reads as given); n >= 256 bytes. */
#define CT_CLI_TRANSFORM_KEY "cuttle.data_transform"
void ct_cli_data_transform(const ct_cli_data_opts *o, char *out, size_t n);
/* Rank 0 warns on stderr when the checkpoint f (opened from path, or NULL: nothing said) records
 * other sample options than o's (a model trained on other inputs evaluates or resumes on these):
 * the options are not part of the model, so it is a warning naming both, not an error. Silent for
 * a file without the record (written before cuttle kept it, or by PyTorch). */
void ct_cli_data_compare_saved(const char *prog, const ct_cli_data_opts *o, const ct_safetensors *f, const char *path);
/* One split of the data set, with --augment on the train split. NULL after saying why. */
ct_dataset *ct_cli_data_open(const char *prog, const ct_cli_data_opts *o, ct_split split);
/* --model for ds's samples (channels, height, width) and classes (ct_model_new_for). NULL after
 * saying why. */
ct_module *ct_cli_model_for(const char *prog, const char *model, const ct_dataset *ds, ct_device dev,
                            ct_generator *gen);
#endif
