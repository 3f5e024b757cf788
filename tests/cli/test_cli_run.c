/* tests/cli/test_cli_run.c: a run that explains itself (issue 35). `cuttle train` keeps its run in
 * a folder (config.json, last.safetensors, best.safetensors, metrics.jsonl, TensorBoard events)
 * after a normal end, --max-steps and SIGINT; every checkpoint records the run's recipe, so
 * `cuttle eval --checkpoint F` alone reproduces the run's test figure and refuses a split that
 * overlaps training; a damaged tensor byte is caught; the option table parses strictly; progress
 * is plain lines when stderr is not a terminal; --version and --help say what was built. Runs the
 * built binary on small image folders it writes (no data set needed). */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <stdint.h>
#include <unistd.h>
#include "testutil.h"
#include "../data/image_fixture.h"

static char cuttle[4096];
static char *tmp;
static char flat[4200]; /* an image folder without train/ and val/: --val-split's */

static const char *path_in(const char *name) {
  static char p[4][4200];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof p[k], "%s/%s", tmp, name);
  return p[k];
}

/* n gray PNGs of two classes (dark and light) under root/<class>/. */
static void write_flat_folder(const char *root, int n) {
  char rel[4400];
  for (int i = 0; i < n; i++) {
    uint8_t *px = img_make(i, 8, 8, 1);
    if (i % 2)
      for (int k = 0; k < 64; k++) px[k] = (uint8_t)(px[k] / 2 + 128);
    snprintf(rel, sizeof rel, "%s/%s/%02d.png", root, i % 2 ? "light" : "dark", i);
    img_mkdirs(rel);
    assert_true(img_write_png(rel, px, 8, 8, 1));
    free(px);
  }
}

static long slurp(const char *path, char *buf, long n) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  long got = (long)fread(buf, 1, (size_t)(n - 1), f);
  fclose(f);
  buf[got] = 0;
  return got;
}

static int exists(const char *dir, const char *name) {
  char p[8800];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

/* The "test_acc X% (N images ... K correct" figures of a line in out that starts with prefix. */
static void read_acc(const char *out, const char *prefix, char *acc, size_t n) {
  const char *p = strstr(out, prefix);
  assert_non_null(p);
  p = strstr(p, "test_acc ");
  assert_non_null(p);
  size_t k = strcspn(p, "%");
  assert_true(k < n);
  memcpy(acc, p, k), acc[k] = 0;
}

/* Every refusal of the strict parser: exit 2, one line naming the option and the value. */
static void numbers_parse_strictly(void **state) {
  (void)state;
  static const struct {
    const char *args, *needle;
  } cases[] = {
      {"train --lr 1e-3x", "--lr: not a number: \"1e-3x\""},
      {"train --lr abc", "--lr: not a number: \"abc\""},
      {"train --lr ''", "--lr: not a number: \"\""},
      {"train --lr nan", "--lr: not a finite number: \"nan\""},
      {"train --lr inf", "--lr: not a finite number: \"inf\""},
      {"train --lr 1e999", "--lr: not a finite number: \"1e999\""},
      {"train --lr 0", "--lr: \"0\" is out of range"},
      {"train --epochs 1x", "--epochs: not an integer: \"1x\""},
      {"train --epochs 1.5", "--epochs: not an integer: \"1.5\""},
      {"train --epochs -1", "--epochs: \"-1\" is out of range"},
      {"train --epochs 99999999999", "--epochs: too large: \"99999999999\""},
      {"train --batch-size 99999999999999999999", "--batch-size: too large"},
      {"train --batch-size 0", "--batch-size: \"0\" is out of range"},
      {"train --workers -2", "--workers: \"-2\" is out of range"},
      {"train --max-steps -1", "--max-steps: \"-1\" is out of range"},
      {"train --seed -1", "--seed: not a non-negative integer: \"-1\""},
      {"train --seed 18446744073709551616", "--seed: too large"},
      {"train --weight-decay -0.1", "--weight-decay: \"-0.1\" is out of range"},
      {"train --timeout nan", "--timeout: not a finite number"},
      {"train --bucket-mb=0", "--bucket-mb: \"0\" is out of range"},
      {"train --model resnet19", "--model: unknown value \"resnet19\": use mlp, cnn, resnet18"},
      {"train --optimizer lion", "--optimizer: unknown value \"lion\""},
      {"train --amp f8", "--amp: unknown value \"f8\""},
      {"train --gray=1", "--gray takes no value"},
      {"train --epochs", "--epochs needs a value"},
      {"train --frobnicate 3", "unknown option \"--frobnicate\""},
      {"train --epoch 3", "unknown option \"--epoch\""}, /* no abbreviations */
      {"train stray", "unexpected argument \"stray\""},
      {"eval --checkpoint x --augment", "unknown option \"--augment\""},
      {"eval --val-split 0.5x --checkpoint x", "--val-split: not a number"},
      {"eval", "--checkpoint FILE is required"},
      {"train --tensorboard-every 5", "--tensorboard-every N needs --tensorboard DIR"},
      /* the benchmarks' numbers go through the same parser */
      {"bench train --limit 12x", "cuttle bench train: --limit: not an integer: \"12x\""},
      {"bench overhead --iters 1e3", "--iters: not an integer: \"1e3\""},
  };
  char out[8192];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = ct_test_run(out, sizeof out, "%s %s", cuttle, cases[i].args);
    if (rc != 2 || !strstr(out, cases[i].needle)) fprintf(stderr, "cuttle %s: exit %d, said:\n%s\n", cases[i].args, rc, out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, cases[i].needle));
    assert_null(strchr(strchr(out, '\n') + 1, '\n')); /* one line */
  }
  /* the forms that are accepted: --name=value, a signed exponent, a seed of 64 bits (each then
   * fails later, on --device, which proves the parse went through) */
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --lr=1e-3 --seed 18446744073709551615 --epochs +2 --device tpu",
                               cuttle), 2);
  assert_non_null(strstr(out, "bad device"));
}

