/* bench/bench.h: what the `cuttle bench` subcommands share: the clock, timing with warmup and the
 * median of repeats (synchronizing a GPU before reading the clock), the option parser, device
 * choice, a small table that prints aligned to stdout and writes CSV (--csv FILE), and the PyTorch
 * peers (--pytorch [--python PATH] [--script FILE]): a script that measures the same in PyTorch and
 * prints one JSON line, whose figures go beside cuttle's in the same table. */
#ifndef CUTTLE_BENCH_H
#define CUTTLE_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include "cuttle.h"

/* The subcommands; each takes argv from its own name on and returns the exit status. */
int ct_bench_gemm(int argc, char **argv);
int ct_bench_overhead(int argc, char **argv);
int ct_bench_matmul_sweep(int argc, char **argv);
int ct_bench_norms(int argc, char **argv);
int ct_bench_bandwidth(int argc, char **argv);
int ct_bench_train(int argc, char **argv);
/* `bench train --model gpt2` (bench/train_gpt2.c): ct_bench_train hands it its whole command line. */
int ct_bench_train_gpt2(int argc, char **argv);
int ct_bench_two_devices(int argc, char **argv);
int ct_bench_data_parallel(int argc, char **argv);
int ct_bench_allreduce(int argc, char **argv);
int ct_bench_ddp_overlap(int argc, char **argv);
int ct_bench_amp_memory(int argc, char **argv);
int ct_bench_conv_format(int argc, char **argv);
int ct_bench_memory(int argc, char **argv);
int ct_bench_decode(int argc, char **argv);
int ct_bench_attention(int argc, char **argv);

/* Seconds on the monotonic clock. */
double ct_bench_now(void);

/* One timed call; returns 0 on success, nonzero on failure (ct_last_error() says why). */
typedef int (*ct_bench_fn)(void *ctx);

typedef struct {
  int warmup;         /* untimed calls first; 0 = 1 */
  int min_repeats;    /* timed samples at least; 0 = 3 */
  int max_repeats;    /* and at most; 0 = 100 */
  double target_s;    /* stop adding samples after this much timed time (0 = 0.5 s) */
  int inner;          /* calls per sample (the sample is divided by it); 0 = 1 */
} ct_bench_opts;

typedef struct {
  double median, min, p10, p90; /* seconds per call */
  int samples;
} ct_bench_result;

/* Time fn: warmup, then samples until min_repeats are done and target_s has passed (or
 * max_repeats). On a GPU, ct_synchronize(dev) runs before every clock reading, so a sample covers
 * the device work. Returns 0, or nonzero when fn or the synchronization failed. */
int ct_bench_time(ct_bench_fn fn, void *ctx, ct_device dev, const ct_bench_opts *o, ct_bench_result *out);

/* Parse --device: "auto" (the best GPU, else the CPU), "cpu", "cuda:N", "gpu:N", "opencl:N", through
 * the CLI's own reading (ct_cli_device in tools/cuttle/commands.h). Prints an error and returns
 * nonzero when the string is malformed or the device is missing. */
int ct_bench_device(const char *s, ct_device *out);

/* ---- options: the one parser of every benchmark */

/* The options most benchmarks take, read the same way by each. */
typedef struct {
  const char *device; /* --device NAME: set the benchmark's default before parsing */
  const char *csv;    /* --csv FILE: also write the table there; NULL without it */
  int quick;          /* --quick: a small fast configuration */
} ct_bench_common;

/* Which of the common options a benchmark takes; the others are unknown options to it. */
enum {
  CT_BENCH_DEVICE = 1,
  CT_BENCH_CSV = 2,
  CT_BENCH_QUICK = 4,
  CT_BENCH_COMMON = CT_BENCH_DEVICE | CT_BENCH_CSV | CT_BENCH_QUICK
};

/* How a benchmark's own option stores its argument in dst (zero: as a string). */
typedef enum {
  CT_BENCH_STR = 0, /* const char *: the argument itself */
  CT_BENCH_INT,    /* int: a decimal integer, read strictly as every number (tools/cuttle/options.h) */
  CT_BENCH_I64,    /* int64_t: a decimal integer */
  CT_BENCH_SIZE,   /* size_t: a non-negative decimal integer */
  CT_BENCH_DOUBLE, /* double: finite */
  CT_BENCH_FLAG,   /* int, the option takes no argument: set to value */
  CT_BENCH_CALL    /* call(argument, dst); nonzero ends the parse with status 2 (call said why) */
} ct_bench_kind;

/* One option of a benchmark's own, "--name", filled with designated initializers
 * ({.name = "sizes", .dst = &sizes}); a table of them ends with a zero entry. */
typedef struct {
  const char *name;
  ct_bench_kind kind;
  void *dst;
  int value;                               /* CT_BENCH_FLAG's */
  int (*call)(const char *arg, void *dst); /* CT_BENCH_CALL's */
} ct_bench_opt;

/* What ct_bench_parse returns when the benchmark goes on to run. */
#define CT_BENCH_GO_ON (-1)

