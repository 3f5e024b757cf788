/* bench/two_devices.c: `cuttle bench two-devices`: the d2l exercise of running two matrix products
 * on two devices at once. Each device gets its own inputs (n x n, float32) and a job of --count
 * matmuls; the job is timed four ways, each sample ending when every device has synchronized:
 *  - one device, one after the other: both jobs on the first device (the baseline);
 *  - two devices, one after the other: job 1 on device 1, wait, job 2 on device 2, wait;
 *  - two devices, queued: both jobs queued (ops return once queued), then one ct_synchronize each;
 *  - two devices, one host thread per device: each thread queues its job and waits for its device.
 * "speedup" is the baseline's time over each variant's. With two GPUs of their own the two last
 * ways approach 2x; two PoCL devices share the same CPU cores, so there they cannot. The results of
 * both devices are checked against the CPU's product before anything is timed. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"

typedef struct {
  ct_device dev;
  ct_tensor *a, *b; /* (n, n) on dev */
  int count;
  int rc;
} job;

/* count matmuls on the job's device, queued and not waited for; each result is freed at once, which
 * an in-order queue allows (the caching allocator hands the block to the next product). */
static int queue_job(job *j) {
  for (int i = 0; i < j->count; i++) {
    ct_tensor *c = ct_matmul(j->a, j->b);
    if (!c) return 1;
    ct_tensor_free(c);
  }
  return 0;
}

static int wait_dev(ct_device d) { return d.kind != CT_CPU && ct_synchronize(d) != CT_OK; }

typedef struct {
  job one[2]; /* both jobs on the first device */
  job two[2]; /* job k on device k */
} td_ctx;

static int run_one_device(void *p) {
  td_ctx *t = p;
  return queue_job(&t->one[0]) || queue_job(&t->one[1]) || wait_dev(t->one[0].dev);
}

static int run_two_serial(void *p) {
  td_ctx *t = p;
  return queue_job(&t->two[0]) || wait_dev(t->two[0].dev) || queue_job(&t->two[1]) || wait_dev(t->two[1].dev);
}

static int run_two_queued(void *p) {
  td_ctx *t = p;
  return queue_job(&t->two[0]) || queue_job(&t->two[1]) || wait_dev(t->two[0].dev) || wait_dev(t->two[1].dev);
}

static void *thread_main(void *p) {
  job *j = p;
  j->rc = queue_job(j) || wait_dev(j->dev);
  return NULL;
}

static int run_two_threads(void *p) {
  td_ctx *t = p;
  pthread_t th;
  if (pthread_create(&th, NULL, thread_main, &t->two[1]) != 0) return 1;
  thread_main(&t->two[0]);
  pthread_join(th, NULL);
  return t->two[0].rc || t->two[1].rc;
}

static int usage(FILE *f) {
  fprintf(f,
          "usage: cuttle bench two-devices [--devices A,B] [--size N] [--count N] [--quick] [--csv FILE]\n"
          "defaults: --devices: the first two GPUs (cuda, then opencl GPUs), else opencl:0,opencl:1;\n"
          "          --size 1024 --count 2 (--quick: --size 256)\n"
          "two OpenCL devices on one CPU: POCL_DEVICES=\"pthread pthread\" makes PoCL show two (they share the cores)\n");
  return f == stdout ? 0 : 2;
}

/* Parse "A,B" into two devices that exist; prints why not and returns nonzero. */
static int parse_devices(const char *s, ct_device out[2]) {
  const char *comma = strchr(s, ',');
  char first[64];
  if (!comma || (size_t)(comma - s) >= sizeof first) {
    fprintf(stderr, "cuttle bench two-devices: --devices wants two devices separated by a comma, got \"%s\"\n", s);
    return 1;
  }
  memcpy(first, s, (size_t)(comma - s));
  first[comma - s] = 0;
  if (ct_bench_device(first, &out[0]) || ct_bench_device(comma + 1, &out[1])) return 1;
  if (ct_device_eq(out[0], out[1]) || out[0].kind == CT_CPU || out[1].kind == CT_CPU) {
    fprintf(stderr, "cuttle bench two-devices: --devices wants two different non-CPU devices, got \"%s\"\n", s);
    return 1;
  }
  return 0;
}

/* The default pair: two GPUs when there are two, else the first two OpenCL devices. */
static int default_devices(ct_device out[2]) {
  ct_device gpus[2];
  if (ct_try_all_gpus(gpus, 2) >= 2) return out[0] = gpus[0], out[1] = gpus[1], 0;
  int n = ct_device_count(CT_OPENCL);
  if (n >= 2) return out[0] = CT_DEVICE_OPENCL(0), out[1] = CT_DEVICE_OPENCL(1), 0;
  fprintf(stderr,
          "cuttle bench two-devices: needs two devices; this machine has %d cuda and %d opencl device(s).\n"
          "With PoCL, set POCL_DEVICES=\"pthread pthread\" to get two OpenCL devices (they share the CPU's cores),\n"
          "or name two with --devices A,B.\n",
          ct_device_count(CT_CUDA), n);
  return 1;
}

