/* tests/cli/test_signals.c: `cuttle train` under the signals a cluster sends (tools/cuttle/cmd_train.c)
 * and the atomic checkpoint write behind it (ct_safetensors_save).
 *
 *  - SIGKILL at random moments, many of them while the checkpoint is half-written: afterwards the
 *    checkpoint is absent (never saved yet), the previous one or a newer one (its optimizer step
 *    count never goes back), `cuttle eval` reads it, and no other file is left in its directory.
 *  - One SIGTERM: the step is finished, the checkpoint saved, and the exit status is 143 (128 + 15).
 *  - Two SIGTERMs, the second while the save is in progress: the process ends at once by SIGTERM,
 *    and the previous checkpoint is left byte for byte, with no temporary file beside it.
 *
 * Times are relative to a first clean run (measured here), so the test holds under ASan too. To
 * catch the write window, the test-only hook CUTTLE_TEST_SAVE_DELAY_MS (io.h) pauses each save after
 * its header, and the test watches /proc/<pid>/fd for the unnamed (O_TMPFILE) or temporary file in
 * the checkpoint's directory. Runs the built binary ($CUTTLE_BINARY_DIR/cuttle); skipped (77)
 * without the dataset. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"

static char cuttle[4096];
static char *ckdir;  /* holds the checkpoint F and nothing else */
static char *side;   /* logs, the timing run's checkpoint, and XDG_RUNTIME_DIR for the stats files */
static char ck[4200], logpath[4200];

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec t = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

/* Start `cuttle <args...>` (NULL-terminated) with stdout and stderr appended to logpath and, when
 * delay_ms > 0, the test-only save delay. Returns the pid. */
static pid_t spawn(int delay_ms, const char *const *args) {
  unlink(logpath); /* before the fork, so that the parent never reads the last run's log as this one's */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    char ms[32];
    snprintf(ms, sizeof ms, "%d", delay_ms);
    if (delay_ms > 0) setenv("CUTTLE_TEST_SAVE_DELAY_MS", ms, 1);
    else unsetenv("CUTTLE_TEST_SAVE_DELAY_MS");
    setenv("XDG_RUNTIME_DIR", side, 1); /* a killed run's stats file lands here, not in /tmp */
    char *argv[64];
    int n = 0;
    argv[n++] = cuttle;
    for (; args[n - 1] && n < 63; n++) argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    execv(cuttle, argv);
    _exit(127);
  }
  return pid;
}

/* waitpid with a deadline, so that a hung child fails the test instead of hanging it. */
static int wait_for(pid_t pid, double timeout_s) {
  double end = now() + timeout_s;
  int st = 0;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return st;
    assert_int_equal(r, 0);
    if (now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      fail_msg("cuttle (pid %d) did not end within %.0f s", (int)pid, timeout_s);
    }
    sleep_s(0.002);
  }
}

static void print_log(void) {
  FILE *f = fopen(logpath, "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) fprintf(stderr, "  | %s", line);
  if (f) fclose(f);
}

/* Does the log contain needle? */
static int log_has(const char *needle) {
  FILE *f = fopen(logpath, "r");
  if (!f) return 0;
  static char buf[1 << 16];
  size_t k = fread(buf, 1, sizeof buf - 1, f);
  buf[k] = 0;
  fclose(f);
  return strstr(buf, needle) != NULL;
}

/* Wait until the log says that training has started (the signal handlers are installed by then). */
static void wait_for_training(pid_t pid) {
  double end = now() + 120;
  while (!log_has("training ")) {
    if (now() > end || waitpid(pid, NULL, WNOHANG) == pid) {
      print_log();
      fail_msg("cuttle train did not start training");
    }
    sleep_s(0.005);
  }
}

/* Is pid writing a file in ckdir: an unnamed O_TMPFILE file ("#123 (deleted)") or a temporary name? */
static int writing_checkpoint(pid_t pid) {
  char fddir[64];
  snprintf(fddir, sizeof fddir, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(fddir);
  if (!d) return 0;
  size_t dl = strlen(ckdir);
  int found = 0;
  struct dirent *e;
  while (!found && (e = readdir(d)) != NULL) {
    char link[4400], target[4400];
    snprintf(link, sizeof link, "%s/%s", fddir, e->d_name);
    ssize_t k = readlink(link, target, sizeof target - 1);
    if (k <= 0) continue;
    target[k] = 0;
    found = strncmp(target, ckdir, dl) == 0 && target[dl] == '/' && (strstr(target, " (deleted)") || strstr(target, ".tmp."));
  }
  closedir(d);
  return found;
}

/* Every entry of ckdir is F (or there is none). */
static void assert_only_checkpoint(void) {
  DIR *d = opendir(ckdir);
  assert_non_null(d);
  struct dirent *e;
  int stray = 0;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "F")) continue;
    fprintf(stderr, "left beside the checkpoint: %s\n", e->d_name);
    stray++;
  }
  closedir(d);
  assert_int_equal(stray, 0);
}

