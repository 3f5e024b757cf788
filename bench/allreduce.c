/* bench/allreduce.c: `cuttle bench allreduce`, run under mpirun: the bus bandwidth of cuttle's
 * all-reduce (ct_dist_all_reduce_sum on float32 CPU tensors) against MPI_Allreduce called directly
 * on the same buffers, for messages of 4 KiB to 256 MiB.
 *
 * Bandwidth as nccl-tests defines it (nccl-tests' doc/PERFORMANCE.md): algbw = bytes / time and
 * busbw = algbw * 2 (n - 1) / n for n ranks, the share of a ring all-reduce's traffic each link
 * carries, comparable across rank counts. A sample is one call timed on every rank between barriers,
 * the slowest rank's time kept (all ranks must finish an all-reduce); each size reports the median
 * of its samples. The ways alternate sample by sample, so a machine that slows down mid-run
 * weighs on all. "ratio" is cuttle's busbw over MPI's: issue 10's target is >= 0.95. A third
 * column times MPI_Iallreduce completed by an MPI_Test loop, what DDP's buckets run on (Open MPI's
 * libnbc, whose algorithm ct_dist_init chooses unless OMPI_MCA_coll_libnbc_iallreduce_algorithm is
 * set: run it with that variable at 0 to see libnbc's own choice).
 *
 * The buffers hold zeros during timing (repeated in-place sums of zeros stay zeros: no overflow and
 * no refill between samples); before timing, one all-reduce of rank-dependent values is checked. */
#define _GNU_SOURCE
#include <sched.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"
#include "cuttle/dist.h"
#ifdef CUTTLE_WITH_MPI
#include <mpi.h>
#endif

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench allreduce [--min BYTES] [--max BYTES] [--samples K] [--quick] [--csv FILE]\n"
             "run it under mpirun: mpirun -np N cuttle bench allreduce ...\n"
             "bus bandwidth (nccl-tests' busbw) of ct_dist_all_reduce_sum vs MPI_Allreduce on the same float32\n"
             "CPU buffers, sizes from --min (4096) to --max (268435456) by factors of 4; --quick stops at 16 MiB.\n"
             "As root, mpirun needs --allow-run-as-root; more ranks than cores need --oversubscribe.\n");
  return f == stdout ? 0 : 2;
}