/* --version names the version, the commit and the backends; --help every command and benchmark. */
static void version_and_help(void **state) {
  (void)state;
  char out[16384];
  assert_int_equal(ct_test_run(out, sizeof out, "%s --version", cuttle), 0);
  assert_non_null(strstr(out, "cuttle 0."));
  assert_non_null(strstr(out, "commit "));
  assert_non_null(strstr(out, "backends: cpu"));
  assert_int_equal(ct_test_run(out, sizeof out, "%s --help", cuttle), 0);
  static const char *const names[] = {"train", "eval", "devices", "smi", "bench", "gemm", "overhead", "matmul-sweep",
                                      "norms", "bandwidth", "two-devices", "data-parallel", "amp-memory",
                                      "ddp-overlap", "allreduce", "conv-format", "memory", "decode",
                                      "attention"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char want[64];
    snprintf(want, sizeof want, "\n  %s ", names[i]);
    if (!strstr(out, want)) fprintf(stderr, "cuttle --help does not list %s:\n%s\n", names[i], out);
    assert_non_null(strstr(out, want));
  }
  /* the bench's own list is the same list */
  char bench[16384];
  assert_int_equal(ct_test_run(bench, sizeof bench, "%s bench --help", cuttle), 0);
  const char *a = strstr(out, "  gemm "), *b = strstr(bench, "  gemm ");
  assert_non_null(a), assert_non_null(b);
  assert_memory_equal(a, b, strcspn(b, "\n") + 1);
  /* train --help has every option of the table, --cuda-graph among them */
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --help", cuttle), 0);
  assert_non_null(strstr(out, "--cuda-graph"));
  assert_non_null(strstr(out, "--out DIR"));
}

/* A normal end: the folder's files, the epoch line in metrics.jsonl, the path said at start and
 * end, plain progress lines (stderr is a pipe here); then eval from the best checkpoint alone
 * gives the training run's figure exactly. */
