/* tests/cli/test_cli_tensorboard.c: `cuttle train --tensorboard DIR` (issue 20) as a user runs it.
 * Its event files are read back two ways: always in C, by the TFRecord reader and the protobuf-c
 * unpacker tests/io/test_tensorboard.c uses, and by TensorBoard's own EventAccumulator
 * (tests/io/tensorboard_interop.py cli, run by $CUTTLE_PYTHON, the build folder's venv with
 * tensorboard 2.19: without it the test fails, saying so, unless CUTTLE_INTEROP_OPTIONAL=1, which
 * leaves the C reader's checks).
 *  - Two epochs of the mlp, per-step scalars at every step: each per-epoch scalar (train/loss_epoch,
 *    images_per_s_epoch, test/accuracy, test/loss, epoch) equals its epoch's --metrics value at the
 *    line's "step", within the digits the line prints and float32; the per-step train/loss of an
 *    epoch, weighted by its images, adds up to the epoch's loss; lr follows the cosine schedule; the
 *    options are there as text; EventAccumulator reads every scalar the C reader read.
 *  - A resume: 20 steps and a checkpoint; a resumed run that logged steps 21 to 30 "crashes", and a
 *    run resumed again from the step-20 checkpoint writes purge_step 21 and continues the steps
 *    (25, 30, 35): after TensorBoard's purge, as EventAccumulator shows, each step has one value,
 *    the last run's.
 *  - --amp f16: amp/scale and amp/skipped_steps, the last equal to the checkpoint's GradScaler.
 *  - An unwritable DIR: exit 1 with the reason, before any file (metrics, checkpoint) is written.
 *  - SIGINT: exit 130, and every step up to the checkpoint's is in the file, whole.
 * tests/cli/test_cli_dist.c checks that in a job of two ranks only rank 0 writes an event file.
 * Runs the built binary ($CUTTLE_BINARY_DIR/cuttle); the training cases are skipped (77) without
 * Fashion-MNIST. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "io/tfrecord.h"
#include "tensorboard.pb-c.h"

static char cuttle[4096], script[4096];
static char *tmp;
static int python; /* ct_test_require_python's answer: 0 runs EventAccumulator */

static char *path(const char *name) {
  static char buf[8][4200];
  static int k;
  char *b = buf[k++ % 8];
  snprintf(b, sizeof buf[0], "%s/%s", tmp, name);
  return b;
}

static int expect(int got, int want, const char *out) {
  if (got != want) fprintf(stderr, "exit %d, wanted %d; output:\n%s\n", got, want, out);
  return got;
}

/* ---- the C reader */

#define MAX_FILES 8

typedef struct {
  char tag[64];
  int64_t step;
  float value;
  double wall;
  int file; /* the event file's index, in name order */
} point;

/* The scalars of a log directory, as TensorBoard loads them (with purge: a file's SessionLog START
 * at step P drops what earlier files logged at steps >= P), and per file its purge step and text. */
typedef struct {
  point *p;
  int n, files;
  int64_t purge[MAX_FILES]; /* 0: none */
  char *text[MAX_FILES];    /* the "options" text, NULL when none */
  int64_t text_step[MAX_FILES];
} run_log;

static int is_event_file(const struct dirent *d) { return strncmp(d->d_name, "events.out.tfevents.", 20) == 0; }