#ifdef CUTTLE_WITH_MPI

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One all-reduce of t, cuttle's way (way 0), MPI_Allreduce (way 1) or MPI_Iallreduce completed by
 * an MPI_Test loop (way 2: what DDP's buckets run on), timed between barriers; the slowest rank's
 * seconds, or a negative number on failure (every rank then fails: the check is collective). */
static double sample(ct_tensor *t, int way) {
  int64_t n = ct_tensor_numel(t);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  int ok;
  if (way == 0) ok = ct_dist_all_reduce_sum(&t, 1) == CT_OK;
  else if (way == 1) ok = MPI_Allreduce(MPI_IN_PLACE, ct_tensor_data(t), (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS;
  else {
    MPI_Request req;
    int done = 0;
    ok = MPI_Iallreduce(MPI_IN_PLACE, ct_tensor_data(t), (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req) == MPI_SUCCESS;
    while (ok && !done) {
      ok = MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS;
      if (!done) sched_yield();
    }
  }
  double dt = MPI_Wtime() - t0, worst = 0;
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return all_ok ? worst : -1;
}

/* Rank r holds r + 1 everywhere; after the sum every element is n (n + 1) / 2. */
static int check_sum(int64_t numel, int world) {
  ct_tensor *t = ct_full(1, &numel, (double)(ct_dist_rank() + 1), CT_F32, CT_DEVICE_CPU);
  int ok = t && ct_dist_all_reduce_sum(&t, 1) == CT_OK;
  const float *p = ok ? ct_tensor_data(t) : NULL;
  float want = (float)world * (float)(world + 1) / 2.0f;
  for (int64_t i = 0; ok && i < numel; i++) ok = p[i] == want;
  if (!ok) fprintf(stderr, "cuttle bench allreduce: rank %d: the sum check failed: %s\n", ct_dist_rank(), ct_last_error());
  ct_tensor_free(t);
  return ok;
}

int ct_bench_allreduce(int argc, char **argv) {
  ct_bench_common common = {0};
  int64_t lo = 4096, hi = 268435456;
  int samples = 0;
  const ct_bench_opt opts[] = {{.name = "min", .kind = CT_BENCH_I64, .dst = &lo},
                               {.name = "max", .kind = CT_BENCH_I64, .dst = &hi},
                               {.name = "samples", .kind = CT_BENCH_INT, .dst = &samples},
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_CSV | CT_BENCH_QUICK, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  const char *csv = common.csv;
  int quick = common.quick;
  if (quick && hi > 16 << 20) hi = 16 << 20;
  if (lo < 4 || hi < lo) {
    fprintf(stderr, "cuttle bench allreduce: need 4 <= --min <= --max bytes\n");
    return 2;
  }
  if (ct_dist_init() != CT_OK) {
    fprintf(stderr, "cuttle bench allreduce: %s\n", ct_last_error());
    return 1;
  }
  int world = ct_dist_world_size(), rank = ct_dist_rank(), rc = 0;
  if (world < 2) {
    if (rank == 0) fprintf(stderr, "cuttle bench allreduce: run it under mpirun with 2 or more ranks (mpirun -np 2 cuttle bench allreduce)\n");
    ct_dist_finalize();
    return 2;
  }
  static const char *headers[] = {"bytes", "cuttle busbw GB/s", "MPI busbw GB/s", "ratio", "cuttle us", "MPI us",
                                  "Iallreduce us"};
  char title[128];
  snprintf(title, sizeof title, "all-reduce (sum, float32, CPU tensors), %d ranks: busbw = bytes/time * 2(n-1)/n", world);
  ct_bench_table *tab = rank == 0 ? ct_bench_table_new(title, 7, headers) : NULL;
  if (!check_sum(1000, world)) rc = 1;
  for (int64_t bytes = lo; bytes <= hi && !rc; bytes *= 4) {
    int64_t numel = bytes / 4;
    ct_tensor *t = ct_zeros(1, &numel, CT_F32, CT_DEVICE_CPU);
    if (!t) {
      fprintf(stderr, "cuttle bench allreduce: rank %d: %s\n", rank, ct_last_error());
      rc = 1; /* the other ranks then wait in a barrier: mpirun ends them when this one exits non-zero */
      break;
    }
    /* about 0.5 s of samples per way, at least 5 and at most 200 */
    int k = samples > 0 ? samples : 0;
    double first = sample(t, 1);
    if (first < 0) rc = 1;
    if (!k) k = first > 0 ? (int)fmin(200, fmax(5, 0.5 / first)) : 5;
    double *ts[3] = {calloc((size_t)k, sizeof(double)), calloc((size_t)k, sizeof(double)),
                     calloc((size_t)k, sizeof(double))};
    if (!ts[0] || !ts[1] || !ts[2]) rc = 1;
    sample(t, 0); /* warm-up of cuttle's path */
    for (int i = 0; i < k && !rc; i++)
      for (int way = 0; way < 3 && !rc; way++)
        if ((ts[way][i] = sample(t, way)) < 0) rc = 1;
    if (!rc && tab) {
      double m0 = median(ts[0], k), m1 = median(ts[1], k), m2 = median(ts[2], k), f = 2.0 * (world - 1) / world;
      double bw0 = (double)bytes / m0 * f / 1e9, bw1 = (double)bytes / m1 * f / 1e9;
      char b[32];
      ct_bench_table_rowf(tab, "%s|%.3f|%.3f|%.3f|%.1f|%.1f|%.1f", ct_bench_bytes((size_t)bytes, b, sizeof b), bw0, bw1,
                          bw0 / bw1, m0 * 1e6, m1 * 1e6, m2 * 1e6);
    }
    if (rc && rank == 0) fprintf(stderr, "cuttle bench allreduce: an all-reduce failed: %s\n", ct_last_error());
    free(ts[0]), free(ts[1]), free(ts[2]);
    ct_tensor_free(t);
  }
  if (tab) {
    ct_bench_table_print(tab, stdout);
    if (!rc && ct_bench_table_csv(tab, csv)) rc = 1;
    ct_bench_table_free(tab);
  }
  ct_dist_finalize();
  return rc;
}

#else

int ct_bench_allreduce(int argc, char **argv) {
  (void)argv;
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) return usage(stdout);
  fprintf(stderr, "cuttle bench allreduce: cuttle was built without MPI; apt-get install libopenmpi-dev openmpi-bin "
                  "(scripts/deps.sh does it) and rebuild\n");
  return 1;
}

#endif
