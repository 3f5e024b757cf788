/* tests/cli/test_cli_dist.c: `cuttle train` data-parallel under mpirun (issue 10), as a user runs it.
 *
 *  - two ranks train: one metrics line, one checkpoint and one TensorBoard event file (--tensorboard),
 *    written by rank 0 only; the metrics give the global batch (per rank x ranks) and the world size;
 *  - evaluation is exact: the correct count that 2 ranks summed for that checkpoint is the one
 *    `cuttle eval` finds in one process, and `mpirun -np 3 cuttle eval` (3 does not divide the
 *    10000 test images: the sampler's padding must not be counted) finds it too;
 *  - a checkpoint that 2 ranks saved after 10 steps resumes with 2 ranks at its position in the
 *    epoch: 10 + 10 steps give the same model and optimizer state, bit for bit, as 20 steps in one
 *    run; with 1 process instead, the epoch starts over (and says so);
 *  - SIGTERM to mpirun: Open MPI 4.1 passes it on to the ranks after odls_base_sigkill_timeout
 *    seconds (3 here) and exits 1 (measured); the ranks finish their step, rank 0 saves a
 *    checkpoint that loads, holding its position. SIGUSR2 to mpirun is forwarded at once: the
 *    same save, and the job's exit status is 143;
 *  - `cuttle train --nproc 2` starts the ranks itself, and a SIGTERM (SIGINT) to it makes the job
 *    save and exit 143 (130);
 *  - a stuck rank (SIGSTOP) ends the job within --timeout: the other rank names it and exits 1
 *    without a save, and mpirun ends the stopped one;
 *  - gradient accumulation: --accumulate 2 with batch 32 gives, for SGD with momentum, the
 *    parameters and momentum buffers of --accumulate 1 with batch 64 (to 1e-5), in one process and
 *    with 2 ranks of batch 16 (DDP's no_sync), while batch 32 without accumulation does not.
 *
 * tests/CMakeLists.txt runs it in its MPI section with test_ddp's environment (the sanitizers'
 * options, OMPI_ALLOW_RUN_AS_ROOT, OMP_NUM_THREADS=1); mpirun is $CUTTLE_MPIEXEC, run with
 * --oversubscribe over the TCP transport on loopback. Built without MPI, only the one-process
 * accumulation case runs, and `--nproc` must say what to install. Skipped (77) without the dataset. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"

static char cuttle[4096], mpirun[8192];
static char *tmp;

#ifdef CUTTLE_WITH_MPI /* the helpers that only the mpirun cases use */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
#endif

#ifdef CUTTLE_WITH_MPI /* the helpers that only the mpirun cases use */
static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}
#endif

static char *path(const char *name) {
  static char buf[8][4200];
  static int k;
  char *b = buf[k++ % 8];
  snprintf(b, sizeof buf[0], "%s/%s", tmp, name);
  return b;
}

/* The largest |a - b| over every tensor of two checkpoints, which must hold the same names and
 * shapes (model and optimizer state alike). */
static double max_diff(const char *pa, const char *pb) {
  ct_safetensors *a = ct_assert_nonnull(ct_safetensors_open(pa)), *b = ct_assert_nonnull(ct_safetensors_open(pb));
  int n = ct_safetensors_count(a);
  assert_true(n > 0);
  assert_int_equal(n, ct_safetensors_count(b));
  double worst = 0;
  for (int i = 0; i < n; i++) {
    ct_safetensors_info info;
    ct_assert_ok(ct_safetensors_info_at(a, i, &info));
    ct_tensor *ta = ct_assert_nonnull(ct_safetensors_get(a, info.name, CT_DEVICE_CPU));
    ct_tensor *tb = ct_assert_nonnull(ct_safetensors_get(b, info.name, CT_DEVICE_CPU));
    assert_int_equal(ct_tensor_numel(ta), ct_tensor_numel(tb));
    double *va = ct_test_values(ta), *vb = ct_test_values(tb);
    for (int64_t j = 0; j < ct_tensor_numel(ta); j++) {
      double d = fabs(va[j] - vb[j]);
      if (!(d <= worst)) worst = d; /* NaN sticks */
    }
    free(va), free(vb);
    ct_tensor_free(ta), ct_tensor_free(tb);
  }
  ct_safetensors_close(a), ct_safetensors_close(b);
  return worst;
}

/* A metadata string of a checkpoint as an integer; -1 when absent. */
static long long meta_int(const char *file, const char *key) {
  ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(file));
  const char *v = ct_safetensors_metadata(f, key);
  long long r = v ? atoll(v) : -1;
  ct_safetensors_close(f);
  ct_clear_error();
  return r;
}