static void run_folder_and_eval_from_checkpoint(void **state) {
  (void)state;
  char out[32768], train[32768], acc1[64], acc2[64], acc_eval[64];
  const char *dir = path_in("run1");
  assert_int_equal(ct_test_run(train, sizeof train,
                               "%s train --model cnn --data imagefolder:%s --gray --val-split 0.25 --seed 3 --epochs 2 "
                               "--batch-size 4 --device cpu --log-every 2 --progress-every 0.000001 --out %s",
                               cuttle, flat, dir),
                   0);
  read_acc(train, "epoch 1:", acc1, sizeof acc1);
  read_acc(train, "epoch 2:", acc2, sizeof acc2);
  assert_non_null(strstr(train, "run folder: "));
  assert_non_null(strstr(strstr(train, "run folder: ") + 1, "run folder: ")); /* at the start and the end */
  assert_null(strchr(train, '\r'));                                             /* no live bar in a pipe */
  assert_non_null(strstr(train, "epoch 1/2: "));                                /* the plain progress line */
  assert_true(exists(dir, "config.json") && exists(dir, "last.safetensors") && exists(dir, "best.safetensors") &&
              exists(dir, "metrics.jsonl"));
  char p[8400], buf[65536];
  snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
  assert_true(slurp(p, buf, sizeof buf) > 0);
  assert_non_null(strstr(buf, "{\"step\": 2, \"epoch\": 1, \"train_loss\": "));
  assert_non_null(strstr(buf, "{\"epoch\": 2, "));
  assert_null(strstr(buf, "nan")); /* JSON has none */
  snprintf(p, sizeof p, "%s/config.json", dir);
  assert_true(slurp(p, buf, sizeof buf) > 0);
  assert_non_null(strstr(buf, "\"val_split\":\t0.25"));
  assert_non_null(strstr(buf, "\"digest\":\t\"xxh3_64:"));
  assert_int_equal(ct_test_run(out, sizeof out, "ls %s | grep -c events.out.tfevents | grep -qx 1", dir), 0);
  /* eval with the checkpoint alone: the model, --gray, --val-split and --seed come from the file;
   * last.safetensors gives epoch 2's figure, best.safetensors the better epoch's (the first of two
   * equal ones) */
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --device cpu --checkpoint %s/last.safetensors", cuttle, dir), 0);
  read_acc(out, "test_acc", acc_eval, sizeof acc_eval);
  assert_string_equal(acc_eval, acc2);
  assert_non_null(strstr(out, "(10 images, cnn")); /* floor(0.25 * 40) held out */
  /* and the count of right answers is the training run's epoch 2 count */
  snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
  assert_true(slurp(p, buf, sizeof buf) > 0);
  const char *ep2 = strstr(buf, "{\"epoch\": 2, ");
  assert_non_null(ep2);
  long long right = -1, counted = -1;
  assert_int_equal(sscanf(strstr(ep2, "\"test_correct\": "), "\"test_correct\": %lld, \"test_total\": %lld", &right, &counted), 2);
  char want[64];
  snprintf(want, sizeof want, "(%lld images, cnn, cpu; %lld correct)", counted, right);
  assert_non_null(strstr(out, want));
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --device cpu --checkpoint %s/best.safetensors", cuttle, dir), 0);
  read_acc(out, "test_acc", acc_eval, sizeof acc_eval);
  assert_string_equal(acc_eval, atof(acc2 + 9) > atof(acc1 + 9) ? acc2 : acc1);
  /* an option given overrides the recorded one, with a note naming both */
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --device cpu --model mlp --checkpoint %s/last.safetensors",
                               cuttle, dir),
                   1);
  assert_non_null(strstr(out, "--model mlp overrides the checkpoint's cnn"));
  assert_non_null(strstr(out, "the file holds a cnn, not a mlp"));
}

/* Evaluating on images the model trained on is refused: another fraction, another seed, another
 * folder; --allow-overlap is the only way past it. */