/* The events of one file, each handed to take(); the file must be whole records. */
static void read_file(const char *file, int index, run_log *log, int purge) {
  FILE *f = fopen(file, "rb");
  assert_non_null(f);
  static uint8_t buf[1 << 22];
  size_t n = fread(buf, 1, sizeof buf, f), pos = 0, len;
  assert_true(feof(f)); /* the file fits */
  fclose(f);
  const uint8_t *rec;
  int r;
  while ((r = ct__tfrecord_next(buf, n, &pos, &rec, &len)) == 1) {
    Tensorboard__Event *ev = tensorboard__event__unpack(NULL, len, rec);
    assert_non_null(ev);
    if (ev->what_case == TENSORBOARD__EVENT__WHAT_SESSION_LOG &&
        ev->session_log->status == TENSORBOARD__SESSION_LOG__SESSION_STATUS__START) {
      log->purge[index] = ev->step;
      int k = 0;
      for (int i = 0; i < log->n; i++)
        if (!purge || log->p[i].step < ev->step) log->p[k++] = log->p[i];
      log->n = k;
    }
    for (size_t i = 0; ev->what_case == TENSORBOARD__EVENT__WHAT_SUMMARY && i < ev->summary->n_value; i++) {
      Tensorboard__Summary__Value *v = ev->summary->value[i];
      if (v->value_case == TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE) {
        log->p = realloc(log->p, (size_t)(log->n + 1) * sizeof *log->p);
        point *p = &log->p[log->n++];
        snprintf(p->tag, sizeof p->tag, "%s", v->tag);
        p->step = ev->step, p->value = v->simple_value, p->wall = ev->wall_time, p->file = index;
      } else if (strcmp(v->tag, "options/text_summary") == 0) {
        assert_null(log->text[index]); /* once */
        log->text[index] = strndup((const char *)v->tensor->string_val[0].data, v->tensor->string_val[0].len);
        log->text_step[index] = ev->step;
      }
    }
    tensorboard__event__free_unpacked(ev, NULL);
  }
  if (r != 0) fail_msg("%s: %s", file, ct_last_error());
}

/* Every event file of dir, in name order (TensorBoard's), with purge applied or not. */
static void read_run(const char *dir, run_log *log, int purge) {
  *log = (run_log){0};
  struct dirent **names;
  int n = scandir(dir, &names, is_event_file, alphasort);
  assert_true(n >= 0 && n <= MAX_FILES);
  for (int i = 0; i < n; i++) {
    char file[8192];
    snprintf(file, sizeof file, "%s/%s", dir, names[i]->d_name);
    read_file(file, i, log, purge);
    free(names[i]);
  }
  free(names);
  log->files = n;
}

static void free_run(run_log *log) {
  for (int i = 0; i < MAX_FILES; i++) free(log->text[i]);
  free(log->p);
}

/* The points of tag (of file `file`, or any when -1), in the order read. */
static int series(const run_log *log, const char *tag, int file, const point **out, int max) {
  int k = 0;
  for (int i = 0; i < log->n; i++)
    if (strcmp(log->p[i].tag, tag) == 0 && (file < 0 || log->p[i].file == file)) {
      assert_true(k < max);
      out[k++] = &log->p[i];
    }
  return k;
}

/* tag's steps are first, first + every, ..., last, each once, in order. */
static void assert_steps(const run_log *log, const char *tag, int file, int64_t first, int64_t last, int64_t every) {
  static const point *pts[4096];
  int n = series(log, tag, file, pts, 4096);
  int want = (int)((last - first) / every + 1);
  if (n != want) fprintf(stderr, "%s (file %d): %d points, wanted %d (steps %lld..%lld by %lld)\n", tag, file, n, want,
                         (long long)first, (long long)last, (long long)every);
  assert_int_equal(n, want);
  for (int i = 0; i < n; i++) assert_int_equal(pts[i]->step, first + i * every);
}

/* The one value of tag at step. */
static float value_at(const run_log *log, const char *tag, int64_t step) {
  const point *hit = NULL;
  for (int i = 0; i < log->n; i++)
    if (strcmp(log->p[i].tag, tag) == 0 && log->p[i].step == step) {
      if (hit) fail_msg("%s has two values at step %lld", tag, (long long)step);
      hit = &log->p[i];
    }
  if (!hit) fail_msg("%s has no value at step %lld", tag, (long long)step);
  return hit->value;
}

/* ---- the metrics lines and EventAccumulator */