#ifdef CUTTLE_WITH_MPI /* the helpers that only the mpirun cases use */
/* The number after "key": in a line, or -1. */
static double json_num(const char *line, const char *key) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\": ", key);
  const char *p = strstr(line, k);
  return p ? atof(p + strlen(k)) : -1;
}

/* The correct count in "test_acc ...; N correct" of `cuttle eval`, or -1. */
static long long eval_correct(const char *out) {
  const char *p = strstr(out, "test_acc ");
  p = p ? strstr(p, "; ") : NULL;
  return p ? atoll(p + 2) : -1;
}
#endif

#ifdef CUTTLE_WITH_MPI

/* The files of dir whose names start with prefix. */
static int files_named(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  closedir(d);
  return n;
}

/* (a) and (c): two ranks, one epoch of the mlp. */
static void two_ranks_write_once_and_evaluate_exactly(void **state) {
  (void)state;
  char out[32768];
  const char *ck = path("a.safetensors"), *metrics = path("a.jsonl"), *runs = path("runs");
  int rc = ct_test_run(out, sizeof out,
               "%s -np 2 %s train --model mlp --device cpu --epochs 1 --batch-size 256 --no-progress --save %s --metrics %s "
               "--tensorboard %s", mpirun, cuttle, ck, metrics, runs);
  if (rc != 0) fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  /* rank 0 alone prints, saves and writes the metrics and the TensorBoard events
   * (tests/cli/test_cli_tensorboard.c reads such a file) */
  assert_int_equal(count(out, "training mlp"), 1);
  assert_int_equal(count(out, "epoch 1:"), 1);
  assert_int_equal(count(out, "saved "), 1);
  assert_int_equal(count(out, "--tensorboard: "), 1);
  assert_int_equal(files_named(runs, "events.out.tfevents."), 1);
  assert_int_equal(files_named(runs, ""), 1 + 2); /* and nothing else but . and .. */
  assert_non_null(strstr(out, "global batch 512"));
  FILE *f = fopen(metrics, "r");
  assert_non_null(f);
  char line[2048], extra[2048];
  assert_non_null(fgets(line, sizeof line, f));
  assert_null(fgets(extra, sizeof extra, f)); /* one line: rank 1 wrote none */
  fclose(f);
  assert_true(json_num(line, "batch") == 512);
  assert_true(json_num(line, "batch_per_rank") == 256);
  assert_true(json_num(line, "world_size") == 2);
  assert_true(json_num(line, "test_total") == 10000);
  assert_true(json_num(line, "test_loss") > 0); /* summed over the ranks with the counts checked below */
  long long correct = (long long)json_num(line, "test_correct");
  double acc = json_num(line, "test_acc");
  assert_true(acc > 0.75);
  assert_true(fabs(acc - correct / 10000.0) < 1e-6);
  /* the sum over 2 ranks equals one process's count on the same checkpoint, to the image */
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --model mlp --device cpu --checkpoint %s", cuttle, ck), 0);
  assert_int_equal(eval_correct(out), correct);
  /* and so does 3 ranks' (10000 = 3334 + 3333 + 3333: the padded sample is not counted twice) */
  assert_int_equal(ct_test_run(out, sizeof out, "%s -np 3 %s eval --model mlp --device cpu --checkpoint %s", mpirun, cuttle, ck), 0);
  assert_int_equal(count(out, "test_acc"), 1);
  assert_non_null(strstr(out, "10000 images"));
  assert_non_null(strstr(out, "3 ranks"));
  assert_int_equal(eval_correct(out), correct);
}