static void eval_refuses_a_leaking_split(void **state) {
  (void)state;
  char out[32768], dir[4200], copy[4200];
  snprintf(dir, sizeof dir, "%s", path_in("run2"));
  snprintf(copy, sizeof copy, "%s", path_in("flatcopy"));
  assert_int_equal(ct_test_run(out, sizeof out,
                               "%s train --model mlp --data imagefolder:%s --gray --val-split 0.25 --seed 3 --epochs 1 "
                               "--batch-size 4 --device cpu --no-progress --out %s",
                               cuttle, flat, dir),
                   0);
  static const char *const leaks[] = {"--val-split 0.5", "--seed 4", "--val-split 0.3 --seed 3"};
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(ct_test_run(out, sizeof out, "%s eval --device cpu --checkpoint %s/last.safetensors %s", cuttle, dir,
                                 leaks[i]),
                     2);
    assert_non_null(strstr(out, "refused"));
    assert_non_null(strstr(out, "is not the one held out in training"));
    assert_non_null(strstr(out, "--val-split 0.25 --seed 3")); /* how to reproduce the recorded split */
    assert_null(strstr(out, "test_acc"));
  }
  /* the same images in a copy of the folder elsewhere: the same split, accepted */
  assert_int_equal(ct_test_run(out, sizeof out, "cp -r %s %s", flat, copy), 0);
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --device cpu --checkpoint %s/last.safetensors --data imagefolder:%s",
                               cuttle, dir, copy),
                   0);
  assert_non_null(strstr(out, "overrides the checkpoint's"));
  assert_non_null(strstr(out, "test_acc"));
  /* a folder with one more image: another split */
  uint8_t *px = img_make(99, 8, 8, 1);
  char extra[4400];
  snprintf(extra, sizeof extra, "%s/dark/99.png", copy);
  assert_true(img_write_png(extra, px, 8, 8, 1));
  free(px);
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --device cpu --checkpoint %s/last.safetensors --data imagefolder:%s",
                               cuttle, dir, copy),
                   2);
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --device cpu --checkpoint %s/last.safetensors --val-split 0.5 "
                                                "--allow-overlap",
                               cuttle, dir),
                   0);
  assert_non_null(strstr(out, "warning"));
  assert_non_null(strstr(out, "test_acc"));
}

/* --max-steps: the folder holds last.safetensors (the position in the epoch), metrics' step
 * lines, no best (no epoch ended); a default folder's name is runs/<model>-<data>-<date>-<time>. */
static void run_folder_after_max_steps(void **state) {
  (void)state;
  char out[32768], buf[65536];
  const char *cwd = path_in("cwd");
  mkdir(cwd, 0700);
  assert_int_equal(ct_test_run(out, sizeof out,
                               "cd %s && %s train --model mlp --data imagefolder:%s --gray --val-split 0.25 --seed 3 "
                               "--epochs 3 --batch-size 2 --device cpu --max-steps 3 --log-every 1",
                               cwd, cuttle, flat),
                   0);
  assert_non_null(strstr(out, "stopped after 3 steps"));
  const char *name = strstr(out, "run folder: runs/mlp-imagefolder-flat-");
  assert_non_null(name);
  char dir[8400];
  snprintf(dir, sizeof dir, "%s/%.*s", cwd, (int)strcspn(name + 12, "\n "), name + 12);
  assert_true(exists(dir, "config.json") && exists(dir, "last.safetensors") && exists(dir, "metrics.jsonl"));
  assert_false(exists(dir, "best.safetensors"));
  char p[8500];
  snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
  assert_true(slurp(p, buf, sizeof buf) > 0);
  assert_non_null(strstr(buf, "{\"step\": 3, \"epoch\": 1,"));
  /* resume from it continues in the same folder */
  snprintf(p, sizeof p, "%s/last.safetensors", dir);
  assert_int_equal(ct_test_run(out, sizeof out,
                               "cd %s && %s train --model mlp --data imagefolder:%s --gray --val-split 0.25 --seed 3 "
                               "--epochs 1 --batch-size 2 --device cpu --no-progress --resume %s",
                               cwd, cuttle, flat, p),
                   0);
  assert_non_null(strstr(out, "resumed from"));
  assert_true(exists(dir, "best.safetensors"));
}

/* SIGINT: the step finishes, last.safetensors is saved, exit 130, and it evaluates. The folder has
 * 600 training images at batch 1, so that the signal, sent once the first step's line is written,
 * lands within the first epoch: a signal that came during the evaluation after an epoch's save would
 * find nothing new to save (stop_and_save), and on a loaded machine 30 steps could run out first. */