/* The optimizer step count F was saved at, or -1 when F does not exist. Fails on a torn file. */
static long long checkpoint_steps(void) {
  struct stat sb;
  if (stat(ck, &sb) != 0) return -1;
  ct_safetensors *f = ct_safetensors_open(ck);
  if (!f) fail_msg("the checkpoint does not parse: %s", ct_last_error());
  const char *v = ct_safetensors_metadata(f, "optimizer.steps");
  assert_non_null(v);
  long long steps = atoll(v);
  ct_safetensors_close(f);
  return steps;
}

/* `cuttle eval --checkpoint F` reads it (exit 0). */
static void assert_eval_reads_checkpoint(void) {
  const char *args[] = {"eval", "--model", "mlp", "--device", "cpu", "--checkpoint", ck, NULL};
  int st = wait_for(spawn(0, args), 300);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) print_log();
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

static int read_file(const char *path, char **out, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  *out = malloc((size_t)sz + 1);
  *n = fread(*out, 1, (size_t)sz, f);
  fclose(f);
  return 0;
}

#define TRAIN_ARGS "train", "--model", "mlp", "--device", "cpu", "--no-progress", "--workers", "1"

static void sigkill_never_tears_the_checkpoint(void **state) {
  (void)state;
  /* A clean run with the settings below measures how long one run takes here. */
  char timing_ck[4400];
  snprintf(timing_ck, sizeof timing_ck, "%s/timing.safetensors", side);
  const char *clean[] = {TRAIN_ARGS, "--epochs", "1", "--max-steps", "60", "--save-every", "5", "--save", timing_ck, NULL};
  double t0 = now();
  int st = wait_for(spawn(0, clean), 600);
  double run_s = now() - t0;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) print_log();
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  fprintf(stderr, "a clean run takes %.2f s\n", run_s);

  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  const int runs = 20;
  int in_write = 0, finished = 0;
  long long last = -1;
  for (int i = 0; i < runs; i++) {
    struct stat sb;
    int have = stat(ck, &sb) == 0;
    /* Ten epochs (4690 steps) to get through, at most 600 steps a run: a run killed at a share of
     * the timed run's length trains about 30 steps, so the runs never reach the end and every
     * targeted run is killed in a write. With one epoch of 60-step runs, a timed run slowed by other
     * tests (4.6 s against 0.6 s) made the kills late, the checkpoint reached the epoch's end, the
     * later runs finished instead of being killed, and too few kills fell in a write. */
    const char *args[] = {TRAIN_ARGS, "--epochs", "10", "--max-steps", "600", "--save-every", "5", "--save", ck,
                          have ? "--resume" : NULL, ck, NULL};
    /* Odd runs: SIGKILL at a random moment of the run. Even runs: saves slowed by the test hook,
     * and SIGKILL at a random moment while one is half-written. */
    int targeted = i % 2 == 0;
    int delay_ms = targeted ? 150 : 0;
    pid_t pid = spawn(delay_ms, args);
    double start = now();
    pid_t reaped = 0; /* the run ended by itself while the loop below watched it (a resumed run with
                       * little or nothing left to train); its status is then in st */
    if (targeted) {
      while (!writing_checkpoint(pid) && (reaped = waitpid(pid, &st, WNOHANG)) == 0 && now() - start < 10 * run_s + 60)
        sleep_s(0.0005);
      assert_true(reaped == 0 || reaped == pid);
      if (!reaped) sleep_s(delay_ms * 1e-3 * 0.6 * rand() / RAND_MAX);
    } else {
      sleep_s(1.1 * run_s * rand() / RAND_MAX);
    }
    int was_writing = !reaped && writing_checkpoint(pid);
    if (!reaped) {
      kill(pid, SIGKILL);
      st = wait_for(pid, 120);
    }
    if (WIFSIGNALED(st)) {
      assert_int_equal(WTERMSIG(st), SIGKILL);
      in_write += was_writing;
    } else {
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) print_log();
      assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* it finished before the kill */
      finished++;
    }
    assert_only_checkpoint();
    long long steps = checkpoint_steps();
    if (steps < 0) {
      assert_int_equal(last, -1); /* absent only until the first save */
    } else {
      if (steps < last) fail_msg("run %d: the checkpoint went back from step %lld to %lld", i, last, steps);
      assert_eval_reads_checkpoint();
      last = steps;
    }
  }
  fprintf(stderr, "%d runs killed with SIGKILL: %d while writing the checkpoint, %d finished first; last checkpoint at step %lld\n",
          runs - finished, in_write, finished, last);
  assert_true(in_write >= runs / 4); /* the test must actually hit the write window */
  assert_true(last > 0);
}