/* (b): 10 steps, save, resume for 10 more, with 2 ranks: the state of 20 steps in one go. */
static void two_ranks_resume_where_they_stopped(void **state) {
  (void)state;
  char out[32768];
  const char *part = path("part.safetensors"), *whole = path("whole.safetensors"), *one = path("one.safetensors");
  const char *common = "--model mlp --device cpu --epochs 1 --batch-size 32 --no-progress";
  assert_int_equal(ct_test_run(out, sizeof out, "%s -np 2 %s train %s --max-steps 20 --save %s", mpirun, cuttle, common, whole), 0);
  assert_int_equal(ct_test_run(out, sizeof out, "%s -np 2 %s train %s --max-steps 10 --save %s", mpirun, cuttle, common, part), 0);
  assert_int_equal(meta_int(part, "cuttle.position"), 10);
  assert_int_equal(meta_int(part, "cuttle.world_size"), 2);
  assert_int_equal(meta_int(part, "optimizer.steps"), 10);
  assert_int_equal(ct_test_run(out, sizeof out, "cp %s %s", part, one), 0);
  assert_int_equal(ct_test_run(out, sizeof out, "%s -np 2 %s train %s --max-steps 10 --resume %s --save %s", mpirun, cuttle, common, part,
                       part), 0);
  assert_int_equal(count(out, "resumed from"), 1);
  assert_non_null(strstr(out, "epoch 1, batch 10"));
  assert_int_equal(meta_int(part, "cuttle.position"), 20);
  assert_int_equal(meta_int(part, "optimizer.steps"), 20);
  double d = max_diff(part, whole);
  fprintf(stderr, "resumed 10 + 10 steps against 20 steps: max |diff| %g\n", d);
  assert_true(d == 0.0);
  /* one process cannot continue 2 ranks' shards: it says so and repeats the epoch */
  assert_int_equal(ct_test_run(out, sizeof out, "%s train %s --max-steps 1 --resume %s --save %s", cuttle, common, one, one), 0);
  assert_non_null(strstr(out, "starts over"));
  assert_int_equal(meta_int(one, "cuttle.position"), 1);
}

/* Start `sh -c "exec CMD"` (so the pid is CMD's) with stdout and stderr in logfile. */
static pid_t spawn(const char *logfile, const char *fmt, ...) {
  char cmd[16384] = "exec ";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd + 5, sizeof cmd - 5, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[spawn] %s\n", cmd + 5);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(logfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* Wait until logfile holds needle (then return 1) or timeout_s passes (0). */
static int wait_log(const char *logfile, const char *needle, double timeout_s) {
  double end = now() + timeout_s;
  static char buf[65536];
  while (now() < end) {
    FILE *f = fopen(logfile, "r");
    if (f) {
      size_t k = fread(buf, 1, sizeof buf - 1, f);
      buf[k] = 0;
      fclose(f);
      if (strstr(buf, needle)) return 1;
    }
    usleep(100000);
  }
  return 0;
}

/* waitpid with a deadline; the exit status, 128 + signal, or -1 after killing a hung child. */
static int wait_exit(pid_t pid, double timeout_s) {
  double end = now() + timeout_s;
  int st;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    usleep(50000);
  }
}

static void print_log(const char *logfile) {
  char out[32768];
  ct_test_run(out, sizeof out, "cat %s", logfile);
  fprintf(stderr, "%s\n", out);
}

/* The checkpoint a stopped job left: it loads into the cnn, and records a position in epoch 1. */
static void check_stop_checkpoint(const char *ck) {
  ct_module *m = ct_model_new("cnn", CT_DEVICE_CPU, NULL);
  ct_checkpoint_meta meta = {0};
  ct_assert_ok(ct_checkpoint_load(ck, m, NULL, &meta));
  assert_int_equal(meta.epoch, 0);
  assert_true(meta_int(ck, "cuttle.position") > 0);
  assert_int_equal(meta_int(ck, "cuttle.world_size"), 2);
  ct_module_free(m);
}

/* One signal to a job, `launch train args ...`, that trains the cnn for an epoch (long enough to
 * be cut short); returns its exit status, after checking the checkpoint. */
static int signal_job(const char *launch, const char *args, int sig, const char *name) {
  char ck[4200], logfile[4200];
  snprintf(ck, sizeof ck, "%s/%s.safetensors", tmp, name);
  snprintf(logfile, sizeof logfile, "%s/%s.log", tmp, name);
  pid_t pid = spawn(logfile, "%s train %s --model cnn --device cpu --epochs 1 --no-progress --save %s", launch, args, ck);
  if (!wait_log(logfile, "training cnn", 60)) print_log(logfile);
  sleep(2); /* some steps */
  double t0 = now();
  kill(pid, sig);
  int rc = wait_exit(pid, 60);
  fprintf(stderr, "%s: signal %d -> exit status %d after %.1f s\n", name, sig, rc, now() - t0);
  print_log(logfile);
  assert_true(wait_log(logfile, "saved ", 1));
  check_stop_checkpoint(ck);
  return rc;
}

