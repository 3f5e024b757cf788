/* tests/cli/test_cli_bench_peers.c: the PyTorch peers of `cuttle bench gemm`, `matmul-sweep`,
 * `norms`, `bandwidth`, `attention` and `train --model gpt2` (--pytorch [--python PATH]
 * [--script FILE]) as a user runs them, with --quick: PyTorch's columns hold numbers beside cuttle's on the CPU (the test's Python,
 * $CUTTLE_PYTHON: the build folder's venv with Debian's PyTorch 1.13, scripts/python_env.sh);
 * bandwidth on opencl:0 (PoCL) says "no PyTorch peer on opencl" in PyTorch's cells and exits 0;
 * a Python that cannot run, a missing script or a peer that fails leave cuttle's rows whole, the
 * PyTorch cells "failed", a line "PyTorch failed: <why>" and exit status 1; an unknown option exits
 * 2. The figures are read back from each run's CSV (--csv), column by header. Speed is never
 * asserted: only that the cells are numbers. Runs the built binary ($CUTTLE_BINARY_DIR/cuttle). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "testutil.h"

static char cuttle[4096], csv[4200], fake[4200], fake_json[4200];
static char *tmp;
static char out[1 << 16];

/* ---- reading a benchmark's CSV (bench/bench.c's ct_bench_table_csv) */

enum { MAX_ROWS = 32, MAX_COLS = 16 };
typedef struct {
  int nrows, ncols;
  char cell[MAX_ROWS + 1][MAX_COLS][96]; /* row 0: the headers */
} table;

/* One CSV line into cells (quoted cells with "" for a quote); returns the count. */
static int split(const char *line, char cells[MAX_COLS][96]) {
  int n = 0;
  const char *p = line;
  while (n < MAX_COLS) {
    size_t k = 0;
    if (*p == '"') {
      for (p++; *p && !(*p == '"' && p[1] != '"'); p++) {
        if (*p == '"') p++;
        if (k + 1 < 96) cells[n][k++] = *p;
      }
      if (*p == '"') p++;
    } else {
      for (; *p && *p != ',' && *p != '\n'; p++)
        if (k + 1 < 96) cells[n][k++] = *p;
    }
    cells[n++][k] = 0;
    if (*p != ',') break;
    p++;
  }
  return n;
}

/* The CSV at csv into *t; fails the test when it is missing or empty. */
static void read_csv(table *t) {
  FILE *f = fopen(csv, "r");
  if (!f) fprintf(stderr, "no CSV at %s; the run said:\n%s\n", csv, out);
  assert_non_null(f);
  char line[4096];
  memset(t, 0, sizeof *t);
  int r = 0;
  while (r <= MAX_ROWS && fgets(line, sizeof line, f)) {
    int n = split(line, t->cell[r]);
    if (r == 0) t->ncols = n;
    r++;
  }
  fclose(f);
  t->nrows = r - 1;
  assert_true(t->ncols > 0);
  assert_true(t->nrows > 0);
}

/* The index of the column headed `name`; fails the test when there is none. */
static int column(const table *t, const char *name) {
  for (int c = 0; c < t->ncols; c++)
    if (strcmp(t->cell[0][c], name) == 0) return c;
  fprintf(stderr, "no column \"%s\" in the CSV; the run said:\n%s\n", name, out);
  fail();
  return -1;
}

/* Every cell of column `name` is a finite number >= 0 (a loaded machine may print a tiny figure as
 * 0.0; "failed", "missing" and friends are not numbers); returns how many rows were checked. */
static int all_numbers(const table *t, const char *name) {
  int c = column(t, name), checked = 0;
  for (int r = 1; r <= t->nrows; r++) {
    const char *s = t->cell[r][c];
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0)
      fprintf(stderr, "column \"%s\" row %d holds \"%s\", not a number; the run said:\n%s\n", name, r, s, out);
    assert_true(end != s && *end == 0 && isfinite(v) && v >= 0);
    checked++;
  }
  return checked;
}

