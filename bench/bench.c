/* bench/bench.c: `cuttle bench`, the dispatcher of the benchmark subcommands, and the helpers they
 * share (bench.h): timing with warmup and the median of repeats, the option parser, device choice,
 * tables and CSV, and running a PyTorch peer (--pytorch) and reading its one JSON line.
 * Every measurement goes to docs/perf.md with the command that made it. */
#define _GNU_SOURCE
#include "bench.h"
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include "commands.h"
#include "options.h"

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
} subcommands[] = {
    {"gemm", ct_bench_gemm, "SGEMM GFLOP/s through ct_matmul, the backend kernel and the raw BLAS, optionally vs PyTorch"},
    {"overhead", ct_bench_overhead, "per-op overhead in us: a 1-element add and a 100x100 matmul, grad on/off, optionally vs PyTorch"},
    {"matmul-sweep", ct_bench_matmul_sweep, "n x n matmul from n = 16 up: CPU vs GPU, compute only and with copies, optionally vs PyTorch"},
    {"norms", ct_bench_norms, "1000 matmul norms: one ct_item each vs kept on the device, with the copy ledger, optionally vs PyTorch"},
    {"bandwidth", ct_bench_bandwidth, "host<->device copy bandwidth, pageable vs pinned, 4 KiB to 1 GiB, optionally vs PyTorch"},
    {"train", ct_bench_train, "mlp/cnn/resnet training on Fashion-MNIST: images/s and accuracy, optionally vs PyTorch"},
    {"two-devices", ct_bench_two_devices, "two matmuls on two devices at once vs one after the other on one"},
    {"data-parallel", ct_bench_data_parallel, "a training step on several devices (ct_data_parallel) vs one device"},
    {"amp-memory", ct_bench_amp_memory, "peak allocated bytes of one training step: float32 vs autocast f16/bf16"},
    {"ddp-overlap", ct_bench_ddp_overlap, "under mpirun: the share of DDP's all-reduce time hidden behind backward"},
    {"allreduce", ct_bench_allreduce, "under mpirun: all-reduce bus bandwidth, cuttle vs MPI_Allreduce, 4 KiB to 256 MiB"},
    {"conv-format", ct_bench_conv_format, "the cnn's conv layers, NCHW vs channels_last (NHWC), fwd and fwd+bwd, per device"},
    {"memory", ct_bench_memory, "peak bytes of one resnet18 training step (allocator and RSS), optionally vs PyTorch"},
    {"decode", ct_bench_decode, "image-folder PNG/JPEG decode throughput: images/s per reader and per loader worker"},
    {"attention", ct_bench_attention, "attention fwd+bwd, T = 128..4096: fused vs composed, ms and peak bytes, optionally vs PyTorch"},
};
#define NSUB (sizeof subcommands / sizeof subcommands[0])

void ct_bench_list(FILE *f, const char *indent) {
  for (size_t i = 0; i < NSUB; i++) fprintf(f, "%s%-13s %s\n", indent, subcommands[i].name, subcommands[i].help);
}

static void usage(FILE *f) {
  fprintf(f, "usage: cuttle bench <benchmark> [options]   (cuttle bench <benchmark> --help for its options)\n\n"
             "benchmarks:\n");
  ct_bench_list(f, "  ");
  fprintf(f, "\ncommon options: --device cpu|cuda:N|opencl:N|auto, --quick (a small fast configuration), --csv FILE\n");
}

int ct_cmd_bench(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (size_t i = 0; i < NSUB; i++)
    if (strcmp(argv[1], subcommands[i].name) == 0) return subcommands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "cuttle bench: unknown benchmark \"%s\"\n", argv[1]);
  usage(stderr);
  return 2;
}

/* ---- timing */

double ct_bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int sync_dev(ct_device dev) { return dev.kind == CT_CPU ? 0 : ct_synchronize(dev) != CT_OK; }

int ct_bench_time(ct_bench_fn fn, void *ctx, ct_device dev, const ct_bench_opts *o, ct_bench_result *out) {
  ct_bench_opts d = o ? *o : (ct_bench_opts){0};
  if (d.warmup <= 0) d.warmup = 1;
  if (d.min_repeats <= 0) d.min_repeats = 3;
  if (d.max_repeats <= 0) d.max_repeats = 100;
  if (d.max_repeats < d.min_repeats) d.max_repeats = d.min_repeats;
  if (d.target_s <= 0) d.target_s = 0.5;
  if (d.inner <= 0) d.inner = 1;
  memset(out, 0, sizeof *out);
  for (int i = 0; i < d.warmup; i++)
    if (fn(ctx)) return 1;
  if (sync_dev(dev)) return 1;
  double *s = malloc(sizeof(double) * (size_t)d.max_repeats);
  if (!s) return 1;
  double spent = 0;
  int n = 0, rc = 0;
  while (n < d.max_repeats && (n < d.min_repeats || spent < d.target_s)) {
    double t0 = ct_bench_now();
    for (int i = 0; i < d.inner && !rc; i++) rc = fn(ctx);
    if (!rc) rc = sync_dev(dev);
    double t = ct_bench_now() - t0;
    if (rc) break;
    spent += t;
    s[n++] = t / d.inner;
  }
  if (!rc) {
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    out->samples = n;
    out->min = s[0];
    out->median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    out->p10 = s[(n - 1) / 10];
    out->p90 = s[(n - 1) - (n - 1) / 10];
  }
  free(s);
  return rc;
}