static void one_sigterm_saves_and_exits_143(void **state) {
  (void)state;
  unlink(ck);
  const char *args[] = {TRAIN_ARGS, "--epochs", "3", "--save", ck, NULL};
  pid_t pid = spawn(0, args);
  wait_for_training(pid);
  sleep_s(0.05);
  kill(pid, SIGTERM);
  int st = wait_for(pid, 300);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 143) print_log();
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 128 + SIGTERM);
  assert_true(log_has("terminated (SIGTERM)"));
  assert_true(log_has("saved "));
  assert_only_checkpoint();
  /* a whole checkpoint that loads into the model, and that `cuttle eval` reads */
  ct_module *m = ct_model_new("mlp", CT_DEVICE_CPU, NULL);
  ct_checkpoint_meta meta = {0};
  ct_assert_ok(ct_checkpoint_load(ck, m, NULL, &meta));
  assert_true(meta.has_training_state && meta.epoch < 3); /* the run was cut short */
  ct_module_free(m);
  assert_eval_reads_checkpoint();
}

static void two_sigterms_exit_at_once_and_keep_the_previous_checkpoint(void **state) {
  (void)state;
  unlink(ck);
  const char *first[] = {TRAIN_ARGS, "--epochs", "1", "--max-steps", "5", "--save", ck, NULL};
  int st = wait_for(spawn(0, first), 300);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char *before = NULL;
  size_t nbefore = 0;
  assert_int_equal(read_file(ck, &before, &nbefore), 0);

  /* The save the first SIGTERM starts takes 5 s with the hook; the second SIGTERM comes during it. */
  const int delay_ms = 5000;
  const char *args[] = {TRAIN_ARGS, "--epochs", "3", "--save", ck, "--resume", ck, NULL};
  pid_t pid = spawn(delay_ms, args);
  wait_for_training(pid);
  sleep_s(0.05);
  kill(pid, SIGTERM);
  double end = now() + 120;
  while (!writing_checkpoint(pid)) {
    if (now() > end || waitpid(pid, NULL, WNOHANG) == pid) {
      print_log();
      fail_msg("the save after SIGTERM was not seen");
    }
    sleep_s(0.001);
  }
  double t = now();
  kill(pid, SIGTERM);
  st = wait_for(pid, 120);
  double took = now() - t;
  if (!WIFSIGNALED(st)) print_log();
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGTERM);
  fprintf(stderr, "the second SIGTERM ended the process in %.3f s (the save would have taken %d ms more)\n", took, delay_ms);
  assert_true(took < delay_ms * 1e-3 * 0.8); /* at once, not after the save */
  assert_false(log_has("saved "));

  char *after = NULL;
  size_t nafter = 0;
  assert_int_equal(read_file(ck, &after, &nafter), 0);
  assert_int_equal(nafter, nbefore);
  assert_memory_equal(after, before, nbefore);
  assert_only_checkpoint();
  assert_eval_reads_checkpoint();
  free(before);
  free(after);
}

static int setup(void **state) {
  (void)state;
  const char *bin = getenv("CUTTLE_BINARY_DIR");
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", bin ? bin : ".");
  ckdir = ct_test_tmpdir();
  side = ct_test_tmpdir();
  if (!ckdir || !side) return -1;
  snprintf(ck, sizeof ck, "%s/F", ckdir);
  snprintf(logpath, sizeof logpath, "%s/cuttle.log", side);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ct_test_rmdir(ckdir);
  ct_test_rmdir(side);
  return 0;
}

int main(void) {
  if (!ct_test_data_dir()) {
    printf("SKIP: the signal tests train on Fashion-MNIST (apt-get install dataset-fashion-mnist)\n");
    return CT_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sigkill_never_tears_the_checkpoint),
      cmocka_unit_test(one_sigterm_saves_and_exits_143),
      cmocka_unit_test(two_sigterms_exit_at_once_and_keep_the_previous_checkpoint),
  };
  return cmocka_run_group_tests_name("signals", tests, setup, teardown);
}