/* Every cell of column `name` reads exactly `text`. */
static void all_read(const table *t, const char *name, const char *text) {
  int c = column(t, name);
  for (int r = 1; r <= t->nrows; r++) {
    if (strcmp(t->cell[r][c], text) != 0)
      fprintf(stderr, "column \"%s\" row %d holds \"%s\", not \"%s\"; the run said:\n%s\n", name, r, t->cell[r][c], text, out);
    assert_string_equal(t->cell[r][c], text);
  }
}

static int expect(int got, int want) {
  if (got != want) fprintf(stderr, "exit %d, wanted %d; output:\n%s\n", got, want, out);
  return got;
}

/* ---- the five benchmarks beside PyTorch */

/* The five benchmarks' commands of this test, without --pytorch and its options: on the CPU
 * (bandwidth on PoCL's opencl:0), --quick and small, each writing the CSV. */
enum { NBENCH = 5 };
static const char *const benches[NBENCH] = {
    "bench gemm --device cpu --quick",
    "bench matmul-sweep --device cpu --quick --max-n 64",
    "bench norms --device cpu --quick --count 20",
    "bench bandwidth --device opencl:0 --quick --max-size 16384",
    "bench attention --device cpu --quick --batch 1 --heads 8 --threads 1",
};

static void gemm_beside_pytorch(void **state) {
  (void)state;
  table t;
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s %s --csv %s --pytorch --python '%s'", cuttle, benches[0], csv,
                                      ct_test_python()), 0), 0);
  read_csv(&t);
  assert_int_equal(all_numbers(&t, "ct_matmul GFLOP/s"), 2); /* n = 128, 256 */
  assert_int_equal(all_numbers(&t, "PyTorch GFLOP/s"), 2);
  all_numbers(&t, "ct_matmul / PyTorch (GFLOP/s)");
  assert_non_null(strstr(out, "--dtypes f32 --sizes 128,256")); /* the peer got cuttle's sizes */
  assert_non_null(strstr(out, "timed the same way"));
  assert_null(strstr(out, "failed"));
}

static void matmul_sweep_beside_pytorch(void **state) {
  (void)state;
  table t;
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s %s --csv %s --pytorch --python '%s'", cuttle, benches[1], csv,
                                      ct_test_python()), 0), 0);
  read_csv(&t);
  assert_int_equal(t.nrows, 3); /* n = 16, 32, 64 */
  all_numbers(&t, "CPU ms");
  all_numbers(&t, "PyTorch CPU ms");
  /* no device: PyTorch's device columns say so as cuttle's do */
  all_read(&t, "PyTorch dev compute ms", "n/a (no device)");
  all_read(&t, "PyTorch dev+copies ms", "n/a (no device)");
  assert_null(strstr(out, "failed"));
}

static void norms_beside_pytorch(void **state) {
  (void)state;
  table t;
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s %s --csv %s --pytorch --python '%s'", cuttle, benches[2], csv,
                                      ct_test_python()), 0), 0);
  read_csv(&t);
  assert_int_equal(all_numbers(&t, "median ms"), 3); /* the three paths */
  assert_int_equal(all_numbers(&t, "PyTorch median ms"), 3);
  all_numbers(&t, "cuttle / PyTorch (ms)");
  assert_non_null(strstr(out, "PyTorch's (b) and (c) norms differ from its (a) by at most"));
  assert_null(strstr(out, "failed"));
}

/* PyTorch has no OpenCL device: its cells say so, cuttle's hold figures, and that is no failure. */
static void bandwidth_on_opencl_has_no_peer(void **state) {
  (void)state;
  table t;
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s %s --csv %s --pytorch --python '%s'", cuttle, benches[3], csv,
                                      ct_test_python()), 0), 0);
  read_csv(&t);
  assert_int_equal(all_numbers(&t, "H2D pageable"), 2); /* 4 KiB and 16 KiB */
  all_numbers(&t, "D2H pageable");
  static const char *const cols[4] = {"PyTorch H2D pageable", "PyTorch H2D pinned", "PyTorch D2H pageable",
                                      "PyTorch D2H pinned"};
  for (int k = 0; k < 4; k++) all_read(&t, cols[k], "no PyTorch peer on opencl");
  assert_non_null(strstr(out, "PyTorch: no PyTorch peer on opencl: PyTorch has no opencl device"));
  assert_null(strstr(out, "failed"));
}