/* (d): SIGTERM and SIGUSR2 to mpirun. */
static void signals_to_mpirun_save_and_stop(void **state) {
  (void)state;
  char launch[16384];
  /* Open MPI ends the job itself: SIGTERM to the ranks odls_base_sigkill_timeout seconds later,
   * SIGKILL as long after that, then exit status 1. 3 s rather than the default 1 leave a loaded
   * machine (or the sanitizer build) time to finish the step and save, as README advises. */
  snprintf(launch, sizeof launch, "%s --mca odls_base_sigkill_timeout 3 -np 2 %s", mpirun, cuttle);
  assert_int_equal(signal_job(launch, "", SIGTERM, "sigterm"), 1);
  snprintf(launch, sizeof launch, "%s -np 2 %s", mpirun, cuttle);
  /* forwarded at once; the ranks take it as SIGTERM and exit 143, which mpirun reports */
  assert_int_equal(signal_job(launch, "", SIGUSR2, "sigusr2"), 143);
}

/* (e): --nproc 2 runs, and passes a SIGTERM on. */
static void nproc_starts_the_ranks(void **state) {
  (void)state;
  char out[32768];
  const char *ck = path("nproc.safetensors"), *ref = path("mpirun.safetensors");
  const char *common = "--model mlp --device cpu --epochs 1 --batch-size 32 --no-progress --max-steps 20";
  assert_int_equal(ct_test_run(out, sizeof out, "OMPI_MCA_btl=tcp,self %s train --nproc 2 %s --save %s", cuttle, common, ck), 0);
  assert_non_null(strstr(out, "starting 2 ranks"));
  assert_non_null(strstr(out, "global batch 64"));
  assert_int_equal(count(out, "saved "), 1);
  assert_int_equal(meta_int(ck, "cuttle.world_size"), 2);
  /* the same run as mpirun -np 2 gives */
  assert_int_equal(ct_test_run(out, sizeof out, "%s -np 2 %s train %s --save %s", mpirun, cuttle, common, ref), 0);
  double d = max_diff(ck, ref);
  fprintf(stderr, "--nproc 2 against mpirun -np 2: max |diff| %g\n", d);
  assert_true(d == 0.0);
  /* --nproc under mpirun is a usage error */
  assert_int_equal(ct_test_run(out, sizeof out, "%s -np 1 %s train --nproc 2 --model mlp", mpirun, cuttle), 2);
  assert_non_null(strstr(out, "leave it out"));
  char launch[8192];
  /* `exec env ... cuttle` keeps the pid: the signal goes to cuttle, which forwards it */
  snprintf(launch, sizeof launch, "env OMPI_MCA_btl=tcp,self %s", cuttle);
  assert_int_equal(signal_job(launch, "--nproc 2", SIGTERM, "nproc_sigterm"), 143);
  assert_int_equal(signal_job(launch, "--nproc 2", SIGINT, "nproc_sigint"), 130); /* Ctrl-C */
}

/* The processes mpirun started (its children, listed in /proc/<pid>/task/<tid>/children). */
static int children(pid_t pid, pid_t *out, int max) {
  char cmd[256], buf[4096];
  snprintf(cmd, sizeof cmd, "cat /proc/%d/task/*/children", (int)pid);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t k = fread(buf, 1, sizeof buf - 1, p);
  buf[k] = 0;
  pclose(p);
  int n = 0;
  for (char *t = strtok(buf, " \n"); t && n < max; t = strtok(NULL, " \n")) out[n++] = (pid_t)atoi(t);
  return n;
}

/* A stuck rank (SIGSTOP) ends the job within --timeout: the other rank says what timed out, exits
 * 1 at once without saving, and mpirun ends the stopped one. */
static void a_stuck_rank_ends_the_job(void **state) {
  (void)state;
  const char *ck = path("stuck.safetensors"), *logfile = path("stuck.log");
  pid_t pid = spawn(logfile, "%s -np 2 %s train --model cnn --device cpu --epochs 1 --no-progress --timeout 3 --save %s",
                    mpirun, cuttle, ck);
  if (!wait_log(logfile, "training cnn", 60)) print_log(logfile);
  sleep(1);
  pid_t ranks[8];
  int n = children(pid, ranks, 8);
  assert_int_equal(n, 2);
  double t0 = now();
  kill(ranks[1], SIGSTOP);
  int rc = wait_exit(pid, 90);
  double took = now() - t0;
  kill(ranks[1], SIGKILL); /* in case mpirun left it */
  fprintf(stderr, "one rank stopped: exit status %d after %.1f s (--timeout 3)\n", rc, took);
  print_log(logfile);
  assert_int_equal(rc, 1);
  assert_true(took < 3 + 30);
  /* dist-core's message: "... timed out after 3 s on rank R: rank S of 2 never arrived" or, when the
   * rank stopped inside the all-reduce, "every rank arrived but it did not complete" */
  assert_true(wait_log(logfile, "timed out after 3 s", 1));
  /* who ends the job: the CLI, after a collective returned its error ("leaving the job with status
   * 1"), or dist's watchdog itself, when the rank stopped during a blocking all-reduce (its line ends
   * "ending the job" and it calls MPI_Abort at once); which one depends on where the rank stopped
   * (seen both ways in CI) */
  assert_true(wait_log(logfile, "leaving the job with status 1", 1) || wait_log(logfile, "; ending the job", 1));
  assert_int_equal(access(ck, F_OK), -1); /* no save was attempted */
}