int ct_bench_device(const char *s, ct_device *out) {
  ct_status st = ct_cli_device("cuttle bench", s, out);
  /* a missing device has already said why; a malformed name says it here */
  if (st != CT_OK && st != CT_EDEVICE) fprintf(stderr, "cuttle bench: %s\n", ct_last_error());
  return st != CT_OK;
}

/* ---- options */

/* getopt_long's values: 'h' for --help, OPT_OWN + i for opts[i], OPT_COMMON | CT_BENCH_x for the
 * common options. */
enum { MAX_OWN = 32, OPT_OWN = 0x100, OPT_COMMON = 0x200 };

/* One option's argument into its destination. Numbers are read by the CLI's strict parser
 * (tools/cuttle/options.h): the whole argument, no overflow, a finite double; a malformed one is
 * exit status 2 with a line naming the option and the value. prog: "cuttle bench <name>". */
static int store(const char *prog, const ct_bench_opt *o, const char *arg) {
  /* counts and sizes are >= 0 (each benchmark checks its own upper bounds); a double has no range */
  ct_cli_opt as = {.name = o->name, .min = 0, .max = 9.2e18};
  switch (o->kind) {
    case CT_BENCH_STR: *(const char **)o->dst = arg; return 0;
    case CT_BENCH_FLAG: *(int *)o->dst = o->value; return 0;
    case CT_BENCH_CALL: return o->call(arg, o->dst) ? 2 : 0;
    case CT_BENCH_INT: as.type = CT_OPT_INT; break;
    case CT_BENCH_I64: as.type = CT_OPT_I64; break;
    case CT_BENCH_SIZE: as.type = CT_OPT_U64; break;
    case CT_BENCH_DOUBLE: as.type = CT_OPT_F64, as.min = 1, as.max = 0; break;
  }
  if (o->kind != CT_BENCH_SIZE) return ct_cli_parse_value(prog, &as, arg, o->dst);
  uint64_t v;
  int rc = ct_cli_parse_value(prog, &as, arg, &v);
  if (!rc) *(size_t *)o->dst = (size_t)v;
  return rc;
}

int ct_bench_parse(int argc, char **argv, unsigned common, ct_bench_common *c, const ct_bench_opt *opts,
                   int (*usage)(FILE *f)) {
  /* The common options come first, then the benchmark's, then --help: that order decides only how
   * getopt_long lists the candidates of an ambiguous abbreviation. */
  static const struct option common_opts[] = {{"device", required_argument, 0, OPT_COMMON | CT_BENCH_DEVICE},
                                               {"csv", required_argument, 0, OPT_COMMON | CT_BENCH_CSV},
                                               {"quick", no_argument, 0, OPT_COMMON | CT_BENCH_QUICK}};
  struct option longopts[3 + MAX_OWN + 2];
  int n = 0;
  for (int i = 0; i < 3; i++)
    if (common & (unsigned)(common_opts[i].val & ~OPT_COMMON)) longopts[n++] = common_opts[i];
  for (int i = 0; opts && opts[i].name; i++) {
    if (i == MAX_OWN) {
      fprintf(stderr, "cuttle bench: %s has more than %d options of its own\n", argv[0], MAX_OWN);
      return 2;
    }
    longopts[n++] = (struct option){opts[i].name, opts[i].kind == CT_BENCH_FLAG ? no_argument : required_argument, 0,
                                    OPT_OWN + i};
  }
  longopts[n++] = (struct option){"help", no_argument, 0, 'h'};
  longopts[n] = (struct option){0, 0, 0, 0};
  int v;
  optind = 1;
  while ((v = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    if (v == 'h') return usage(stdout);
    if (v == (OPT_COMMON | CT_BENCH_DEVICE)) c->device = optarg;
    else if (v == (OPT_COMMON | CT_BENCH_CSV)) c->csv = optarg;
    else if (v == (OPT_COMMON | CT_BENCH_QUICK)) c->quick = 1;
    else if (v >= OPT_OWN && v < OPT_OWN + MAX_OWN) {
      char prog[64];
      snprintf(prog, sizeof prog, "cuttle bench %s", argv[0]);
      if (store(prog, &opts[v - OPT_OWN], optarg)) return 2;
    } else return usage(stderr);
  }
  return CT_BENCH_GO_ON;
}

double ct_bench_json_number(const char *line, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(line, pat);
  return p ? strtod(p + strlen(pat), NULL) : NAN;
}

const char *ct_bench_json_string(const char *line, const char *key, char *buf, size_t cap) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(line, pat);
  if (cap) buf[0] = 0;
  if (!p) return NULL;
  p += strlen(pat);
  while (*p == ' ') p++;
  if (*p != '"') return NULL;
  size_t n = 0;
  for (p++; *p && *p != '"' && n + 1 < cap; p++) {
    if (*p == '\\' && p[1]) { /* an escape: \" does not end the string; \n and \t read as blanks */
      p++;
      buf[n++] = *p == 'n' || *p == 't' || *p == 'r' ? ' ' : *p == 'u' ? '?' : *p;
      if (*p == 'u') p += strnlen(p + 1, 4); /* \uXXXX: one '?' (json.dumps escapes non-ASCII so) */
    } else {
      buf[n++] = *p;
    }
  }
  if (cap) buf[n] = 0;
  return buf;
}