/* Attention's three ways at T = 128 and 256: times and peak bytes of each, and the checksums of the
 * same inputs on every side (PyTorch's beside cuttle's; their agreement is read, not its speed). */
static void attention_beside_pytorch(void **state) {
  (void)state;
  table t;
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s %s --csv %s --pytorch --python '%s'", cuttle, benches[4], csv,
                                      ct_test_python()), 0), 0);
  read_csv(&t);
  static const char *const cols[6] = {"fused ms", "composed ms", "PyTorch ms", "fused peak bytes", "composed peak bytes",
                                      "PyTorch peak bytes"};
  for (int k = 0; k < 6; k++) assert_int_equal(all_numbers(&t, cols[k]), 2); /* T = 128, 256 */
  all_numbers(&t, "fused / PyTorch (ms)");
  assert_non_null(strstr(out, "--sizes 128,256")); /* the peer got cuttle's lengths */
  assert_non_null(strstr(out, "PyTorch sum(dq*r)"));
  assert_non_null(strstr(out, "PyTorch's peak bytes: "));
  assert_null(strstr(out, "failed"));
}

/* GPT-2 training steps (bench train --model gpt2, a tiny --quick model of 2 layers, 4 batches of 16
 * bytes, 3 timed steps): tokens/s, ms per step and the losses of each side are numbers, and the peer
 * (torch 1.13 here: its private attention) got cuttle's configuration. */
static void gpt2_train_beside_pytorch(void **state) {
  (void)state;
  table t;
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s bench train --model gpt2 --quick --threads 1 --csv %s --pytorch "
                                      "--python '%s'", cuttle, csv, ct_test_python()), 0), 0);
  read_csv(&t);
  static const char *const cols[9] = {"cuttle tokens/s", "cuttle ms/step", "cuttle first loss", "cuttle last loss",
                                      "PyTorch tokens/s", "PyTorch ms/step", "PyTorch first loss", "PyTorch last loss",
                                      "cuttle / PyTorch (tokens/s)"};
  for (int k = 0; k < 9; k++) assert_int_equal(all_numbers(&t, cols[k]), 1);
  assert_non_null(strstr(out, "--n-layer 2 --n-head 2 --n-embd 32 --n-positions 16 --vocab-size 256 --batch-size 4"));
  assert_non_null(strstr(out, "PyTorch's attention: "));
  assert_null(strstr(out, "PyTorch's model has")); /* the same parameters on both sides */
  assert_null(strstr(out, "failed"));
}

/* A Python that is not there, a script that is not there, and a peer that fails with a message:
 * cuttle's rows print, PyTorch's cells read "failed", the reason is printed, exit status 1. */
static void a_failed_peer_leaves_cuttles_rows(void **state) {
  (void)state;
  static const char *const figure[NBENCH] = {"ct_matmul GFLOP/s", "CPU ms", "median ms", "H2D pageable", "fused ms"};
  static const char *const pycol[NBENCH] = {"PyTorch GFLOP/s", "PyTorch CPU ms", "PyTorch median ms",
                                            "PyTorch H2D pageable", "PyTorch ms"};
  for (int b = 0; b < NBENCH; b++) {
    table t;
    /* an interpreter that is not there: the shell's "not found" is the reason */
    assert_int_equal(expect(ct_test_run(out, sizeof out, "%s %s --csv %s --pytorch --python /nonexistent/python3", cuttle,
                                        benches[b], csv), 1), 1);
    assert_non_null(strstr(out, "PyTorch failed: "));
    assert_non_null(strstr(out, "not found"));
    read_csv(&t);
    assert_true(all_numbers(&t, figure[b]) > 0);
    all_read(&t, pycol[b], "failed");
    /* a peer that fails saying why: its last line is the reason, with its exit status */
    assert_int_equal(expect(ct_test_run(out, sizeof out, "%s %s --csv %s --pytorch --python '%s'", cuttle, benches[b], csv,
                                        fake), 1), 1);
    assert_non_null(strstr(out, "PyTorch failed: RuntimeError: the peer broke (exit status 3"));
    read_csv(&t);
    assert_true(all_numbers(&t, figure[b]) > 0);
    all_read(&t, pycol[b], "failed");
  }
  /* a peer that says why itself ({"error": ...}, as bench/pytorch_peer.py's run does when torch is
   * missing): its words, not the last line */
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s %s --pytorch --python '%s'", cuttle, benches[0], fake_json), 1),
                   1);
  assert_non_null(strstr(out, "PyTorch failed: ModuleNotFoundError: No module named 'torch' (exit status 1)"));
  /* a script that is not there: Python's own message */
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s %s --pytorch --python '%s' --script /nonexistent/peer.py",
                                      cuttle, benches[0], ct_test_python()), 1), 1);
  assert_non_null(strstr(out, "PyTorch failed: "));
  assert_non_null(strstr(out, "/nonexistent/peer.py"));
}