#else

static void nproc_says_how_to_get_mpi(void **state) {
  (void)state;
  char out[8192];
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --nproc 2 --model mlp", cuttle), 1);
  assert_non_null(strstr(out, "apt-get install libopenmpi-dev openmpi-bin"));
}

#endif

/* (f): accumulation gives the larger batch's update, in one process and with 2 ranks. */
static void accumulate_matches_a_larger_batch(void **state) {
  (void)state;
  char out[32768];
  const char *acc2 = path("acc2.safetensors"), *big = path("big.safetensors"), *small = path("small.safetensors");
  const char *common = "--model mlp --device cpu --epochs 1 --optimizer sgd --lr 0.05 --no-progress --max-steps 10";
  assert_int_equal(ct_test_run(out, sizeof out, "%s train %s --batch-size 32 --accumulate 2 --save %s", cuttle, common, acc2), 0);
  assert_non_null(strstr(out, "global batch 64"));
  assert_int_equal(ct_test_run(out, sizeof out, "%s train %s --batch-size 64 --save %s", cuttle, common, big), 0);
  assert_int_equal(ct_test_run(out, sizeof out, "%s train %s --batch-size 32 --save %s", cuttle, common, small), 0);
  assert_int_equal(meta_int(acc2, "optimizer.steps"), 10); /* optimizer steps, not micro-batches */
  assert_int_equal(meta_int(acc2, "cuttle.position"), 20); /* micro-batches consumed */
  double same = max_diff(acc2, big), other = max_diff(small, big);
  fprintf(stderr, "accumulate 2 x 32 against 64: %g; 32 without accumulation against 64: %g\n", same, other);
  assert_true(same <= 1e-5);
  assert_true(other > 1e-3); /* the comparison can fail */
#ifdef CUTTLE_WITH_MPI
  const char *dist = path("acc2_dist.safetensors");
  assert_int_equal(ct_test_run(out, sizeof out, "%s -np 2 %s train %s --batch-size 16 --accumulate 2 --save %s", mpirun, cuttle, common,
                       dist), 0);
  assert_non_null(strstr(out, "global batch 64"));
  same = max_diff(dist, big);
  fprintf(stderr, "2 ranks x accumulate 2 x 16 against 64: %g\n", same);
  assert_true(same <= 1e-5);
#endif
}

static int setup(void **state) {
  (void)state;
  const char *bin = getenv("CUTTLE_BINARY_DIR"), *mpi = getenv("CUTTLE_MPIEXEC");
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", bin ? bin : ".");
  snprintf(mpirun, sizeof mpirun, "%s --allow-run-as-root --oversubscribe --mca btl tcp,self", mpi ? mpi : "mpirun");
  setenv("OMP_NUM_THREADS", "1", 0);
  tmp = ct_test_tmpdir();
  return tmp ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ct_test_rmdir(tmp);
  return 0;
}

/* argv[1], when given, runs only the cases whose name contains it (tests/CMakeLists.txt makes one
 * CTest test per case, so each stays short). */
int main(int argc, char **argv) {
  char filter[256];
  if (argc > 1) {
    snprintf(filter, sizeof filter, "*%s*", argv[1]);
    cmocka_set_test_filter(filter);
  }
  if (!ct_test_data_dir()) {
    printf("SKIP: the training cases need Fashion-MNIST (apt-get install dataset-fashion-mnist)\n");
    return CT_TEST_SKIP;
  }
  const struct CMUnitTest tests[] = {
#ifdef CUTTLE_WITH_MPI
      cmocka_unit_test(two_ranks_write_once_and_evaluate_exactly), cmocka_unit_test(two_ranks_resume_where_they_stopped),
      cmocka_unit_test(nproc_starts_the_ranks), cmocka_unit_test(signals_to_mpirun_save_and_stop),
      cmocka_unit_test(a_stuck_rank_ends_the_job),
#else
      cmocka_unit_test(nproc_says_how_to_get_mpi),
#endif
      cmocka_unit_test(accumulate_matches_a_larger_batch)};
  return cmocka_run_group_tests_name("cli dist", tests, setup, teardown);
}