/* ---- the PyTorch peers */

/* s without its trailing newline and blanks, in place. */
static char *chomp(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) s[--n] = 0;
  return s;
}

ct_bench_peer_status ct_bench_peer_run(const char *bench, const char *env, const ct_bench_pytorch *py,
                                       const char *args, const char *key, ct_bench_peer *p) {
  memset(p, 0, sizeof *p);
  p->status = CT_BENCH_PEER_FAILED;
  char cmd[4096], pat[80], last[512] = "", buf[sizeof p->line];
  snprintf(cmd, sizeof cmd, "%s%s'%s' '%s' %s", env ? env : "", env && *env ? " " : "", py->python, py->script,
           args ? args : "");
  snprintf(pat, sizeof pat, "\"%s\":", key);
  fprintf(stderr, "running: %s\n", cmd);
  fflush(stdout);
  fflush(stderr);
  /* 2>&1: the reason of a failure (Python's exception, the shell's "not found") is on stderr */
  strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
  FILE *f = popen(cmd, "r");
  if (!f) {
    snprintf(p->why, sizeof p->why, "cannot run %s", py->python);
    return p->status;
  }
  int got = 0, none = 0, error = 0;
  while (fgets(buf, sizeof buf, f)) {
    chomp(buf);
    if (buf[0] == '{' && strstr(buf, "\"no_peer\":")) {
      none = 1;
      ct_bench_json_string(buf, "no_peer", p->why, sizeof p->why);
    } else if (buf[0] == '{' && strstr(buf, "\"error\":")) {
      error = 1;
      ct_bench_json_string(buf, "error", p->why, sizeof p->why);
    } else if (!got && buf[0] == '{' && strstr(buf, pat)) {
      snprintf(p->line, sizeof p->line, "%s", buf);
      ct_bench_json_string(buf, "torch", p->torch, sizeof p->torch);
      got = 1;
    } else if (buf[0]) {
      fprintf(stderr, "%s (pytorch): %s\n", bench, buf);
      snprintf(last, sizeof last, "%s", buf);
    }
  }
  int rc = pclose(f);
  int code = rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
  if (rc == 0 && none) {
    p->status = CT_BENCH_PEER_NONE;
  } else if (rc == 0 && got && !error) {
    p->status = CT_BENCH_PEER_OK;
  } else {
    char what[sizeof p->why];
    /* what the peer said itself, else the last line it printed; cut so the exit status fits */
    snprintf(what, sizeof what, "%s", error ? p->why : last[0] ? last : got ? "" : "no result line");
    if (error)
      snprintf(p->why, sizeof p->why, "%.300s (exit status %d)", what, code);
    else
      snprintf(p->why, sizeof p->why, "%.200s%s(exit status %d; is torch importable by %.100s? --python PATH picks the "
               "interpreter, --script FILE the script)", what, what[0] ? " " : "", code, py->python);
    p->line[0] = 0;
  }
  if (p->status != CT_BENCH_PEER_OK) fprintf(stderr, "%s: PyTorch %s: %s\n", bench,
                                             p->status == CT_BENCH_PEER_NONE ? "has no peer here" : "failed", p->why);
  return p->status;
}

void ct_bench_peer_note(const ct_bench_peer *p, FILE *f) {
  if (p->status == CT_BENCH_PEER_OK) {
    double threads = ct_bench_json_number(p->line, "threads");
    char dev[32];
    ct_bench_json_string(p->line, "device", dev, sizeof dev);
    fprintf(f, "PyTorch %s", p->torch[0] ? p->torch : "(version not given)");
    if (dev[0]) fprintf(f, " on %s", dev);
    if (threads > 0) fprintf(f, ", torch.get_num_threads() = %d", (int)threads);
    fprintf(f, ", timed the same way\n");
  } else if (p->status == CT_BENCH_PEER_NONE) {
    fprintf(f, "PyTorch: %s\n", p->why);
  } else {
    fprintf(f, "PyTorch failed: %s\n", p->why);
  }
  fflush(f);
}