/* Unknown options and a missing argument are usage errors (2), before anything runs; --help names
 * the new options. */
static void bad_options_exit_2(void **state) {
  (void)state;
  static const char *const names[NBENCH] = {"gemm", "matmul-sweep", "norms", "bandwidth", "attention"};
  for (int b = 0; b < NBENCH; b++) {
    assert_int_equal(expect(ct_test_run(out, sizeof out, "%s bench %s --pytorch --frobnicate", cuttle, names[b]), 2), 2);
    assert_int_equal(expect(ct_test_run(out, sizeof out, "%s bench %s --pytorch --python", cuttle, names[b]), 2), 2);
    assert_int_equal(expect(ct_test_run(out, sizeof out, "%s bench %s --help", cuttle, names[b]), 0), 0);
    assert_non_null(strstr(out, "[--pytorch] [--python PATH] [--script FILE]"));
    char script[64];
    snprintf(script, sizeof script, "bench/pytorch_%s.py", b == 1 ? "matmul_sweep" : names[b]);
    assert_non_null(strstr(out, script));
  }
}

static int setup(void **state) {
  (void)state;
  const char *bin = getenv("CUTTLE_BINARY_DIR");
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", bin ? bin : ".");
  tmp = ct_test_tmpdir();
  if (!tmp) return -1;
  snprintf(csv, sizeof csv, "%s/table.csv", tmp);
  /* a "Python" that fails as a peer does when torch raises: a traceback's last line, exit 3 */
  snprintf(fake, sizeof fake, "%s/fake-python", tmp);
  FILE *f = fopen(fake, "w");
  if (!f) return -1;
  fprintf(f, "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho 'RuntimeError: the peer broke' >&2\nexit 3\n");
  fclose(f);
  /* one that says why in its JSON line, as pytorch_peer.py's run() does, then a line after it */
  snprintf(fake_json, sizeof fake_json, "%s/fake-python-json", tmp);
  if (!(f = fopen(fake_json, "w"))) return -1;
  fprintf(f, "#!/bin/sh\necho '{\"error\": \"ModuleNotFoundError: No module named '\\''torch'\\''\"}'\n"
             "echo 'a last line that is not the reason' >&2\nexit 1\n");
  fclose(f);
  return chmod(fake, 0755) || chmod(fake_json, 0755);
}

static int teardown(void **state) {
  (void)state;
  ct_test_rmdir(tmp);
  return 0;
}

int main(void) {
  /* the peers need torch: without it this fails (or skips under CUTTLE_INTEROP_OPTIONAL=1), saying why */
  int py = ct_test_require_python("torch");
  if (py) return py;
  if (!ct_test_require_opencl(1)) return 1; /* sets POCL_DEVICES for the cuttle processes too */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gemm_beside_pytorch),          cmocka_unit_test(matmul_sweep_beside_pytorch),
      cmocka_unit_test(norms_beside_pytorch),         cmocka_unit_test(bandwidth_on_opencl_has_no_peer),
      cmocka_unit_test(attention_beside_pytorch),     cmocka_unit_test(gpt2_train_beside_pytorch),
      cmocka_unit_test(a_failed_peer_leaves_cuttles_rows), cmocka_unit_test(bad_options_exit_2)};
  return cmocka_run_group_tests_name("cli bench peers", tests, setup, teardown);
}