static void run_folder_after_sigint(void **state) {
  (void)state;
  const char *dir = path_in("run3");
  char log[4400], cmd[16384], metrics[8400], buf[65536], big[4200];
  snprintf(big, sizeof big, "%s/flat800", tmp);
  write_flat_folder(big, 800);
  snprintf(log, sizeof log, "%s/sigint.log", tmp);
  snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", dir);
  snprintf(cmd, sizeof cmd,
           "exec %s train --model mlp --data imagefolder:%s --gray --val-split 0.25 --seed 3 --epochs 100000 "
           "--batch-size 1 --device cpu --workers 0 --log-every 1 --out %s >%s 2>&1",
           cuttle, big, dir, log);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  /* wait until it has trained (a step line in metrics.jsonl), at most 60 s */
  for (int i = 0; i < 600 && slurp(metrics, buf, sizeof buf) <= 0; i++) usleep(100000);
  assert_true(slurp(metrics, buf, sizeof buf) > 0);
  kill(pid, SIGINT);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  slurp(log, buf, sizeof buf);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 130) fprintf(stderr, "the run said:\n%s\n", buf);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 130);
  assert_non_null(strstr(buf, "interrupted"));
  /* the save came after the signal, where the epoch stood */
  assert_non_null(strstr(strstr(buf, "interrupted"), "saved "));
  assert_non_null(strstr(strstr(buf, "interrupted"), " of epoch "));
  assert_true(exists(dir, "last.safetensors") && exists(dir, "config.json"));
  char out[16384];
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --device cpu --checkpoint %s/last.safetensors", cuttle, dir), 0);
  assert_non_null(strstr(out, "test_acc"));
}

/* One damaged byte in a tensor: eval names the file and refuses to score it. */
static void damaged_checkpoint_is_caught(void **state) {
  (void)state;
  char out[16384];
  const char *dir = path_in("run4");
  assert_int_equal(ct_test_run(out, sizeof out,
                               "%s train --model mlp --data imagefolder:%s --gray --val-split 0.25 --seed 3 --epochs 1 "
                               "--batch-size 4 --device cpu --no-progress --out %s",
                               cuttle, flat, dir),
                   0);
  char p[8400];
  snprintf(p, sizeof p, "%s/last.safetensors", dir);
  FILE *f = fopen(p, "r+b");
  assert_non_null(f);
  assert_int_equal(fseek(f, -100, SEEK_END), 0);
  int c = fgetc(f);
  assert_int_equal(fseek(f, -100, SEEK_END), 0);
  fputc(c ^ 0x10, f);
  fclose(f);
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --device cpu --checkpoint %s", cuttle, p), 1);
  assert_non_null(strstr(out, p));
  assert_non_null(strstr(out, "checksum"));
  assert_null(strstr(out, "test_acc"));
  /* and --resume refuses it too, before training */
  assert_int_equal(ct_test_run(out, sizeof out,
                               "%s train --model mlp --data imagefolder:%s --gray --val-split 0.25 --seed 3 --epochs 2 "
                               "--batch-size 4 --device cpu --no-progress --resume %s",
                               cuttle, flat, p),
                   1);
  assert_non_null(strstr(out, "checksum"));
}

/* --save FILE and the folder's last.safetensors: one save, one line, both readable; best stays the
 * best epoch's file while later saves replace last; a folder that holds another run is refused,
 * and --resume from it continues there. */
static void save_last_best_and_reuse(void **state) {
  (void)state;
  char out[32768], dir[4200], save[4300], p[8800];
  snprintf(dir, sizeof dir, "%s", path_in("run5"));
  snprintf(save, sizeof save, "%s/mine.safetensors", tmp);
  assert_int_equal(ct_test_run(out, sizeof out,
                               "%s train --model mlp --data imagefolder:%s --gray --val-split 0.25 --seed 3 --epochs 3 "
                               "--batch-size 4 --device cpu --no-progress --save %s --out %s",
                               cuttle, flat, save, dir),
                   0);
  /* three epochs, three saves, a line each naming both files */
  int lines = 0;
  for (const char *q = out; (q = strstr(q, "saved ")); q++) lines++;
  assert_int_equal(lines, 3);
  char both[8800];
  snprintf(both, sizeof both, "saved %s and %s/last.safetensors (epoch 3)", save, dir);
  assert_non_null(strstr(out, both));
  long n1, n2;
  static char a[1 << 22], b[1 << 22];
  snprintf(p, sizeof p, "%s/last.safetensors", dir);
  n1 = slurp(save, a, sizeof a), n2 = slurp(p, b, sizeof b);
  assert_true(n1 > 0 && n1 == n2 && memcmp(a, b, (size_t)n1) == 0);
  /* best.safetensors holds the best epoch's accuracy, whatever came after it */
  double acc[3], best = -1;
  for (int e = 0; e < 3; e++) {
    char key[32];
    snprintf(key, sizeof key, "epoch %d: ", e + 1);
    const char *l = strstr(out, key);
    assert_non_null(l);
    acc[e] = atof(strstr(l, "test_acc ") + 9);
    if (acc[e] > best) best = acc[e];
  }
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --device cpu --checkpoint %s/best.safetensors", cuttle, dir), 0);
  assert_true(fabs(atof(strstr(out, "test_acc ") + 9) - best) < 1e-9);
  /* another run into the same folder is refused, and changes nothing there */
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --model cnn --data imagefolder:%s --gray --val-split 0.25 --seed 3 "
                                                "--epochs 1 --batch-size 4 --device cpu --no-progress --out %s",
                               cuttle, flat, dir),
                   2);
  assert_non_null(strstr(out, "holds another run"));
  n2 = slurp(p, b, sizeof b);
  assert_true(n1 == n2 && memcmp(a, b, (size_t)n1) == 0);
}