/* Read a benchmark's command line (argv[0] its name) with getopt_long, in order, a later option
 * overriding an earlier one: the common options named in `common` into *c (NULL when common is 0),
 * opts (at most 32, may be NULL) into their destinations, and --help (or -h). Long options may be
 * abbreviated to any unambiguous prefix; arguments that are not options are left alone.
 * Returns CT_BENCH_GO_ON, or the exit status the benchmark returns at once: usage(stdout)'s after
 * --help, usage(stderr)'s after getopt_long's message for an unknown option or a missing argument,
 * 2 after a CT_BENCH_CALL refused its argument. */
int ct_bench_parse(int argc, char **argv, unsigned common, ct_bench_common *c, const ct_bench_opt *opts,
                   int (*usage)(FILE *f));

/* The number after "key": in a JSON line (what the PyTorch peers print), or NAN. */
double ct_bench_json_number(const char *line, const char *key);
/* The string after "key": in a JSON line, copied into buf (cap bytes, cut there) with its escapes
 * undone (\" and \\ as the character, \n \t \r as a blank, \uXXXX as '?'); returns buf, or NULL
 * (buf set to "") when the key is absent or its value is not a string. */
const char *ct_bench_json_string(const char *line, const char *key, char *buf, size_t cap);

/* ---- the PyTorch peers: the same measurement in PyTorch, side by side (the project's rule: every
 * figure beside the current PyTorch's on the same machine in the same run) */

/* --pytorch, --python PATH, --script FILE, as every benchmark with a peer reads them: put
 * CT_BENCH_PYTORCH_OPTS(p) in its ct_bench_opt table after setting p.script to its default. */
typedef struct {
  int on;             /* --pytorch */
  const char *python; /* --python: the interpreter (default "python3") */
  const char *script; /* --script: the peer script (default the benchmark's bench/pytorch_*.py) */
} ct_bench_pytorch;
#define CT_BENCH_PYTORCH_OPTS(p)                                                                       \
  {.name = "pytorch", .kind = CT_BENCH_FLAG, .dst = &(p).on, .value = 1}, {.name = "python", .dst = &(p).python}, \
      {.name = "script", .dst = &(p).script}

/* What a peer's run came to. */
typedef enum {
  CT_BENCH_PEER_OK = 0, /* line holds its result */
  CT_BENCH_PEER_NONE,   /* it has no peer for this configuration ({"no_peer": "..."}): why says so */
  CT_BENCH_PEER_FAILED  /* it did not run, failed or printed no result: why says why */
} ct_bench_peer_status;

typedef struct {
  ct_bench_peer_status status;
  char line[16384]; /* the result line (a JSON object), "" without one */
  char why[512];    /* NONE's or FAILED's reason, one line */
  char torch[48];   /* the "torch" key of the result (torch.__version__), "" without */
} ct_bench_peer;

/* Run a PyTorch peer: `env 'python' 'script' args` through the shell (env: "VAR=value ..." or
 * NULL), its stdout and stderr read together; the line holding "key": is its result (a JSON line).
 * A line {"no_peer": "..."} makes it CT_BENCH_PEER_NONE, a line {"error": "..."} or a nonzero exit
 * or no result line CT_BENCH_PEER_FAILED, why then holding the error's text or the last line it
 * printed (Python's exception, the shell's "not found") and the exit status. Every other line is
 * echoed to stderr, prefixed by the benchmark's name, so a traceback is seen whole. The command is
 * printed to stderr first. Returns p->status. */
ct_bench_peer_status ct_bench_peer_run(const char *bench, const char *env, const ct_bench_pytorch *py,
                                       const char *args, const char *key, ct_bench_peer *p);
/* After a table: one line to f saying which PyTorch made the peer's figures ("threads" and
 * "device" keys of its line when given), or why its cells read "failed" ("PyTorch failed: ...") or
 * "no PyTorch peer on ..." ("PyTorch: ..."). */
void ct_bench_peer_note(const ct_bench_peer *p, FILE *f);
/* The text of every PyTorch cell of a table when the peer gave no figures: "failed", or NONE's
 * reason up to its first ':' ("no PyTorch peer on opencl"), in buf (cap bytes); returns buf, or
 * NULL when the peer ran (its cells hold its figures). */
const char *ct_bench_peer_cell(const ct_bench_peer *p, char *buf, size_t cap);

/* "n/a (no GPU)" and friends are plain text cells; numbers are formatted by the caller. */
typedef struct ct_bench_table ct_bench_table;
/* headers: ncols names (CSV header too). */
ct_bench_table *ct_bench_table_new(const char *title, int ncols, const char *const *headers);
/* One row: a printf format whose result holds ncols cells separated by '|'. */
void ct_bench_table_rowf(ct_bench_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print the table aligned to f. */
void ct_bench_table_print(const ct_bench_table *t, FILE *f);
/* Write the table as CSV to path (when path is not NULL); returns 0 or prints why and returns 1. */
int ct_bench_table_csv(const ct_bench_table *t, const char *path);
void ct_bench_table_free(ct_bench_table *t);

/* Byte counts as "4 KiB", "16 MiB". */
const char *ct_bench_bytes(size_t n, char *buf, size_t cap);

#endif