/* The number after "key": in a line, as printed, into buf; fails when absent. */
static const char *json_text(const char *line, const char *key, char *buf, size_t n) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\": ", key);
  const char *p = strstr(line, k);
  if (!p) fail_msg("the metrics line has no %s: %s", key, line);
  p += strlen(k);
  size_t len = strspn(p, "-+.0123456789eE");
  assert_true(len > 0 && len < n);
  memcpy(buf, p, len);
  buf[len] = 0;
  return buf;
}

/* A scalar (float32) equals a metrics value printed with some digits: the printing's rounding plus
 * float32's. */
static void assert_matches(float got, const char *printed, const char *what) {
  double want = atof(printed);
  const char *dot = strchr(printed, '.');
  int digits = dot ? (int)strspn(dot + 1, "0123456789") : 0;
  double tol = (0.5 * pow(10, -digits) + fabs(want) * 0x1p-23) * (1 + 1e-9);
  if (!dot) tol = 0; /* an integer is exact */
  if (!(fabs(got - want) <= tol)) fail_msg("%s: the event file has %.9g, --metrics %s (tolerance %g)", what, got, printed, tol);
}

/* Every scalar of log, as EventAccumulator must read it (tensorboard_interop.py's check_scalars). */
static void write_expected(const run_log *log, const char *file) {
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  for (int i = 0; i < log->n; i++)
    fprintf(f, "{\"tag\": \"%s\", \"step\": %lld, \"value\": %.17g, \"wall_time\": %.17g}\n", log->p[i].tag,
            (long long)log->p[i].step, (double)log->p[i].value, log->p[i].wall);
  fclose(f);
}

/* TensorBoard's EventAccumulator reads dir: every scalar of log (after the purge), and with metrics
 * each per-epoch scalar against its --metrics line. */
static void check_with_tensorboard(const char *dir, const run_log *log, const char *metrics) {
  if (python != 0) {
    printf("EventAccumulator not run on %s (see above): checked by the C reader only\n", dir);
    return;
  }
  char expected[8192], marg[8192] = "", out[16384];
  snprintf(expected, sizeof expected, "%s.expected.jsonl", dir);
  if (metrics) snprintf(marg, sizeof marg, "'%s'", metrics);
  write_expected(log, expected);
  int rc = ct_test_run(out, sizeof out, "'%s' '%s' cli '%s' '%s' %s", ct_test_python(), script, dir, expected, marg);
  fprintf(stderr, "%s", out);
  assert_int_equal(rc, 0);
}

static const char *const EPOCH_TAGS[][2] = {{"train/loss_epoch", "train_loss"}, {"images_per_s_epoch", "images_per_s"},
                                            {"test/accuracy", "test_acc"}, {"test/loss", "test_loss"}, {"epoch", "epoch"}};

/* ---- the cases */

static void usage_errors(void **state) {
  (void)state;
  char out[16384];
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --tensorboard-every 5", cuttle), 2, out), 2);
  assert_non_null(strstr(out, "needs --tensorboard DIR"));
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --tensorboard %s --tensorboard-every 0", cuttle, path("x")), 2, out), 2);
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --tensorboard ''", cuttle), 2, out), 2);
  assert_int_equal(access(path("x"), F_OK), -1);
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --help", cuttle), 0);
  assert_non_null(strstr(out, "--tensorboard DIR"));
  assert_non_null(strstr(out, "--tensorboard-every N"));
}

/* The per-step train/loss of each epoch, weighted by its images (128 a step, the last one 60000 -
 * 468 x 128 = 96), adds up to the epoch's loss. */
static void assert_steps_add_up(const run_log *log, int64_t from, int64_t to, const char *epoch_loss) {
  double sum = 0, images = 0;
  for (int64_t s = from + 1; s <= to; s++) {
    double n = s == to ? 96 : 128;
    sum += value_at(log, "train/loss", s) * n, images += n;
  }
  assert_true(images == 60000);
  double want = atof(epoch_loss);
  fprintf(stderr, "steps %lld..%lld: the per-step losses average %.7f, the epoch's is %s\n", (long long)from + 1,
          (long long)to, sum / images, epoch_loss);
  assert_true(fabs(sum / images - want) <= 1e-6 + 1e-6 * want);
}

