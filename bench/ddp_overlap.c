/* bench/ddp_overlap.c: `cuttle bench ddp-overlap`, run under mpirun: the share of DDP's all-reduce
 * time that backward hides (issue 10's target: >= 50% for the cnn).
 *
 * Three ways of taking the same training step (forward, cross-entropy, backward, gradient
 * averaging, SGD step) on the same synthetic batch, timed as the median of --steps steps each,
 * every step between barriers and the slowest rank's time kept:
 *  - compute only: no all-reduce at all (ct_ddp_set_grad_sync off), the step without communication;
 *  - serial: backward runs with grad sync off, then it is turned on and ct_ddp_sync_grads starts
 *    and waits for every bucket: the whole communication after backward, as without DDP's hooks;
 *  - overlapped: DDP as it runs in `cuttle train`, each bucket's all-reduce started by the gradient
 *    hooks during backward.
 * communication = serial - compute, exposed = overlapped - compute, hidden = 1 - exposed /
 * communication. The buckets are --bucket-mb (default 1 MiB, so that the cnn's 1.6 MiB of gradients
 * make several: one bucket cannot overlap anything, it is ready only when backward ends). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include "bench.h"
#include "cuttle/dist.h"

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench ddp-overlap [--model cnn|mlp] [--batch-size N] [--bucket-mb X] [--steps K]\n"
             "                                             [--progress-thread]\n"
             "run it under mpirun: mpirun -np N cuttle bench ddp-overlap ...\n"
             "share of the gradient all-reduce hidden behind backward: compute-only vs serial vs overlapped steps\n"
             "defaults: --model cnn --batch-size 64 (per rank) --bucket-mb 1 --steps 15; CPU tensors\n");
  return f == stdout ? 0 : 2;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

enum { COMPUTE = 0, SERIAL, OVERLAPPED };

/* One step of the given way; seconds on the slowest rank, or -1 after a failure (printed). */
static double step(ct_module *m, ct_optimizer *opt, ct_ddp *d, ct_tensor *x, ct_tensor *y, int way) {
  ct_tensor *t = ct_zeros(1, (int64_t[]){1}, CT_F64, CT_DEVICE_CPU);
  if (!t || ct_dist_all_reduce_sum(&t, 1) != CT_OK) return ct_tensor_free(t), -1; /* a barrier */
  ct_tensor_free(t);
  double t0 = ct_bench_now();
  ct_scope_begin();
  ct_status s = ct_ddp_set_grad_sync(d, way == OVERLAPPED);
  ct_tensor *loss = s == CT_OK ? ct_cross_entropy(ct_module_forward(m, x), y, CT_REDUCTION_MEAN, 0) : NULL;
  s = loss ? ct_backward(loss) : ct_last_status();
  if (s == CT_OK && way == SERIAL) s = ct_ddp_set_grad_sync(d, 1);
  if (s == CT_OK && way != COMPUTE) s = ct_ddp_sync_grads(d);
  if (s == CT_OK) s = ct_optimizer_step(opt);
  ct_optimizer_zero_grad(opt);
  ct_scope_end();
  double dt = ct_bench_now() - t0;
  if (s != CT_OK) {
    fprintf(stderr, "cuttle bench ddp-overlap: rank %d: %s\n", ct_dist_rank(), ct_last_error());
    return -1;
  }
  /* the slowest rank's time: each rank writes its own slot of a zero vector, the sum gathers them */
  int world = ct_dist_world_size();
  ct_tensor *v = ct_zeros(1, (int64_t[]){world}, CT_F64, CT_DEVICE_CPU);
  double worst = -1;
  if (v) {
    double *p = ct_tensor_data(v);
    p[ct_dist_rank()] = dt;
    if (ct_dist_all_reduce_sum(&v, 1) == CT_OK)
      for (int r = 0; r < world; r++) worst = p[r] > worst ? p[r] : worst;
  }
  ct_tensor_free(v);
  return worst;
}