const char *ct_bench_peer_cell(const ct_bench_peer *p, char *buf, size_t cap) {
  if (p->status == CT_BENCH_PEER_OK) return NULL;
  if (p->status == CT_BENCH_PEER_FAILED) return snprintf(buf, cap, "failed"), buf;
  snprintf(buf, cap, "%.*s", (int)strcspn(p->why, ":"), p->why);
  return buf;
}

const char *ct_bench_bytes(size_t n, char *buf, size_t cap) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (n >= 1024 && n % 1024 == 0 && u < 4) n /= 1024, u++;
  snprintf(buf, cap, "%zu %s", n, units[u]);
  return buf;
}

/* ---- tables */

struct ct_bench_table {
  char *title;
  int ncols, nrows, cap;
  char **cells; /* (1 + nrows) x ncols, row 0 the headers */
};

ct_bench_table *ct_bench_table_new(const char *title, int ncols, const char *const *headers) {
  ct_bench_table *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->title = strdup(title ? title : "");
  t->ncols = ncols;
  t->cap = 16;
  t->cells = calloc((size_t)(t->cap + 1) * (size_t)ncols, sizeof(char *));
  if (!t->title || !t->cells) {
    ct_bench_table_free(t);
    return NULL;
  }
  for (int c = 0; c < ncols; c++) t->cells[c] = strdup(headers[c]);
  return t;
}

void ct_bench_table_rowf(ct_bench_table *t, const char *fmt, ...) {
  if (!t) return;
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (t->nrows == t->cap) {
    char **c = realloc(t->cells, (size_t)(2 * t->cap + 1) * (size_t)t->ncols * sizeof(char *));
    if (!c) return;
    t->cells = c, t->cap *= 2;
  }
  char **row = t->cells + (size_t)(t->nrows + 1) * (size_t)t->ncols;
  char *p = line;
  for (int c = 0; c < t->ncols; c++) {
    char *bar = c + 1 < t->ncols ? strchr(p, '|') : NULL;
    if (bar) *bar = 0;
    row[c] = strdup(p);
    p = bar ? bar + 1 : p + strlen(p);
  }
  t->nrows++;
}

void ct_bench_table_print(const ct_bench_table *t, FILE *f) {
  if (!t) return;
  int w[64] = {0}, nc = t->ncols < 64 ? t->ncols : 64;
  for (int r = 0; r <= t->nrows; r++)
    for (int c = 0; c < nc; c++) {
      const char *s = t->cells[(size_t)r * t->ncols + c];
      int len = s ? (int)strlen(s) : 0;
      if (len > w[c]) w[c] = len;
    }
  if (t->title[0]) fprintf(f, "%s\n", t->title);
  for (int r = 0; r <= t->nrows; r++) {
    for (int c = 0; c < nc; c++) {
      const char *s = t->cells[(size_t)r * t->ncols + c];
      /* the first column reads best left-aligned, numbers right-aligned */
      fprintf(f, c == 0 ? "%-*s" : "  %*s", w[c], s ? s : "");
    }
    fputc('\n', f);
    if (r == 0) {
      int total = 0;
      for (int c = 0; c < nc; c++) total += w[c] + (c ? 2 : 0);
      for (int i = 0; i < total; i++) fputc('-', f);
      fputc('\n', f);
    }
  }
  fflush(f);
}

static void csv_cell(FILE *f, const char *s) {
  if (!s) s = "";
  while (*s == ' ') s++;
  if (!strpbrk(s, ",\"\n")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

int ct_bench_table_csv(const ct_bench_table *t, const char *path) {
  if (!t || !path) return 0;
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "cuttle bench: cannot write the CSV file %s\n", path);
    return 1;
  }
  for (int r = 0; r <= t->nrows; r++) {
    for (int c = 0; c < t->ncols; c++) {
      if (c) fputc(',', f);
      csv_cell(f, t->cells[(size_t)r * t->ncols + c]);
    }
    fputc('\n', f);
  }
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    fprintf(stderr, "cuttle bench: error writing %s\n", path);
    return 1;
  }
  fprintf(stderr, "wrote %s\n", path);
  return 0;
}

void ct_bench_table_free(ct_bench_table *t) {
  if (!t) return;
  if (t->cells)
    for (size_t i = 0; i < (size_t)(t->nrows + 1) * (size_t)t->ncols; i++) free(t->cells[i]);
  free(t->cells);
  free(t->title);
  free(t);
}