/* A checkpoint whose recorded recipe is malformed: eval says so, naming the file and the option,
 * exit 1, no crash. */
static void malformed_recipe_is_an_error(void **state) {
  (void)state;
  char out[16384], dir[4200], bad[4300];
  snprintf(dir, sizeof dir, "%s", path_in("run6"));
  assert_int_equal(ct_test_run(out, sizeof out,
                               "%s train --model mlp --data imagefolder:%s --gray --val-split 0.25 --seed 3 --epochs 1 "
                               "--batch-size 4 --device cpu --no-progress --out %s",
                               cuttle, flat, dir),
                   0);
  char p[8800];
  snprintf(p, sizeof p, "%s/last.safetensors", dir);
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(p));
  int n = ct_safetensors_count(f);
  const char *names[64];
  ct_tensor *ts[64];
  assert_true(n > 0 && n <= 64);
  for (int i = 0; i < n; i++) {
    ct_safetensors_info info;
    ct_assert_ok(ct_safetensors_info_at(f, i, &info));
    names[i] = info.name;
    ts[i] = ct_assert_nonnull(ct_safetensors_get(f, info.name, CT_DEVICE_CPU));
  }
  static const char *const recipes[] = {
      "{\"options\": {\"model\": \"resnet19\"}, \"model\": {}}", /* not a model the option takes */
      "{\"options\": {\"model\": \"mlp\", \"lr\": \"fast\"}, \"model\": {}}",
      "{\"options\": {\"model\": \"mlp\"}, \"model\": {}}", /* no split: eval could not refuse a leak */
      "[1, 2]",
  };
  static const char *const said[] = {"--model", "--lr", "\"split\"", "not a JSON object"};
  snprintf(bad, sizeof bad, "%s/bad.safetensors", tmp);
  for (int r = 0; r < 4; r++) {
    ct_metadata_kv meta[] = {{"cuttle.recipe", recipes[r]}};
    ct_assert_ok(ct_safetensors_save(bad, n, names, ts, 1, meta));
    assert_int_equal(ct_test_run(out, sizeof out, "%s eval --device cpu --checkpoint %s", cuttle, bad), 1);
    assert_non_null(strstr(out, "the recorded recipe (metadata \"cuttle.recipe\") is malformed"));
    assert_non_null(strstr(out, bad));
    assert_non_null(strstr(out, said[r]));
  }
  for (int i = 0; i < n; i++) ct_tensor_free(ts[i]);
  ct_safetensors_close(f);
}

static int setup(void **state) {
  (void)state;
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", getenv("CUTTLE_BINARY_DIR") ? getenv("CUTTLE_BINARY_DIR") : ".");
  tmp = ct_test_tmpdir();
  snprintf(flat, sizeof flat, "%s/flat", tmp);
  write_flat_folder(flat, 40);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ct_test_rmdir(tmp);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(numbers_parse_strictly),
                                     cmocka_unit_test(version_and_help),
                                     cmocka_unit_test(run_folder_and_eval_from_checkpoint),
                                     cmocka_unit_test(eval_refuses_a_leaking_split),
                                     cmocka_unit_test(run_folder_after_max_steps),
                                     cmocka_unit_test(run_folder_after_sigint),
                                     cmocka_unit_test(damaged_checkpoint_is_caught),
                                     cmocka_unit_test(save_last_best_and_reuse),
                                     cmocka_unit_test(malformed_recipe_is_an_error)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