static void epochs_match_metrics(void **state) {
  (void)state;
  char out[32768], line[2][4096], a[64], b[64];
  const char *dir = path("two_epochs"), *metrics = path("two_epochs.jsonl");
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --model mlp --device cpu --epochs 2 --no-progress --tensorboard %s "
                                      "--tensorboard-every 1 --metrics %s", cuttle, dir, metrics), 0, out), 0);
  FILE *f = fopen(metrics, "r");
  assert_non_null(f);
  assert_non_null(fgets(line[0], sizeof line[0], f));
  assert_non_null(fgets(line[1], sizeof line[1], f));
  fclose(f);
  int64_t s1 = atoll(json_text(line[0], "step", a, sizeof a)), s2 = atoll(json_text(line[1], "step", b, sizeof b));
  assert_int_equal(s1, 469); /* ceil(60000 / 128) optimizer steps an epoch */
  assert_int_equal(s2, 2 * 469);
  run_log log;
  read_run(dir, &log, 1);
  assert_int_equal(log.files, 1);
  assert_int_equal(log.purge[0], 0);
  int tags = 0;
  for (int e = 0; e < 2; e++)
    for (size_t t = 0; t < sizeof EPOCH_TAGS / sizeof EPOCH_TAGS[0]; t++) {
      char what[128];
      snprintf(what, sizeof what, "%s at step %lld", EPOCH_TAGS[t][0], (long long)(e ? s2 : s1));
      assert_matches(value_at(&log, EPOCH_TAGS[t][0], e ? s2 : s1), json_text(line[e], EPOCH_TAGS[t][1], a, sizeof a), what);
      assert_steps(&log, EPOCH_TAGS[t][0], 0, s1, s2, s1); /* at the epochs' ends only */
      tags += e == 0;
    }
  assert_steps(&log, "train/loss", 0, 1, s2, 1);
  assert_steps(&log, "images_per_s", 0, 1, s2, 1);
  assert_steps(&log, "lr", 0, 1, s2, 1);
  assert_int_equal(log.n, (tags + 3 * 469) * 2); /* nothing else: no amp/ tags without --amp f16 */
  for (int64_t s = 1; s <= s2; s++) {
    assert_true(value_at(&log, "lr", s) == (s <= s1 ? 1e-3f : 5e-4f)); /* cosine over 2 epochs */
    assert_true(value_at(&log, "images_per_s", s) > 0);
  }
  assert_steps_add_up(&log, 0, s1, json_text(line[0], "train_loss", a, sizeof a));
  assert_steps_add_up(&log, s1, s2, json_text(line[1], "train_loss", a, sizeof a));
  assert_non_null(log.text[0]);
  assert_int_equal(log.text_step[0], 0);
  assert_non_null(strstr(log.text[0], "| model | mlp |"));
  assert_non_null(strstr(log.text[0], "| epochs | 2 |"));
  check_with_tensorboard(dir, &log, metrics);
  free_run(&log);
}

/* Run 1: 20 steps, a checkpoint. Run 2 resumes it, logs steps 25 and 30 and saves over it; it
 * "crashed" for this story: run 3 resumes the step-20 checkpoint again. */