/* max |C_dev - C_cpu| of one product on dev, for the check before timing. */
static double check_product(job *j, ct_tensor *ha, ct_tensor *hb) {
  double diff = NAN;
  ct_scope_begin();
  ct_tensor *ref = ct_matmul(ha, hb);
  ct_tensor *got = ct_to(ct_matmul(j->a, j->b), CT_DEVICE_CPU, 0);
  ct_tensor *d = ct_max(ct_max(ct_abs(ct_sub(got, ref)), 1, 0, NULL), 0, 0, NULL);
  if (d) diff = ct_item(d);
  ct_scope_end();
  return diff;
}

int ct_bench_two_devices(int argc, char **argv) {
  ct_bench_common common = {0};
  const char *devices = NULL;
  int size = 0, count = 2;
  const ct_bench_opt opts[] = {{.name = "devices", .dst = &devices},
                               {.name = "size", .kind = CT_BENCH_INT, .dst = &size},
                               {.name = "count", .kind = CT_BENCH_INT, .dst = &count},
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_CSV | CT_BENCH_QUICK, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  const char *csv = common.csv;
  int quick = common.quick;
  if (size <= 0) size = quick ? 256 : 1024;
  if (count < 1) {
    fprintf(stderr, "cuttle bench two-devices: --count must be >= 1\n");
    return 2;
  }
  ct_device dev[2];
  if (devices ? parse_devices(devices, dev) : default_devices(dev)) return 2;
  char n0[32], n1[32], title[200];
  ct_device_str(dev[0], n0, sizeof n0), ct_device_str(dev[1], n1, sizeof n1);
  snprintf(title, sizeof title, "two-devices: %d matmul(s) of %d x %d float32 per job, two jobs, on %s and %s", count, size,
           size, n0, n1);
  const char *heads[] = {"how", "median ms", "min ms", "max ms", "speedup vs one device"};
  ct_bench_table *t = ct_bench_table_new(title, 5, heads);
  ct_generator gen = ct_generator_new(5);
  int64_t s2[2] = {size, size};
  ct_scope_begin();
  ct_tensor *ha = ct_randn(2, s2, 0, 1, CT_F32, CT_DEVICE_CPU, &gen), *hb = ct_randn(2, s2, 0, 1, CT_F32, CT_DEVICE_CPU, &gen);
  td_ctx c;
  for (int k = 0; k < 2; k++) {
    c.one[k] = (job){.dev = dev[0], .a = ct_to(ha, dev[0], 0), .b = ct_to(hb, dev[0], 0), .count = count};
    c.two[k] = (job){.dev = dev[k], .a = ct_to(ha, dev[k], 0), .b = ct_to(hb, dev[k], 0), .count = count};
  }
  int status = !ha || !hb || !c.one[0].a || !c.one[0].b || !c.one[1].a || !c.one[1].b || !c.two[1].a || !c.two[1].b;
  double diff[2] = {NAN, NAN};
  for (int k = 0; k < 2 && !status; k++) {
    diff[k] = check_product(&c.two[k], ha, hb);
    /* float32 sums of n products of unit normals: a loose bound that still catches a wrong product */
    if (!(diff[k] <= 1e-3 * size)) {
      fprintf(stderr, "cuttle bench two-devices: the product on %s differs from the CPU's by %g\n", k ? n1 : n0, diff[k]);
      status = 1;
    }
  }
  static const char *names[] = {"one device, one job after the other", "two devices, one after the other",
                                "two devices, queued, then a sync each", "two devices, a host thread each"};
  ct_bench_fn fns[] = {run_one_device, run_two_serial, run_two_queued, run_two_threads};
  double base = 0;
  ct_bench_opts bo = {.warmup = 1, .min_repeats = quick ? 3 : 5, .max_repeats = quick ? 5 : 9, .target_s = 1e-9};
  for (int i = 0; i < 4 && !status; i++) {
    ct_bench_result r;
    /* every variant synchronizes its own devices, so the timer's device is the CPU (no extra wait) */
    if (ct_bench_time(fns[i], &c, CT_DEVICE_CPU, &bo, &r)) {
      fprintf(stderr, "cuttle bench two-devices: %s failed: %s\n", names[i], ct_last_error());
      status = 1;
      break;
    }
    if (i == 0) base = r.median;
    /* with at most 10 samples ct_bench_time's p90 is the largest sample */
    ct_bench_table_rowf(t, "%s|%.2f|%.2f|%.2f|%.2fx", names[i], r.median * 1e3, r.min * 1e3, r.p90 * 1e3,
                        base / r.median);
  }
  ct_scope_end();
  ct_bench_table_print(t, stdout);
  if (!status)
    printf("max |C - C_cpu|: %.3g on %s, %.3g on %s. Two devices that share hardware (two PoCL devices on one CPU)\n"
           "cannot beat one: only devices with their own cores or SMs can run the two jobs at once.\n",
           diff[0], n0, diff[1], n1);
  if (ct_bench_table_csv(t, csv)) status = 1; /* what was measured, also after a failure */
  ct_bench_table_free(t);
  return status;
}
