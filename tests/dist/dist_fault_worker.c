/* tests/dist/dist_fault_worker.c: one rank of a job in which rank 1 fails, for tests/dist/dist_faults.sh
 * (issue 10: "Faults end the job, they never hang it").
 *
 * Usage: mpirun -np 3 dist_fault_worker MODE, MODE one of
 *   sleep          rank 1 sleeps instead of joining the step's all-reduces (a stuck rank)
 *   stop           rank 1 stops itself with SIGSTOP before the step (a stuck rank)
 *   kill           rank 1 kills itself with SIGKILL before the step (a dead rank)
 *   sleep-startup  rank 1 sleeps instead of calling ct_ddp_new (stuck before the start-up checks)
 *   sleep-allreduce  rank 1 sleeps; the others call ct_dist_all_reduce_sum on 1 MiB, which takes the
 *                  blocking path (MPI_Allreduce under the watchdog, which ends the job itself)
 *                  instead of a DDP bucket's
 * Every rank sets a 3 s timeout, wraps the mlp in ct_ddp (0.1 MiB buckets: several per step) and
 * trains one step together; then rank 1 fails and the others run a step, which must fail within the
 * timeout naming rank 1 and the collective. Each survivor prints
 *   FAULT rank R: status S after T s: MESSAGE
 *   LATER rank R: status S after T s: MESSAGE   (a later collective on the broken group: at once)
 *   FINALIZE rank R: status S: MESSAGE
 * and, a second later, ends the job with ct_dist_abort, as the CLI does. Rank 1 prints "VICTIM at E" (E: seconds
 * since the epoch) when it fails, so the driver can time how long the others took to end. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cuttle.h"

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Go away as mode says (rank 1). */
static void fail(const char *mode) {
  printf("VICTIM at %.3f: rank 1 goes %s\n", now(CLOCK_REALTIME), mode);
  fflush(stdout);
  if (strcmp(mode, "stop") == 0) raise(SIGSTOP);
  if (strcmp(mode, "kill") == 0) raise(SIGKILL);
  sleep(120);
  exit(0);
}

/* forward, backward and ct_ddp_sync_grads of one batch of 4. */
static ct_status train_step(ct_module *m, ct_ddp *d) {
  ct_generator g = ct_generator_new(11);
  ct_scope_begin();
  ct_tensor *x = ct_randn(4, (int64_t[]){4, 1, 28, 28}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  ct_tensor *y = ct_randint(1, (int64_t[]){4}, 0, 10, CT_I64, CT_DEVICE_CPU, &g);
  ct_tensor *loss = ct_cross_entropy(ct_module_forward(m, x), y, CT_REDUCTION_MEAN, 0);
  ct_status s = loss ? ct_backward(loss) : ct_last_status();
  if (s == CT_OK) s = ct_ddp_sync_grads(d);
  ct_scope_end();
  return s;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "sleep";
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (ct_dist_init() != CT_OK || ct_dist_set_timeout(3) != CT_OK) {
    fprintf(stderr, "dist_fault_worker: %s\n", ct_last_error());
    return 2;
  }
  int rank = ct_dist_rank();
  ct_generator g = ct_generator_new(7);
  ct_module *m = ct_model_new("mlp", CT_DEVICE_CPU, &g);
  if (rank == 1 && strcmp(mode, "sleep-startup") == 0) fail(mode);
  double t0 = now(CLOCK_MONOTONIC);
  ct_ddp *d = ct_ddp_new(m, &(ct_ddp_opts){.bucket_mb = 0.1});
  ct_status s = d ? CT_OK : ct_last_status();
  if (s == CT_OK) {
    s = train_step(m, d); /* all ranks together */
    if (s != CT_OK) fprintf(stderr, "dist_fault_worker rank %d: the first step failed: %s\n", rank, ct_last_error());
    if (rank == 1) fail(strcmp(mode, "sleep-allreduce") == 0 ? "sleep" : mode);
    t0 = now(CLOCK_MONOTONIC);
    if (strcmp(mode, "sleep-allreduce") == 0) {
      ct_tensor *big = ct_zeros(1, (int64_t[]){1 << 18}, CT_F32, CT_DEVICE_CPU);
      s = big ? ct_dist_all_reduce_sum(&big, 1) : ct_last_status();
      ct_tensor_free(big);
    } else
      s = train_step(m, d);
  }
  printf("FAULT rank %d: status %d after %.2f s: %s\n", rank, (int)s, now(CLOCK_MONOTONIC) - t0,
         s == CT_OK ? "no error" : ct_last_error());
  /* The group is broken: a later collective fails at once instead of waiting again. */
  ct_tensor *c = ct_full(1, (int64_t[]){1}, 1, CT_I64, CT_DEVICE_CPU);
  t0 = now(CLOCK_MONOTONIC);
  s = ct_dist_all_reduce_sum(&c, 1);
  printf("LATER rank %d: status %d after %.3f s: %s\n", rank, (int)s, now(CLOCK_MONOTONIC) - t0,
         s == CT_OK ? "no error" : ct_last_error());
  s = ct_dist_finalize();
  printf("FINALIZE rank %d: status %d: %s\n", rank, (int)s, s == CT_OK ? "no error" : ct_last_error());
  ct_tensor_free(c);
  ct_ddp_free(d);
  ct_module_free(m);
  if (s == CT_OK) return 1; /* the fault went unnoticed */
  /* As the CLI does: mpirun ends the other ranks, the stuck one included. The second's pause lets
   * the other survivor, which times out at about the same moment, print its report before mpirun
   * ends it, so that the test can check both. */
  sleep(1);
  ct_dist_abort(3);
  return 3;
}