static void resume_continues_and_purges(void **state) {
  (void)state;
  char out[32768];
  const char *dir = path("resumed"), *ck = path("r.safetensors"), *ck20 = path("r20.safetensors");
  const char *common = "--model mlp --device cpu --epochs 1 --no-progress --tensorboard-every 5";
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train %s --tensorboard %s --max-steps 20 --save %s", cuttle, common, dir,
                                      ck), 0, out), 0);
  assert_int_equal(ct_test_run(out, sizeof out, "cp %s %s", ck, ck20), 0);
  sleep(1); /* a new second: the files sort by their time, as TensorBoard reads them */
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train %s --tensorboard %s --max-steps 10 --resume %s --save %s", cuttle,
                                      common, dir, ck, ck), 0, out), 0);
  assert_non_null(strstr(out, "purge_step 21"));
  sleep(1);
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train %s --tensorboard %s --max-steps 15 --resume %s", cuttle, common,
                                      dir, ck20), 0, out), 0);
  run_log raw, log;
  read_run(dir, &raw, 0);
  assert_int_equal(raw.files, 3);
  const int64_t purge[3] = {0, 21, 21}, text_step[3] = {0, 20, 20}, first[3] = {5, 25, 25}, last[3] = {20, 30, 35};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(raw.purge[i], purge[i]);
    assert_non_null(raw.text[i]);
    assert_int_equal(raw.text_step[i], text_step[i]);
    assert_non_null(strstr(raw.text[i], i ? "| resume | " : "| resume | - |"));
    assert_steps(&raw, "train/loss", i, first[i], last[i], 5);
    assert_steps(&raw, "lr", i, first[i], last[i], 5);
  }
  read_run(dir, &log, 1);
  const point *pts[64];
  assert_steps(&log, "train/loss", -1, 5, 35, 5); /* once each: run 2's are gone */
  int n = series(&log, "images_per_s", -1, pts, 64);
  assert_int_equal(n, 7);
  for (int i = 0; i < n; i++) assert_int_equal(pts[i]->file, pts[i]->step <= 20 ? 0 : 2);
  check_with_tensorboard(dir, &log, NULL);
  free_run(&raw), free_run(&log);
}

static void amp_f16_logs_the_scaler(void **state) {
  (void)state;
  char out[32768];
  const char *dir = path("amp"), *ck = path("amp.safetensors");
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --model mlp --device cpu --epochs 1 --amp f16 --no-progress "
                                      "--max-steps 10 --tensorboard-every 5 --tensorboard %s --save %s", cuttle, dir, ck), 0, out), 0);
  ct_module *m = ct_model_new("mlp", CT_DEVICE_CPU, NULL);
  ct_checkpoint_meta meta = {0};
  ct_assert_ok(ct_checkpoint_load(ck, m, NULL, &meta));
  ct_module_free(m);
  assert_int_equal(meta.has_grad_scaler, 1);
  assert_int_equal(meta.grad_scaler.steps_taken + meta.grad_scaler.steps_skipped, 10); /* the global step */
  run_log log;
  read_run(dir, &log, 1);
  assert_steps(&log, "amp/scale", 0, 5, 10, 5);
  assert_steps(&log, "amp/skipped_steps", 0, 5, 10, 5);
  assert_true(value_at(&log, "amp/scale", 10) == (float)meta.grad_scaler.scale);
  assert_true(value_at(&log, "amp/skipped_steps", 10) == (float)meta.grad_scaler.steps_skipped);
  assert_steps(&log, "train/loss", 0, 5, 10, 5);
  check_with_tensorboard(dir, &log, NULL);
  free_run(&log);
}

/* The number of entries of dir, or -1 when it cannot be read. */
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

static void unwritable_dir_is_an_error(void **state) {
  (void)state;
  char out[32768];
  const char *dir = path("bad"), *file = path("bad/plain"), *metrics = path("bad/m.jsonl"), *ck = path("bad/ck.safetensors");
  mkdir(dir, 0755);
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fclose(f);
  /* a path through a regular file, then the file itself */
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --model mlp --device cpu --epochs 1 --max-steps 5 --no-progress "
                                      "--tensorboard %s/logs --metrics %s --save %s", cuttle, file, metrics, ck), 1, out), 1);
  assert_non_null(strstr(out, "--tensorboard"));
  assert_non_null(strstr(out, "cannot make the directory"));
  assert_null(strstr(out, "training mlp")); /* it stopped before */
  assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --model mlp --device cpu --epochs 1 --max-steps 5 --no-progress "
                                      "--tensorboard %s --metrics %s --save %s", cuttle, file, metrics, ck), 1, out), 1);
  assert_non_null(strstr(out, "is not a directory"));
  assert_int_equal(entries(dir), 1); /* only the plain file: no metrics, no checkpoint */
  struct stat st;
  assert_int_equal(stat(file, &st), 0);
  assert_int_equal(st.st_size, 0);
  if (geteuid() != 0) { /* permissions do not stop root */
    const char *ro = path("bad/ro");
    mkdir(ro, 0555);
    assert_int_equal(expect(ct_test_run(out, sizeof out, "%s train --model mlp --device cpu --epochs 1 --max-steps 5 --no-progress "
                                        "--tensorboard %s", cuttle, ro), 1, out), 1);
    assert_non_null(strstr(out, "cannot create the event file"));
    assert_int_equal(entries(ro), 0);
    chmod(ro, 0755);
  }
}