int ct_bench_ddp_overlap(int argc, char **argv) {
  const char *model = "cnn";
  int64_t batch = 64;
  double bucket_mb = 1;
  int steps = 15, progress_thread = 0;
  const ct_bench_opt opts[] = {{.name = "model", .dst = &model},
                               {.name = "batch-size", .kind = CT_BENCH_I64, .dst = &batch},
                               {.name = "bucket-mb", .kind = CT_BENCH_DOUBLE, .dst = &bucket_mb},
                               {.name = "steps", .kind = CT_BENCH_INT, .dst = &steps},
                               {.name = "progress-thread", .kind = CT_BENCH_FLAG, .dst = &progress_thread, .value = 1},
                               {0}};
  int parsed = ct_bench_parse(argc, argv, 0, NULL, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  if (batch < 1 || steps < 3 || !(bucket_mb > 0)) return usage(stderr);
  if (ct_dist_init() != CT_OK) {
    fprintf(stderr, "cuttle bench ddp-overlap: %s\n", ct_last_error());
    return 1;
  }
  int rc = 0, rank = ct_dist_rank(), world = ct_dist_world_size();
  if (world < 2) {
    if (rank == 0) fprintf(stderr, "cuttle bench ddp-overlap: run it under mpirun with 2 or more ranks\n");
    ct_dist_finalize();
    return 2;
  }
  ct_generator gen = ct_generator_new(1 + (uint64_t)rank);
  ct_module *m = ct_model_new(model, CT_DEVICE_CPU, &gen);
  ct_optimizer *opt = m ? ct_optimizer_new(m, &(ct_optim_opts){.kind = CT_OPTIM_SGD, .lr = 1e-3}) : NULL;
  ct_ddp *d = opt ? ct_ddp_new(m, &(ct_ddp_opts){.bucket_mb = bucket_mb, .progress_thread = progress_thread}) : NULL;
  int64_t xs[4] = {batch, 1, 28, 28};
  ct_tensor *x = d ? ct_randn(4, xs, 0, 1, CT_F32, CT_DEVICE_CPU, &gen) : NULL;
  ct_tensor *y = x ? ct_randint(1, &batch, 0, 10, CT_I64, CT_DEVICE_CPU, &gen) : NULL;
  double *t[3] = {calloc((size_t)steps, sizeof(double)), calloc((size_t)steps, sizeof(double)),
                  calloc((size_t)steps, sizeof(double))};
  if (!y || !t[0] || !t[1] || !t[2]) {
    fprintf(stderr, "cuttle bench ddp-overlap: rank %d: %s\n", rank, ct_last_error());
    ct_dist_abort(1);
    return 1;
  }
  ct_ddp_stats st0, st1;
  ct_ddp_get_stats(d, &st0);
  for (int w = 0; w < 3 && !rc; w++) rc = step(m, opt, d, x, y, w) < 0; /* warm-up */
  double wait[3] = {0}, sync[3] = {0};
  for (int i = 0; i < steps && !rc; i++)
    for (int w = 0; w < 3 && !rc; w++) {
      ct_ddp_stats a, b;
      ct_ddp_get_stats(d, &a);
      rc = (t[w][i] = step(m, opt, d, x, y, w)) < 0;
      ct_ddp_get_stats(d, &b);
      wait[w] += b.wait_s - a.wait_s, sync[w] += b.sync_s - a.sync_s;
    }
  ct_ddp_get_stats(d, &st1);
  if (rc) ct_dist_abort(1);
  if (rank == 0) {
    double med[3];
    for (int w = 0; w < 3; w++) {
      qsort(t[w], (size_t)steps, sizeof(double), cmp_double);
      med[w] = t[w][steps / 2];
    }
    double comm = med[SERIAL] - med[COMPUTE], exposed = med[OVERLAPPED] - med[COMPUTE];
    printf("ddp-overlap: %s, %d ranks x batch %lld, %d bucket(s) of %g MiB, median of %d steps (CPU tensors)%s\n", model,
           world, (long long)batch, ct_ddp_num_buckets(d), bucket_mb, steps, progress_thread ? ", progress thread" : "");
    printf("  compute only  %8.2f ms\n  serial        %8.2f ms   (communication %.2f ms)\n"
           "  overlapped    %8.2f ms   (exposed %.2f ms)\n",
           med[COMPUTE] * 1e3, med[SERIAL] * 1e3, comm * 1e3, med[OVERLAPPED] * 1e3, exposed * 1e3);
    printf("  rank 0 in ct_ddp_sync_grads per step: serial %.2f ms (waiting %.2f), overlapped %.2f ms (waiting %.2f)\n",
           sync[SERIAL] / steps * 1e3, wait[SERIAL] / steps * 1e3, sync[OVERLAPPED] / steps * 1e3,
           wait[OVERLAPPED] / steps * 1e3);
    int64_t in_bw = st1.buckets_started_in_backward - st0.buckets_started_in_backward;
    printf("  hidden behind backward: %.0f%%   (buckets started in backward: %lld of %lld; complete before the sync: "
           "%lld of those)\n",
           comm > 0 ? 100.0 * (1.0 - exposed / comm) : 0.0, (long long)in_bw,
           (long long)(in_bw + st1.buckets_started_in_sync - st0.buckets_started_in_sync),
           (long long)(st1.buckets_done_in_backward - st0.buckets_done_in_backward));
  }
  free(t[0]), free(t[1]), free(t[2]);
  ct_tensor_free(x), ct_tensor_free(y);
  ct_ddp_free(d), ct_optimizer_free(opt), ct_module_free(m);
  ct_dist_finalize();
  return rc;
}