/* Wait until the file at log holds needle, for at most timeout_s; 1 when it does. */
static int wait_log(const char *file, const char *needle, double timeout_s) {
  static char buf[65536];
  for (double waited = 0; waited < timeout_s; waited += 0.05) {
    FILE *f = fopen(file, "r");
    if (f) {
      size_t k = fread(buf, 1, sizeof buf - 1, f);
      buf[k] = 0;
      fclose(f);
      if (strstr(buf, needle)) return 1;
    }
    usleep(50000);
  }
  return 0;
}

/* Ctrl-C: the stop path saves, the writer is closed, and every step up to the checkpoint's is in the
 * file. */
static void sigint_closes_the_log(void **state) {
  (void)state;
  const char *dir = path("sigint"), *ck = path("sigint.safetensors"), *logfile = path("sigint.log");
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(logfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    execl(cuttle, cuttle, "train", "--model", "cnn", "--device", "cpu", "--epochs", "1", "--no-progress", "--save", ck,
          "--tensorboard", dir, "--tensorboard-every", "1", (char *)NULL);
    _exit(127);
  }
  assert_true(wait_log(logfile, "training cnn", 120));
  sleep(2); /* some steps */
  kill(pid, SIGINT);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 128 + SIGINT);
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(ck));
  const char *v = ct_safetensors_metadata(f, "optimizer.steps");
  assert_non_null(v);
  int64_t steps = atoll(v);
  ct_safetensors_close(f);
  fprintf(stderr, "interrupted after %lld steps\n", (long long)steps);
  assert_true(steps > 0);
  run_log log;
  read_run(dir, &log, 1);
  assert_int_equal(log.files, 1);
  assert_steps(&log, "train/loss", 0, 1, steps, 1);
  assert_steps(&log, "lr", 0, 1, steps, 1);
  free_run(&log);
}

static int setup(void **state) {
  (void)state;
  const char *bin = getenv("CUTTLE_BINARY_DIR"), *src = getenv("CUTTLE_SOURCE_DIR");
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", bin ? bin : ".");
  snprintf(script, sizeof script, "%s/tests/io/tensorboard_interop.py", src ? src : ".");
  tmp = ct_test_tmpdir();
  return tmp ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ct_test_rmdir(tmp);
  return 0;
}

int main(void) {
  const struct CMUnitTest basic[] = {cmocka_unit_test(usage_errors)};
  int fails = cmocka_run_group_tests_name("cli tensorboard", basic, setup, teardown);
  if (!ct_test_data_dir()) {
    printf("SKIP: the training cases need Fashion-MNIST (apt-get install dataset-fashion-mnist)\n");
    return fails ? fails : CT_TEST_SKIP;
  }
  /* 1 (a failure, said) or CT_TEST_SKIP (CUTTLE_INTEROP_OPTIONAL=1) leave the C reader's checks */
  python = ct_test_require_python("tensorboard");
  const struct CMUnitTest training[] = {
      cmocka_unit_test(epochs_match_metrics), cmocka_unit_test(resume_continues_and_purges),
      cmocka_unit_test(amp_f16_logs_the_scaler), cmocka_unit_test(unwritable_dir_is_an_error),
      cmocka_unit_test(sigint_closes_the_log)};
  fails += cmocka_run_group_tests_name("cli tensorboard training", training, setup, teardown);
  return fails + (python == 1);
}
