/* tests/api/test_api_errors.c: bad arguments to the public API are errors, not crashes.
 *
 * One table calls every function declared in the headers include/cuttle/<layer>.h with what a caller gets wrong:
 * NULL handles, strings and output pointers; a dtype the function does not take; a device that
 * does not exist (cuda:7 with no GPU, cpu:3, cpu:-1, an invalid kind); negative sizes and sizes
 * whose product overflows int64; shapes that do not fit; arguments on different devices (made by
 * relabelling one tensor as cuda:7, which cannot otherwise exist here). Each row names the
 * function, the expected outcome (a NULL result, a negative status, a sentinel value) and the
 * status code, and checks that ct_last_error() then names the function that was called (an error
 * raised a layer down must not reach the caller under the inner op's name alone), and for the
 * ...A rows also the argument at fault. Rows marked N call a
 * function documented as never failing and check its documented result; they only have to not
 * crash. The sanitizer build runs this file under ASan and UBSan (which halts on signed overflow),
 * so a size that overflows must be caught before anything multiplies it.
 *
 * The last test reads the headers and fails when a declared ct_ function has no row, so a new
 * function needs a row here (or an entry in `excluded`, with the reason). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "core/internal.h"

/* ---- the checks behind each row */

static int n_rows, n_bad;
static const char *covered[1024];
static int n_covered;

static void cover(const char *fn) {
  for (int i = 0; i < n_covered; i++)
    if (strcmp(covered[i], fn) == 0) return;
  if (n_covered < (int)(sizeof covered / sizeof covered[0])) covered[n_covered++] = fn;
}

static void report(int line, const char *call, const char *why) {
  fprintf(stderr, "test_api_errors.c:%d: %s: %s (status %d, message \"%s\")\n", line, call, why, (int)ct_last_status(),
          ct_last_error());
  n_bad++;
}

/* The error left by a failed call: status code (0: any negative code) and a message naming needle
 * (the function's name without its ct_ prefix, unless the row gives another) and, when the row
 * gives one, also (the argument, option or dtype at fault). */
static void check_error(int line, const char *call, ct_status code, const char *needle, const char *also) {
  ct_status s = ct_last_status();
  if (s >= 0) return report(line, call, "no error status set");
  if (code && s != code) {
    char why[96];
    snprintf(why, sizeof why, "expected status %d (%s)", (int)code, ct_status_str(code));
    return report(line, call, why);
  }
  if (!ct_last_error()[0]) return report(line, call, "empty error message");
  const char *want[2] = {needle, also};
  for (int i = 0; i < 2; i++)
    if (want[i] && !strstr(ct_last_error(), want[i])) {
      char why[160];
      snprintf(why, sizeof why, "the message does not name \"%s\"", want[i]);
      return report(line, call, why);
    }
}

static const char *stem(const char *fn) { return strncmp(fn, "ct_", 3) == 0 ? fn + 3 : fn; }

static void row_tensor(int line, const char *fn, const char *call, ct_tensor *r, ct_status code, const char *needle,
                       const char *also) {
  n_rows++;
  cover(fn);
  if (r) {
    ct_tensor_free(r);
    return report(line, call, "returned a tensor, expected NULL");
  }
  check_error(line, call, code, needle ? needle : stem(fn), also);
}

static void row_ptr(int line, const char *fn, const char *call, const void *r, ct_status code, const char *needle,
                    const char *also) {
  n_rows++;
  cover(fn);
  if (r) return report(line, call, "returned non-NULL, expected NULL");
  check_error(line, call, code, needle ? needle : stem(fn), also);
}

static void row_status(int line, const char *fn, const char *call, long long r, ct_status code, const char *needle,
                       const char *also) {
  n_rows++;
  cover(fn);
  if (r >= 0) return report(line, call, "returned a non-negative status");
  if (r != ct_last_status()) return report(line, call, "the returned status differs from ct_last_status()");
  check_error(line, call, code, needle ? needle : stem(fn), also);
}

static void row_value(int line, const char *fn, const char *call, int ok, ct_status code, const char *needle,
                      const char *also) {
  n_rows++;
  cover(fn);
  if (!ok) return report(line, call, "did not return the documented error value");
  check_error(line, call, code, needle ? needle : stem(fn), also);
}

static void row_never_fails(int line, const char *fn, const char *call, int ok) {
  n_rows++;
  cover(fn);
  if (!ok) report(line, call, "did not return the documented value");
}

/* T: returns NULL (a tensor, freed if not). P: returns NULL (another pointer). S: returns a negative
 * status (or count). V: a void call or a value check `ok` that must hold after the call. D: returns
 * NaN. The ...N forms name the text the message must contain instead of the function's name; the
 * ...A forms name text it must contain besides it (the argument at fault). N: never fails; `ok`
 * must hold. */
/* Clear the error before a row; with CT_API_ERRORS_TRACE set, print the row's line first (to find
 * the row that crashed). */
static void start(int line) {
  static int trace = -1;
  if (trace < 0) trace = getenv("CT_API_ERRORS_TRACE") != NULL;
  if (trace) fprintf(stderr, "row at line %d\n", line);
  ct_clear_error();
}

#define T(fn, code, call) (start(__LINE__), row_tensor(__LINE__, #fn, #call, (call), code, NULL, NULL))
#define TN(fn, code, needle, call) (start(__LINE__), row_tensor(__LINE__, #fn, #call, (call), code, needle, NULL))
#define TA(fn, code, also, call) (start(__LINE__), row_tensor(__LINE__, #fn, #call, (call), code, NULL, also))
#define P(fn, code, call) (start(__LINE__), row_ptr(__LINE__, #fn, #call, (call), code, NULL, NULL))
#define PA(fn, code, also, call) (start(__LINE__), row_ptr(__LINE__, #fn, #call, (call), code, NULL, also))
#define S(fn, code, call) (start(__LINE__), row_status(__LINE__, #fn, #call, (long long)(call), code, NULL, NULL))
#define SN(fn, code, needle, call) (start(__LINE__), row_status(__LINE__, #fn, #call, (long long)(call), code, needle, NULL))
#define V(fn, code, ok) (start(__LINE__), row_value(__LINE__, #fn, #ok, (ok), code, NULL, NULL))
#define D(fn, code, call) (start(__LINE__), row_value(__LINE__, #fn, #call, isnan(call), code, NULL, NULL))
#define N(fn, ok) (start(__LINE__), row_never_fails(__LINE__, #fn, #ok, (ok)))

/* Run a void call, then yield 1 so that V can check the error it left. */
#define DO(call) ((call), 1)

/* ---- fixtures */

static const ct_device cuda7 = {CT_CUDA, 7}, cpu3 = {CT_CPU, 3}, cpu_neg = {CT_CPU, -1},
                       bad_kind = {(ct_device_kind)99, 0};
static const int64_t s23[2] = {2, 3}, s_neg[2] = {2, -3}, s_over[2] = {INT64_MAX / 2, 4},
                     s_over3[3] = {INT64_MAX / 4, 2, 2}, s_bytes[1] = {INT64_MAX / 2};

static struct {
  char *dir;
  ct_tensor *a, *b, *i64, *i64t, *x4i, *w4i, *lab, *labf, *x4, *w4, *b3, *fake, *r1, *scalar, *f64, *neg3;
  ct_module *lin, *seq;
  ct_optimizer *opt;
  ct_dataset *ds;
  ct_loader *loader;
  ct_safetensors *st;
  ct_stream *stream;
  ct_event *ev;
  ct_monitor_snapshot *snap;
  ct_idx idx;
} F;

static int setup(void **state) {
  (void)state;
  ct_generator g = ct_generator_new(5);
  F.dir = ct_test_tmpdir();
  F.a = ct_randn(2, s23, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  F.b = ct_randn(2, s23, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  F.f64 = ct_randn(2, s23, 0, 1, CT_F64, CT_DEVICE_CPU, &g);
  F.i64 = ct_randint(2, s23, 0, 3, CT_I64, CT_DEVICE_CPU, &g);
  F.i64t = ct_randint(2, (int64_t[]){3, 2}, 0, 3, CT_I64, CT_DEVICE_CPU, &g);
  F.x4i = ct_randint(4, (int64_t[]){1, 2, 4, 4}, 0, 3, CT_I64, CT_DEVICE_CPU, &g);
  F.w4i = ct_randint(4, (int64_t[]){3, 2, 3, 3}, 0, 3, CT_I64, CT_DEVICE_CPU, &g);
  F.lab = ct_randint(1, (int64_t[]){2}, 0, 3, CT_I64, CT_DEVICE_CPU, &g);
  F.labf = ct_randn(1, (int64_t[]){2}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  F.x4 = ct_randn(4, (int64_t[]){1, 2, 4, 4}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  F.w4 = ct_randn(4, (int64_t[]){3, 2, 3, 3}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  F.b3 = ct_randn(1, (int64_t[]){3}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  F.r1 = ct_randn(1, (int64_t[]){4}, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  F.scalar = ct_scalar(2, CT_F32, CT_DEVICE_CPU);
  F.neg3 = ct_full(1, (int64_t[]){3}, -1, CT_F32, CT_DEVICE_CPU);
  /* A CPU tensor relabelled as living on cuda:7, for the device checks of ops with several inputs
   * (it never reaches a kernel: those checks come first). teardown restores its device. */
  F.fake = ct_randn(2, s23, 0, 1, CT_F32, CT_DEVICE_CPU, &g);
  F.lin = ct_linear_new(3, 2, 1, CT_DEVICE_CPU, &g);
  F.seq = ct_sequential_new(2, (ct_module *[]){ct_linear_new(3, 2, 1, CT_DEVICE_CPU, &g), ct_relu_new()});
  F.opt = ct_optimizer_new(F.lin, &(ct_optim_opts){.kind = CT_OPTIM_ADAM});
  uint8_t px[4 * 4] = {0};
  int64_t labels[4] = {0, 1, 0, 1};
  F.ds = ct_dataset_from_u8(px, labels, 4, 1, 2, 2, 2, 0.5f, 0.5f);
  F.loader = ct_loader_new(F.ds, &(ct_loader_opts){.batch_size = 2});
  char path[4096];
  snprintf(path, sizeof path, "%s/t.safetensors", F.dir ? F.dir : "/tmp");
  if (ct_safetensors_save(path, 1, (const char *[]){"a"}, &F.a, 1, &(ct_metadata_kv){"k", "v"}) == CT_OK)
    F.st = ct_safetensors_open(path);
  F.stream = ct_stream_new(CT_DEVICE_CPU);
  F.ev = ct_event_record(CT_DEVICE_CPU);
  F.snap = ct_monitor_snapshot_new(NULL);
  static const uint8_t idx_bytes[] = {0, 0, 8, 1, 0, 0, 0, 2, 7, 9};
  ct_status is = ct_idx_parse(idx_bytes, sizeof idx_bytes, "fixture", &F.idx);
  if (!F.dir || !F.a || !F.b || !F.f64 || !F.i64 || !F.i64t || !F.x4i || !F.w4i || !F.lab || !F.labf || !F.x4 || !F.w4 || !F.b3 || !F.r1 || !F.scalar || !F.neg3 ||
      !F.fake || !F.lin || !F.seq || !F.opt || !F.ds || !F.loader || !F.st || !F.stream || !F.ev || !F.snap || is != CT_OK) {
    fprintf(stderr, "setup failed: %s\n", ct_last_error());
    return -1;
  }
  F.fake->device = cuda7;
  return 0;
}

/* ct_clamp(x, lo, hi) with lo > hi succeeds and every element is hi (torch.clamp). */
static int clamp_gives_hi(ct_tensor *x, double lo, double hi) {
  ct_tensor *c = ct_clamp(x, lo, hi);
  float v[6];
  int ok = c && ct_tensor_numel(c) == 6 && ct_to_host(c, v, sizeof v, CT_F32) == CT_OK;
  for (int k = 0; ok && k < 6; k++) ok = v[k] == (float)hi;
  ct_tensor_free(c);
  return ok;
}

static int teardown(void **state) {
  (void)state;
  if (F.fake) F.fake->device = CT_DEVICE_CPU;
  ct_tensor *ts[] = {F.a, F.b, F.f64, F.i64, F.i64t, F.x4i, F.w4i, F.lab, F.labf, F.x4, F.w4, F.b3, F.r1, F.scalar, F.fake, F.neg3};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) ct_tensor_free(ts[i]);
  ct_loader_free(F.loader);
  ct_dataset_free(F.ds);
  ct_optimizer_free(F.opt);
  ct_module_free(F.lin);
  ct_module_free(F.seq);
  ct_safetensors_close(F.st);
  ct_event_free(F.ev);
  ct_stream_free(F.stream);
  ct_monitor_snapshot_free(F.snap);
  ct_idx_free(&F.idx);
  if (F.dir) ct_test_rmdir(F.dir);
  return 0;
}

/* The version string ct_version() must return, built from version.h's macros. */
#define CT__TEST_STR2(x) #x
#define CT__TEST_STR(x) CT__TEST_STR2(x)
#define CT__TEST_VERSION_STR \
  CT__TEST_STR(CT_VERSION_MAJOR) "." CT__TEST_STR(CT_VERSION_MINOR) "." CT__TEST_STR(CT_VERSION_PATCH)

/* ---- version.h, status.h, device.h */
static void test_status_device(void **state) {
  (void)state;
  ct_device d;
  ct_device_props props;
  char buf[32];
  N(ct_version, strcmp(ct_version(), CT__TEST_VERSION_STR) == 0);
  N(ct_status_str, strcmp(ct_status_str((ct_status)12345), "unknown status") == 0);
  N(ct_last_error, ct_last_error() != NULL);
  N(ct_last_status, ct_last_status() == CT_OK);
  N(ct_clear_error, DO(ct_clear_error()) && ct_last_error()[0] == 0);

  S(ct_device_parse, CT_EINVAL, ct_device_parse(NULL, &d));
  S(ct_device_parse, CT_EINVAL, ct_device_parse("cpu", NULL));
  S(ct_device_parse, CT_EINVAL, ct_device_parse("cuda:-1", &d));
  S(ct_device_parse, CT_EINVAL, ct_device_parse("cuda:99999999999", &d));
  S(ct_device_parse, CT_EINVAL, ct_device_parse("", &d));
  P(ct_device_str, CT_EINVAL, ct_device_str(CT_DEVICE_CPU, NULL, 32));
  N(ct_device_str, strcmp(ct_device_str(CT_DEVICE_CPU, buf, sizeof buf), "cpu") == 0);
  N(ct_device_str, ct_device_str(bad_kind, buf, sizeof buf) == buf); /* prints something, never crashes */
  N(ct_device_str, strcmp(ct_device_str(cpu3, buf, sizeof buf), "cpu:3") == 0); /* errors must name the real device */
  N(ct_device_eq, !ct_device_eq(cuda7, CT_DEVICE_CPU) && ct_device_eq(cpu3, cpu3));
  V(ct_device_count, CT_EINVAL, ct_device_count((ct_device_kind)99) == 0);
  V(ct_device_count, CT_EINVAL, ct_device_count((ct_device_kind)-1) == 0);
  N(ct_device_available, !ct_device_available(cuda7) && !ct_device_available(cpu3) && !ct_device_available(cpu_neg) &&
                             !ct_device_available(bad_kind));
  S(ct_device_props_get, CT_EDEVICE, ct_device_props_get(cuda7, &props));
  S(ct_device_props_get, CT_EDEVICE, ct_device_props_get(cpu3, &props));
  S(ct_device_props_get, CT_EDEVICE, ct_device_props_get(cpu_neg, &props));
  S(ct_device_props_get, CT_EDEVICE, ct_device_props_get(bad_kind, &props));
  S(ct_device_props_get, CT_EINVAL, ct_device_props_get(CT_DEVICE_CPU, NULL));
  N(ct_try_gpu, ct_device_available(ct_try_gpu(-1)) && ct_device_available(ct_try_gpu(INT_MAX)));
  N(ct_try_all_gpus, ct_try_all_gpus(NULL, 5) >= 1 && ct_try_all_gpus(&d, -3) >= 1);
  N(ct_device_best, ct_device_available(ct_device_best((ct_best_policy)99)));
  S(ct_synchronize, CT_EDEVICE, ct_synchronize(cuda7));
  S(ct_synchronize, CT_EDEVICE, ct_synchronize(cpu3));
  S(ct_synchronize, CT_EDEVICE, ct_synchronize(cpu_neg));
  S(ct_synchronize, CT_EDEVICE, ct_synchronize(bad_kind));
}

/* ---- tensor.h: dtypes, constructors, random numbers */
static void test_dtypes_constructors(void **state) {
  (void)state;
  ct_dtype dt;
  ct_generator g = ct_generator_new(1);
  N(ct_dtype_name, strcmp(ct_dtype_name((ct_dtype)99), "?") == 0 && strcmp(ct_dtype_name((ct_dtype)-1), "?") == 0);
  N(ct_dtype_size, ct_dtype_size((ct_dtype)99) == 0 && ct_dtype_size((ct_dtype)-1) == 0);
  N(ct_dtype_is_floating, ct_dtype_is_floating((ct_dtype)99) == 0);
  V(ct_promote_types, CT_EDTYPE, ct_promote_types((ct_dtype)99, CT_F32) == CT_DTYPE_COUNT);
  V(ct_promote_types, CT_EDTYPE, ct_promote_types(CT_F32, (ct_dtype)-1) == CT_DTYPE_COUNT);
  S(ct_dtype_parse, CT_EINVAL, ct_dtype_parse(NULL, &dt));
  S(ct_dtype_parse, CT_EINVAL, ct_dtype_parse("float32", NULL));
  S(ct_dtype_parse, CT_EINVAL, ct_dtype_parse("float128", &dt));
  N(ct_f32_to_f16, ct_f32_to_f16(INFINITY) == 0x7c00 && (ct_f32_to_f16(NAN) & 0x7c00) == 0x7c00);
  N(ct_f16_to_f32, isnan(ct_f16_to_f32(0x7e00)));
  N(ct_f32_to_bf16, ct_f32_to_bf16(FLT_MAX) == 0x7f80 || ct_f32_to_bf16(FLT_MAX) == 0x7f7f);
  N(ct_bf16_to_f32, isnan(ct_bf16_to_f32(0x7fc0)));

  /* Every constructor with a NULL shape, a bad ndim, negative sizes, overflowing sizes, a bad dtype
   * and missing devices. The products of s_over and s_over3 overflow int64; s_bytes does not, but
   * its byte count does. */
#define SHAPE_ROWS(fn, CALL)                                              \
  do {                                                                    \
    T(fn, CT_EINVAL, CALL(2, NULL, CT_F32, CT_DEVICE_CPU));               \
    T(fn, CT_EINVAL, CALL(-1, s23, CT_F32, CT_DEVICE_CPU));               \
    T(fn, CT_EINVAL, CALL(CT_MAX_DIMS + 1, s23, CT_F32, CT_DEVICE_CPU));  \
    T(fn, CT_EINVAL, CALL(2, s_neg, CT_F32, CT_DEVICE_CPU));              \
    T(fn, CT_EINVAL, CALL(2, s_over, CT_F32, CT_DEVICE_CPU));             \
    T(fn, CT_EINVAL, CALL(3, s_over3, CT_F32, CT_DEVICE_CPU));            \
    T(fn, CT_EINVAL, CALL(1, s_bytes, CT_F64, CT_DEVICE_CPU));            \
    T(fn, CT_EDTYPE, CALL(2, s23, (ct_dtype)99, CT_DEVICE_CPU));          \
    T(fn, CT_EDEVICE, CALL(2, s23, CT_F32, cuda7));                       \
    T(fn, CT_EDEVICE, CALL(2, s23, CT_F32, cpu3));                        \
    T(fn, CT_EDEVICE, CALL(2, s23, CT_F32, cpu_neg));                     \
    T(fn, CT_EDEVICE, CALL(2, s23, CT_F32, bad_kind));                    \
  } while (0)
#define EMPTY(n, s, dt, dev) ct_empty(n, s, dt, dev)
#define ZEROS(n, s, dt, dev) ct_zeros(n, s, dt, dev)
#define ONES(n, s, dt, dev) ct_ones(n, s, dt, dev)
#define FULL(n, s, dt, dev) ct_full(n, s, 1.5, dt, dev)
#define RAND(n, s, dt, dev) ct_rand(n, s, 0, 1, dt, dev, NULL)
#define RANDN(n, s, dt, dev) ct_randn(n, s, 0, 1, dt, dev, &g)
  SHAPE_ROWS(ct_empty, EMPTY);
  SHAPE_ROWS(ct_zeros, ZEROS);
  SHAPE_ROWS(ct_ones, ONES);
  SHAPE_ROWS(ct_full, FULL);
  SHAPE_ROWS(ct_rand, RAND);
  SHAPE_ROWS(ct_randn, RANDN);
  T(ct_scalar, CT_EDTYPE, ct_scalar(1, (ct_dtype)99, CT_DEVICE_CPU));
  T(ct_scalar, CT_EDEVICE, ct_scalar(1, CT_F32, cuda7));
  T(ct_scalar, CT_EDEVICE, ct_scalar(1, CT_F32, cpu3));
  T(ct_arange, CT_EINVAL, ct_arange(0, 1, 0, CT_F32, CT_DEVICE_CPU));
  T(ct_arange, CT_EINVAL, ct_arange(0, NAN, 1, CT_F32, CT_DEVICE_CPU));
  T(ct_arange, CT_EINVAL, ct_arange(0, 1e300, 1, CT_F32, CT_DEVICE_CPU));
  T(ct_arange, CT_EINVAL, ct_arange(0, 1e19, 1, CT_I64, CT_DEVICE_CPU));
  T(ct_arange, CT_EDTYPE, ct_arange(0, 3, 1, (ct_dtype)99, CT_DEVICE_CPU));
  T(ct_arange, CT_EDEVICE, ct_arange(0, 3, 1, CT_F32, cuda7));
  T(ct_arange, CT_EDEVICE, ct_arange(0, 3, 1, CT_F32, cpu_neg));
  float host[6] = {0};
  T(ct_from_host, CT_EINVAL, ct_from_host(NULL, 2, s23, CT_F32, CT_DEVICE_CPU));
  T(ct_from_host, CT_EINVAL, ct_from_host(host, 2, NULL, CT_F32, CT_DEVICE_CPU));
  T(ct_from_host, CT_EINVAL, ct_from_host(host, -1, s23, CT_F32, CT_DEVICE_CPU));
  T(ct_from_host, CT_EINVAL, ct_from_host(host, 9, s23, CT_F32, CT_DEVICE_CPU));
  T(ct_from_host, CT_EINVAL, ct_from_host(host, 2, s_neg, CT_F32, CT_DEVICE_CPU));
  T(ct_from_host, CT_EINVAL, ct_from_host(host, 2, s_over, CT_F32, CT_DEVICE_CPU));
  T(ct_from_host, CT_EINVAL, ct_from_host(host, 1, s_bytes, CT_F64, CT_DEVICE_CPU));
  T(ct_from_host, CT_EDTYPE, ct_from_host(host, 2, s23, (ct_dtype)99, CT_DEVICE_CPU));
  T(ct_from_host, CT_EDEVICE, ct_from_host(host, 2, s23, CT_F32, cuda7));
  T(ct_from_host, CT_EDEVICE, ct_from_host(host, 2, s23, CT_F32, cpu3));
  T(ct_empty_pinned, CT_EINVAL, ct_empty_pinned(2, NULL, CT_F32));
  T(ct_empty_pinned, CT_EINVAL, ct_empty_pinned(-1, s23, CT_F32));
  T(ct_empty_pinned, CT_EINVAL, ct_empty_pinned(2, s_neg, CT_F32));
  T(ct_empty_pinned, CT_EINVAL, ct_empty_pinned(2, s_over, CT_F32));
  T(ct_empty_pinned, CT_EDTYPE, ct_empty_pinned(2, s23, (ct_dtype)99));
  T(ct_empty_pinned_for, CT_EDEVICE, ct_empty_pinned_for(cuda7, 2, s23, CT_F32));
  T(ct_empty_pinned_for, CT_EDEVICE, ct_empty_pinned_for(bad_kind, 2, s23, CT_F32));
  T(ct_empty_pinned_for, CT_EINVAL, ct_empty_pinned_for(CT_DEVICE_CPU, 2, NULL, CT_F32));
  T(ct_empty_pinned_for, CT_EINVAL, ct_empty_pinned_for(CT_DEVICE_CPU, -1, s23, CT_F32));
  T(ct_empty_pinned_for, CT_EINVAL, ct_empty_pinned_for(CT_DEVICE_CPU, 2, s_neg, CT_F32));
  T(ct_empty_pinned_for, CT_EINVAL, ct_empty_pinned_for(CT_DEVICE_CPU, 2, s_over, CT_F32));
  T(ct_empty_pinned_for, CT_EDTYPE, ct_empty_pinned_for(CT_DEVICE_CPU, 2, s23, (ct_dtype)99));
  N(ct_device_can_pin, !ct_device_can_pin(cuda7) && !ct_device_can_pin(bad_kind));
  N(ct_device_can_pin, !ct_device_can_pin(cpu3) && !ct_device_can_pin(cpu_neg));
  TA(ct_empty_pinned_for, CT_EDEVICE, "cpu:3", ct_empty_pinned_for(cpu3, 2, s23, CT_F32));
  TA(ct_empty_pinned_for, CT_EDEVICE, "cpu:-1", ct_empty_pinned_for(cpu_neg, 2, s23, CT_F32));

  /* random numbers: the dtype must fit the distribution; randint's range must fit 2^32 */
  T(ct_rand, CT_EDTYPE, ct_rand(2, s23, 0, 1, CT_I64, CT_DEVICE_CPU, &g));
  T(ct_randn, CT_EDTYPE, ct_randn(2, s23, 0, 1, CT_BOOL, CT_DEVICE_CPU, NULL));
  T(ct_randint, CT_EDTYPE, ct_randint(2, s23, 0, 3, CT_F32, CT_DEVICE_CPU, &g));
  T(ct_randint, CT_EINVAL, ct_randint(2, s23, 3, 3, CT_I64, CT_DEVICE_CPU, &g));
  T(ct_randint, CT_EINVAL, ct_randint(2, s23, INT64_MIN, INT64_MAX, CT_I64, CT_DEVICE_CPU, &g));
  T(ct_randint, CT_EINVAL, ct_randint(2, NULL, 0, 3, CT_I64, CT_DEVICE_CPU, &g));
  T(ct_randint, CT_EINVAL, ct_randint(2, s_over, 0, 3, CT_I64, CT_DEVICE_CPU, &g));
  T(ct_randint, CT_EINVAL, ct_randint(2, s_neg, 0, 3, CT_I64, CT_DEVICE_CPU, &g));
  T(ct_randint, CT_EDEVICE, ct_randint(2, s23, 0, 3, CT_I64, cuda7, &g));
  N(ct_generator_new, ct_generator_new(UINT64_MAX).offset == 0);
  N(ct_manual_seed, DO(ct_manual_seed(UINT64_MAX)) && ct_default_generator()->seed == UINT64_MAX);
  N(ct_default_generator, ct_default_generator() != NULL);
  ct_manual_seed(0);
}

/* ---- tensor.h: accessors, ownership, views, copies, printing */
static void test_tensor_api(void **state) {
  (void)state;
  char buf[64];
  double host[16];
  V(ct_tensor_ndim, CT_EINVAL, ct_tensor_ndim(NULL) == -1);
  P(ct_tensor_shape, CT_EINVAL, ct_tensor_shape(NULL));
  P(ct_tensor_strides, CT_EINVAL, ct_tensor_strides(NULL));
  V(ct_tensor_size, CT_EINVAL, ct_tensor_size(NULL, 0) == -1);
  N(ct_tensor_size, ct_tensor_size(F.a, 2) == -1 && ct_tensor_size(F.a, INT_MIN) == -1 && ct_tensor_size(F.a, -1) == 3);
  V(ct_tensor_numel, CT_EINVAL, ct_tensor_numel(NULL) == -1);
  V(ct_tensor_dtype, CT_EINVAL, ct_tensor_dtype(NULL) == CT_DTYPE_COUNT);
  V(ct_tensor_device, CT_EINVAL, !ct_device_available(ct_tensor_device(NULL)));
  V(ct_tensor_is_contiguous, CT_EINVAL, ct_tensor_is_contiguous(NULL) == 0);
  P(ct_tensor_data, CT_EINVAL, ct_tensor_data(NULL));
  P(ct_shape_str, CT_EINVAL, ct_shape_str(NULL, buf, sizeof buf));
  P(ct_shape_str, CT_EINVAL, ct_shape_str(F.a, NULL, 16));
  N(ct_shape_str, ct_shape_str(F.a, buf, 1) == buf && buf[0] == 0);
  T(ct_tensor_retain, CT_EINVAL, ct_tensor_retain(NULL));
  N(ct_tensor_free, DO(ct_tensor_free(NULL)));
  N(ct_scope_begin, DO(ct_scope_begin()));
  N(ct_scope_end, DO(ct_scope_end()) && DO(ct_scope_end())); /* a second end, with no scope open, is a no-op */
  N(ct_scope_keep, ct_scope_keep(NULL) == NULL && ct_scope_keep(F.a) == F.a);

  /* views */
  T(ct_reshape, CT_EINVAL, ct_reshape(NULL, 2, s23));
  T(ct_reshape, CT_EINVAL, ct_reshape(F.a, 2, NULL));
  T(ct_reshape, CT_EINVAL, ct_reshape(F.a, -1, s23));
  T(ct_reshape, CT_EINVAL, ct_reshape(F.a, CT_MAX_DIMS + 1, s23));
  T(ct_reshape, CT_ESHAPE, ct_reshape(F.a, 2, s_neg));
  T(ct_reshape, CT_ESHAPE, ct_reshape(F.a, 2, s_over));
  T(ct_reshape, CT_ESHAPE, ct_reshape(F.a, 3, s_over3));
  T(ct_reshape, CT_ESHAPE, ct_reshape(F.a, 3, ((int64_t[]){-1, INT64_MAX / 2, 4})));
  T(ct_reshape, CT_ESHAPE, ct_reshape(F.a, 2, ((int64_t[]){-1, -1})));
  T(ct_view, CT_EINVAL, ct_view(NULL, 2, s23));
  T(ct_view, CT_EINVAL, ct_view(F.a, 2, NULL));
  T(ct_view, CT_EINVAL, ct_view(F.a, -1, s23));
  T(ct_view, CT_ESHAPE, ct_view(F.a, 2, s_over));
  T(ct_view, CT_ESHAPE, ct_view(F.a, 3, ((int64_t[]){3, -1, INT64_MAX})));
  T(ct_permute, CT_EINVAL, ct_permute(NULL, (int[]){1, 0}));
  T(ct_permute, CT_EINVAL, ct_permute(F.a, NULL));
  T(ct_permute, CT_ESHAPE, ct_permute(F.a, ((int[]){0, 0})));
  T(ct_permute, CT_ESHAPE, ct_permute(F.a, ((int[]){0, INT_MIN})));
  T(ct_transpose, CT_EINVAL, ct_transpose(NULL, 0, 1));
  T(ct_transpose, CT_ESHAPE, ct_transpose(F.a, 0, 2));
  T(ct_transpose, CT_ESHAPE, ct_transpose(F.a, INT_MIN, 0));
  T(ct_narrow, CT_EINVAL, ct_narrow(NULL, 0, 0, 1));
  T(ct_narrow, CT_ESHAPE, ct_narrow(F.a, 0, INT64_MAX, INT64_MAX));
  T(ct_narrow, CT_ESHAPE, ct_narrow(F.a, 0, 1, -1));
  T(ct_narrow, CT_ESHAPE, ct_narrow(F.a, 5, 0, 1));
  T(ct_slice, CT_EINVAL, ct_slice(NULL, 0, 0, 1, 1));
  T(ct_slice, CT_EINVAL, ct_slice(F.a, 0, 0, 1, 0));
  T(ct_slice, CT_EINVAL, ct_slice(F.a, 0, 0, 1, INT64_MIN));
  T(ct_slice, CT_ESHAPE, ct_slice(F.a, 7, 0, 1, 1));
  N(ct_slice, DO(ct_tensor_free(ct_slice(F.a, 1, 0, INT64_MAX, INT64_MAX))) && ct_last_status() == CT_OK);
  N(ct_slice, DO(ct_tensor_free(ct_slice(F.a, 1, INT64_MIN, INT64_MIN, INT64_MAX))) && ct_last_status() == CT_OK);
  T(ct_expand, CT_EINVAL, ct_expand(NULL, 2, s23));
  T(ct_expand, CT_EINVAL, ct_expand(F.a, 2, NULL));
  T(ct_expand, CT_ESHAPE, ct_expand(F.a, -1, s23));
  T(ct_expand, CT_ESHAPE, ct_expand(F.a, CT_MAX_DIMS + 1, s23));
  T(ct_expand, CT_ESHAPE, ct_expand(F.scalar, 2, s_over));
  T(ct_expand, CT_ESHAPE, ct_expand(F.scalar, 2, s_neg));
  T(ct_expand, CT_ESHAPE, ct_expand(F.a, 3, ((int64_t[]){INT64_MAX, 2, 3})));
  T(ct_unsqueeze, CT_EINVAL, ct_unsqueeze(NULL, 0));
  T(ct_unsqueeze, CT_ESHAPE, ct_unsqueeze(F.a, 3));
  T(ct_unsqueeze, CT_ESHAPE, ct_unsqueeze(F.a, INT_MIN));
  T(ct_squeeze, CT_EINVAL, ct_squeeze(NULL, 0));
  T(ct_squeeze, CT_ESHAPE, ct_squeeze(F.a, 2));
  T(ct_squeeze, CT_ESHAPE, ct_squeeze(F.a, INT_MIN));
  T(ct_flatten, CT_EINVAL, ct_flatten(NULL, 0, -1));
  T(ct_flatten, CT_ESHAPE, ct_flatten(F.a, 1, 0));
  T(ct_flatten, CT_ESHAPE, ct_flatten(F.a, 0, INT_MAX));
  T(ct_contiguous, CT_EINVAL, ct_contiguous(NULL));
  T(ct_cast, CT_EINVAL, ct_cast(NULL, CT_F32));
  T(ct_cast, CT_EDTYPE, ct_cast(F.a, (ct_dtype)99));
  T(ct_cast, CT_EDTYPE, ct_cast(F.a, (ct_dtype)-1));
  T(ct_contiguous_format, CT_EINVAL, ct_contiguous_format(NULL, CT_CHANNELS_LAST));
  T(ct_contiguous_format, CT_EINVAL, ct_contiguous_format(F.x4, (ct_memory_format)7));
  TA(ct_contiguous_format, CT_ESHAPE, "rank 4", ct_contiguous_format(F.a, CT_CHANNELS_LAST));
  V(ct_tensor_is_contiguous_format, CT_EINVAL, ct_tensor_is_contiguous_format(NULL, CT_CHANNELS_LAST) == 0);
  V(ct_tensor_is_contiguous_format, CT_EINVAL, ct_tensor_is_contiguous_format(F.x4, (ct_memory_format)-1) == 0);
  N(ct_tensor_is_contiguous_format, ct_tensor_is_contiguous_format(F.a, CT_CHANNELS_LAST) == 0);
  V(ct_tensor_suggest_memory_format, CT_EINVAL, ct_tensor_suggest_memory_format(NULL) == CT_CONTIGUOUS_FORMAT);
  N(ct_tensor_suggest_memory_format, ct_tensor_suggest_memory_format(F.x4) == CT_CONTIGUOUS_FORMAT);

  /* explicit copies */
  T(ct_to, CT_EINVAL, ct_to(NULL, CT_DEVICE_CPU, 0));
  T(ct_to, CT_EDEVICE, ct_to(F.a, cuda7, 0));
  T(ct_to, CT_EDEVICE, ct_to(F.a, cuda7, CT_NON_BLOCKING));
  T(ct_to, CT_EDEVICE, ct_to(F.a, cpu3, CT_COPY));
  TA(ct_to, CT_EDEVICE, "cpu:3", ct_to(F.a, cpu3, 0));
  T(ct_to, CT_EDEVICE, ct_to(F.a, cpu_neg, 0));
  T(ct_to, CT_EDEVICE, ct_to(F.a, bad_kind, 0));
  T(ct_to, CT_EINVAL, ct_to(F.a, CT_DEVICE_CPU, 1 << 7));
  S(ct_copy_, CT_EINVAL, ct_copy_(NULL, F.a));
  S(ct_copy_, CT_EINVAL, ct_copy_(F.a, NULL));
  S(ct_copy_, CT_ESHAPE, ct_copy_(F.a, F.r1));
  S(ct_copy_, CT_EDEVICE, ct_copy_(F.fake, F.a));
  S(ct_to_host, CT_EINVAL, ct_to_host(NULL, host, sizeof host, CT_F64));
  S(ct_to_host, CT_EINVAL, ct_to_host(F.a, NULL, sizeof host, CT_F64));
  S(ct_to_host, CT_EINVAL, ct_to_host(F.a, host, 8, CT_F64));
  S(ct_to_host, CT_EDTYPE, ct_to_host(F.a, host, sizeof host, (ct_dtype)99));
  D(ct_item, CT_EINVAL, ct_item(NULL));
  D(ct_item, CT_ESHAPE, ct_item(F.a));
  N(ct_ledger_get, ct_ledger_get().h2d_copies == 0); /* no GPU here: nothing crossed to a device */
  N(ct_ledger_reset, DO(ct_ledger_reset()) && ct_ledger_get().syncs == 0);
  V(ct_ledger_print, CT_EINVAL, DO(ct_ledger_print(NULL)));
  S(ct_tensor_print, CT_EINVAL, ct_tensor_print(NULL, stderr));
  S(ct_tensor_print, CT_EINVAL, ct_tensor_print(F.a, NULL));
  P(ct_tensor_to_string, CT_EINVAL, ct_tensor_to_string(NULL));
}

/* ---- cuda.h: everything callable without a GPU */
static void test_cuda_api(void **state) {
  (void)state;
  ct_memory_stats ms;
  double msec;
  S(ct_memory_stats_get, CT_EDEVICE, ct_memory_stats_get(cuda7, &ms));
  S(ct_memory_stats_get, CT_EDEVICE, ct_memory_stats_get(cpu3, &ms));
  S(ct_memory_stats_get, CT_EDEVICE, ct_memory_stats_get(bad_kind, &ms));
  S(ct_memory_stats_get, CT_EINVAL, ct_memory_stats_get(CT_DEVICE_CPU, NULL));
  S(ct_empty_cache, CT_EDEVICE, ct_empty_cache(cuda7));
  S(ct_empty_cache, CT_EDEVICE, ct_empty_cache(cpu_neg));
  S(ct_reset_peak_memory_stats, CT_EDEVICE, ct_reset_peak_memory_stats(cuda7));
  S(ct_reset_peak_memory_stats, CT_EDEVICE, ct_reset_peak_memory_stats(bad_kind));
  int tf32 = ct_allow_tf32();
  N(ct_set_allow_tf32, DO(ct_set_allow_tf32(12345)) && ct_allow_tf32() == 1);
  ct_set_allow_tf32(tf32);
  N(ct_allow_tf32, ct_allow_tf32() == tf32);
  N(ct_tensor_is_pinned, ct_tensor_is_pinned(NULL) == 0);
  T(ct_pin_memory, CT_EINVAL, ct_pin_memory(NULL));
  T(ct_pin_memory, CT_EDEVICE, ct_pin_memory(F.fake));
  P(ct_stream_new, CT_EDEVICE, ct_stream_new(cuda7));
  P(ct_stream_new, CT_EDEVICE, ct_stream_new(cpu3));
  N(ct_stream_free, DO(ct_stream_free(NULL)));
  V(ct_stream_device, CT_EINVAL, !ct_device_available(ct_stream_device(NULL)));
  N(ct_stream_native, ct_stream_native(NULL) == NULL && ct_stream_native(F.stream) == NULL);
  S(ct_stream_synchronize, CT_EINVAL, ct_stream_synchronize(NULL));
  S(ct_stream_wait_event, CT_EINVAL, ct_stream_wait_event(NULL, NULL));
  S(ct_stream_wait_event, CT_EINVAL, ct_stream_wait_event(F.stream, NULL));
  P(ct_event_record, CT_EDEVICE, ct_event_record(cuda7));
  P(ct_event_record, CT_EDEVICE, ct_event_record(cpu_neg));
  P(ct_stream_record_event, CT_EINVAL, ct_stream_record_event(NULL));
  N(ct_event_free, DO(ct_event_free(NULL)));
  S(ct_event_synchronize, CT_EINVAL, ct_event_synchronize(NULL));
  S(ct_event_query, CT_EINVAL, ct_event_query(NULL));
  S(ct_event_elapsed_ms, CT_EINVAL, ct_event_elapsed_ms(NULL, F.ev, &msec));
  S(ct_event_elapsed_ms, CT_EINVAL, ct_event_elapsed_ms(F.ev, NULL, &msec));
  S(ct_event_elapsed_ms, CT_EINVAL, ct_event_elapsed_ms(F.ev, F.ev, NULL));
  N(ct_device_can_capture, ct_device_can_capture(CT_DEVICE_CPU) == 0 && ct_device_can_capture(cuda7) == 0 &&
                               ct_device_can_capture(bad_kind) == 0);
  S(ct_device_graph_capture_begin, CT_EUNSUPPORTED, ct_device_graph_capture_begin(CT_DEVICE_CPU));
  S(ct_device_graph_capture_begin, CT_EDEVICE, ct_device_graph_capture_begin(cuda7));
  P(ct_device_graph_capture_end, CT_EUNSUPPORTED, ct_device_graph_capture_end(CT_DEVICE_CPU));
  P(ct_device_graph_capture_end, CT_EDEVICE, ct_device_graph_capture_end(cpu3));
  S(ct_device_graph_replay, CT_EINVAL, ct_device_graph_replay(NULL));
  N(ct_device_graph_free, DO(ct_device_graph_free(NULL)));
  S(ct_set_sync_debug_mode, CT_EINVAL, ct_set_sync_debug_mode(3));
  S(ct_set_sync_debug_mode, CT_EINVAL, ct_set_sync_debug_mode(-1));
  N(ct_get_sync_debug_mode, ct_get_sync_debug_mode() >= 0 && ct_get_sync_debug_mode() <= 2);
}

/* ---- ops.h */
static void test_ops(void **state) {
  (void)state;
  ct_tensor *idx = NULL;
  /* Binary ops and comparisons: NULL on either side, shapes that do not broadcast, another device. */
#define BINARY_ROWS(fn)                           \
  do {                                            \
    T(fn, CT_EINVAL, fn(NULL, F.a));              \
    T(fn, CT_EINVAL, fn(F.a, NULL));              \
    T(fn, CT_ESHAPE, fn(F.a, F.r1));              \
    T(fn, CT_EDEVICE, fn(F.a, F.fake));           \
  } while (0)
  BINARY_ROWS(ct_add); BINARY_ROWS(ct_sub); BINARY_ROWS(ct_mul); BINARY_ROWS(ct_div); BINARY_ROWS(ct_pow);
  BINARY_ROWS(ct_maximum); BINARY_ROWS(ct_minimum); BINARY_ROWS(ct_eq); BINARY_ROWS(ct_ne); BINARY_ROWS(ct_lt);
  BINARY_ROWS(ct_le); BINARY_ROWS(ct_gt); BINARY_ROWS(ct_ge); BINARY_ROWS(ct_matmul);
  T(ct_matmul, CT_ESHAPE, ct_matmul(F.a, F.b));
  T(ct_matmul, CT_ESHAPE, ct_matmul(F.scalar, F.a));
  T(ct_add_scalar, CT_EINVAL, ct_add_scalar(NULL, 1));
  T(ct_mul_scalar, CT_EINVAL, ct_mul_scalar(NULL, 1));
  T(ct_pow_scalar, CT_EINVAL, ct_pow_scalar(NULL, 2));
  T(ct_where, CT_EINVAL, ct_where(NULL, F.a, F.b));
  T(ct_where, CT_EINVAL, ct_where(F.a, NULL, F.b));
  T(ct_where, CT_EINVAL, ct_where(F.a, F.a, NULL));
  T(ct_where, CT_ESHAPE, ct_where(F.a, F.a, F.r1));
  T(ct_where, CT_EDEVICE, ct_where(F.a, F.a, F.fake));
  T(ct_where, CT_EDEVICE, ct_where(F.fake, F.a, F.b));
  T(ct_clamp, CT_EINVAL, ct_clamp(NULL, 0, 1));
  N(ct_clamp, clamp_gives_hi(F.a, 1, 0)); /* lo > hi: torch's hi everywhere, not an error */
  T(ct_clamp, CT_EINVAL, ct_clamp(F.a, NAN, 0));
#define UNARY_ROW(fn) T(fn, CT_EINVAL, fn(NULL))
  UNARY_ROW(ct_neg); UNARY_ROW(ct_abs); UNARY_ROW(ct_exp); UNARY_ROW(ct_log); UNARY_ROW(ct_sqrt);
  UNARY_ROW(ct_relu); UNARY_ROW(ct_sigmoid); UNARY_ROW(ct_tanh); UNARY_ROW(ct_gelu); UNARY_ROW(ct_norm);
  UNARY_ROW(ct_silu); UNARY_ROW(ct_gelu_tanh);
  T(ct_norm, CT_EDTYPE, ct_norm(F.i64));

  /* reductions */
#define REDUCE_ROWS(fn, ...)                                            \
  do {                                                                  \
    T(fn, CT_EINVAL, fn(NULL, 0, NULL, __VA_ARGS__));                   \
    T(fn, CT_EINVAL, fn(F.a, 1, NULL, __VA_ARGS__));                    \
    T(fn, CT_EINVAL, fn(F.a, -1, (int[]){0}, __VA_ARGS__));             \
    T(fn, CT_EINVAL, fn(F.a, CT_MAX_DIMS + 1, (int[]){0}, __VA_ARGS__)); \
    T(fn, CT_ESHAPE, fn(F.a, 1, (int[]){2}, __VA_ARGS__));              \
    T(fn, CT_ESHAPE, fn(F.a, 1, (int[]){INT_MIN}, __VA_ARGS__));        \
    T(fn, CT_ESHAPE, fn(F.a, 2, ((int[]){1, 1}), __VA_ARGS__));         \
  } while (0)
  REDUCE_ROWS(ct_sum, 0);
  REDUCE_ROWS(ct_mean, 0);
  REDUCE_ROWS(ct_var, 1, 0);
  T(ct_mean, CT_EDTYPE, ct_mean(F.i64, 0, NULL, 0));
  T(ct_var, CT_EDTYPE, ct_var(F.i64, 0, NULL, 1, 0));
  T(ct_var, CT_EINVAL, ct_var(F.a, 0, NULL, -1, 0));
  T(ct_max, CT_EINVAL, ct_max(NULL, 0, 0, &idx));
  T(ct_max, CT_ESHAPE, ct_max(F.a, 2, 0, &idx));
  T(ct_max, CT_ESHAPE, ct_max(F.a, INT_MIN, 0, NULL));
  T(ct_min, CT_EINVAL, ct_min(NULL, 0, 0, NULL));
  T(ct_min, CT_ESHAPE, ct_min(F.a, -3, 0, &idx));
  T(ct_argmax, CT_EINVAL, ct_argmax(NULL, 0, 0));
  T(ct_argmax, CT_ESHAPE, ct_argmax(F.a, 2, 0));
  assert_null(idx);

  /* linear algebra, convolution, pooling */
  T(ct_linear, CT_EINVAL, ct_linear(NULL, F.a, NULL));
  T(ct_linear, CT_EINVAL, ct_linear(F.a, NULL, NULL));
  T(ct_linear, CT_ESHAPE, ct_linear(F.a, F.r1, NULL));
  T(ct_linear, CT_ESHAPE, ct_linear(F.a, F.b, F.r1));
  T(ct_linear, CT_EDEVICE, ct_linear(F.a, F.fake, NULL));
  T(ct_linear, CT_EDEVICE, ct_linear(F.a, F.b, F.fake));
  const ct_conv2d_opts *nc = NULL;
  T(ct_conv2d, CT_EINVAL, ct_conv2d(NULL, F.w4, NULL, nc));
  T(ct_conv2d, CT_EINVAL, ct_conv2d(F.x4, NULL, NULL, nc));
  T(ct_conv2d, CT_ESHAPE, ct_conv2d(F.x4, F.a, NULL, nc));
  T(ct_conv2d, CT_ESHAPE, ct_conv2d(F.a, F.w4, NULL, nc));
  T(ct_conv2d, CT_ESHAPE, ct_conv2d(F.x4, F.w4, F.r1, nc));
  T(ct_conv2d, CT_EDEVICE, ct_conv2d(F.x4, F.w4, F.fake, nc));
  /* stride, padding, dilation and groups as torch.nn.functional.conv2d checks them ("non-positive
   * stride is not supported", "negative padding is not supported"); 0 means the default. */
  TA(ct_conv2d, CT_EINVAL, "stride", ct_conv2d(F.x4, F.w4, NULL, &(ct_conv2d_opts){.stride = {-1, 1}}));
  TA(ct_conv2d, CT_EINVAL, "stride", ct_conv2d(F.x4, F.w4, NULL, &(ct_conv2d_opts){.stride = {1, INT_MIN}}));
  TA(ct_conv2d, CT_EINVAL, "padding", ct_conv2d(F.x4, F.w4, NULL, &(ct_conv2d_opts){.padding = {-1, 0}}));
  TA(ct_conv2d, CT_EINVAL, "padding", ct_conv2d(F.x4, F.w4, NULL, &(ct_conv2d_opts){.padding = {0, INT_MIN}}));
  TA(ct_conv2d, CT_EINVAL, "dilation", ct_conv2d(F.x4, F.w4, NULL, &(ct_conv2d_opts){.dilation = {-2, 1}}));
  TA(ct_conv2d, CT_EINVAL, "groups", ct_conv2d(F.x4, F.w4, NULL, &(ct_conv2d_opts){.groups = -1}));
  TA(ct_conv2d, CT_EINVAL, "padding", ct_conv2d(F.x4, F.w4, NULL, &(ct_conv2d_opts){.padding = {INT_MAX, INT_MAX}}));
  T(ct_conv2d, CT_ESHAPE, ct_conv2d(F.x4, F.w4, NULL, &(ct_conv2d_opts){.dilation = {INT_MAX, INT_MAX}}));
  T(ct_conv2d, CT_EDTYPE, ct_conv2d(F.x4i, F.w4i, NULL, nc));
  const ct_pool2d_opts p2 = {.kernel = {2, 2}};
#define POOL_ROWS(fn)                                                                                  \
  do {                                                                                                 \
    T(fn, CT_EINVAL, fn(NULL, &p2));                                                                   \
    T(fn, CT_EINVAL, fn(F.x4, NULL));                                                                  \
    T(fn, CT_ESHAPE, fn(F.a, &p2));                                                                    \
    TA(fn, CT_EINVAL, "kernel", fn(F.x4, &(ct_pool2d_opts){.kernel = {-2, 2}}));                       \
    TA(fn, CT_EINVAL, "kernel", fn(F.x4, &(ct_pool2d_opts){.kernel = {2, 0}}));                        \
    TA(fn, CT_EINVAL, "stride", fn(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .stride = {-1, 1}}));     \
    TA(fn, CT_EINVAL, "stride", fn(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .stride = {1, INT_MIN}})); \
    TA(fn, CT_EINVAL, "padding", fn(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .padding = {-1, 0}}));  \
    TA(fn, CT_EINVAL, "padding", fn(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .padding = {0, 2}}));   \
    T(fn, CT_ESHAPE, fn(F.x4, &(ct_pool2d_opts){.kernel = {INT_MAX, INT_MAX}, .padding = {INT_MAX / 2, 0}})); \
    T(fn, CT_EDTYPE, fn(F.x4i, &p2));                                                                  \
    TA(fn, CT_EINVAL, "dilation", fn(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .dilation = {1, -1}}));  \
    TA(fn, CT_EINVAL, "ceil_mode", fn(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .ceil_mode = 2}));      \
    TA(fn, CT_EINVAL, "exclude_pad", fn(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .exclude_pad = -1})); \
    /* ceil_mode cannot make an output of a kernel larger than the padded input */                    \
    T(fn, CT_ESHAPE, fn(F.x4, &(ct_pool2d_opts){.kernel = {7, 7}, .stride = {3, 3}, .ceil_mode = 1}));   \
  } while (0)
  POOL_ROWS(ct_max_pool2d); POOL_ROWS(ct_avg_pool2d); POOL_ROWS(ct_relu_max_pool2d);
  /* torch's options of one kind of pooling given to the other; padding beyond half the kernel even
   * where it is within half the dilated one (torch refuses it too); a negative divisor */
#define MAX_POOL_ROWS(fn)                                                                                    \
  do {                                                                                                       \
    TA(fn, CT_EINVAL, "exclude_pad", fn(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .exclude_pad = 1}));        \
    TA(fn, CT_EINVAL, "divisor_override", fn(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .divisor_override = 3})); \
    TA(fn, CT_EINVAL, "padding", fn(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .padding = {2, 0}, .dilation = {3, 1}})); \
  } while (0)
  MAX_POOL_ROWS(ct_max_pool2d); MAX_POOL_ROWS(ct_relu_max_pool2d);
  TA(ct_avg_pool2d, CT_EINVAL, "dilation", ct_avg_pool2d(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .dilation = {2, 1}}));
  TA(ct_avg_pool2d, CT_EINVAL, "divisor_override", ct_avg_pool2d(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .divisor_override = -1}));
  TA(ct_avg_pool2d, CT_EINVAL, "divisor_override",
     ct_avg_pool2d(F.x4, &(ct_pool2d_opts){.kernel = {2, 2}, .divisor_override = INT_MIN}));
  TA(ct_conv2d_relu_max_pool2d, CT_EINVAL, "divisor_override",
     ct_conv2d_relu_max_pool2d(F.x4, F.w4, NULL, NULL, &(ct_pool2d_opts){.kernel = {2, 2}, .divisor_override = 2}));
  TA(ct_conv2d_relu_max_pool2d, CT_EINVAL, "dilation",
     ct_conv2d_relu_max_pool2d(F.x4, F.w4, NULL, NULL, &(ct_pool2d_opts){.kernel = {2, 2}, .dilation = {-1, 1}}));
  T(ct_adaptive_avg_pool2d, CT_EINVAL, ct_adaptive_avg_pool2d(NULL, 1, 1));
  TA(ct_adaptive_avg_pool2d, CT_EINVAL, "output size", ct_adaptive_avg_pool2d(F.x4, 0, 1));
  TA(ct_adaptive_avg_pool2d, CT_EINVAL, "output size", ct_adaptive_avg_pool2d(F.x4, 1, INT64_MIN));
  T(ct_adaptive_avg_pool2d, CT_ESHAPE, ct_adaptive_avg_pool2d(F.a, 1, 1));
  T(ct_adaptive_avg_pool2d, CT_EDTYPE, ct_adaptive_avg_pool2d(F.x4i, 1, 1));
  T(ct_conv2d_relu_max_pool2d, CT_EINVAL, ct_conv2d_relu_max_pool2d(NULL, F.w4, NULL, NULL, &p2));
  T(ct_conv2d_relu_max_pool2d, CT_EINVAL, ct_conv2d_relu_max_pool2d(F.x4, NULL, NULL, NULL, &p2));
  T(ct_conv2d_relu_max_pool2d, CT_EINVAL, ct_conv2d_relu_max_pool2d(F.x4, F.w4, NULL, NULL, NULL));
  T(ct_conv2d_relu_max_pool2d, CT_ESHAPE, ct_conv2d_relu_max_pool2d(F.x4, F.a, NULL, NULL, &p2));
  T(ct_conv2d_relu_max_pool2d, CT_EDEVICE, ct_conv2d_relu_max_pool2d(F.x4, F.w4, F.fake, NULL, &p2));
  TA(ct_conv2d_relu_max_pool2d, CT_EINVAL, "stride",
     ct_conv2d_relu_max_pool2d(F.x4, F.w4, NULL, &(ct_conv2d_opts){.stride = {-1, -1}}, &p2));
  TA(ct_conv2d_relu_max_pool2d, CT_EINVAL, "padding",
     ct_conv2d_relu_max_pool2d(F.x4, F.w4, NULL, &(ct_conv2d_opts){.padding = {-1, 0}}, &p2));
  TA(ct_conv2d_relu_max_pool2d, CT_EINVAL, "stride",
     ct_conv2d_relu_max_pool2d(F.x4, F.w4, NULL, NULL, &(ct_pool2d_opts){.kernel = {2, 2}, .stride = {-2, 2}}));
  TA(ct_conv2d_relu_max_pool2d, CT_EINVAL, "kernel",
     ct_conv2d_relu_max_pool2d(F.x4, F.w4, NULL, NULL, &(ct_pool2d_opts){.kernel = {0, 2}}));
  T(ct_conv2d_relu_max_pool2d, CT_ESHAPE,
    ct_conv2d_relu_max_pool2d(F.x4, F.w4, NULL, NULL, &(ct_pool2d_opts){.kernel = {3, 3}}));

  /* normalization, dropout, softmax */
  T(ct_batch_norm, CT_EINVAL, ct_batch_norm(NULL, NULL, NULL, NULL, NULL, 1, 0.1, 1e-5));
  T(ct_batch_norm, CT_ESHAPE, ct_batch_norm(F.x4, F.r1, NULL, NULL, NULL, 1, 0.1, 1e-5));
  T(ct_batch_norm, CT_ESHAPE, ct_batch_norm(F.x4, NULL, NULL, F.r1, NULL, 1, 0.1, 1e-5));
  T(ct_batch_norm, CT_EDEVICE, ct_batch_norm(F.a, NULL, NULL, F.fake, NULL, 1, 0.1, 1e-5));
  TA(ct_batch_norm, CT_EDTYPE, "int64", ct_batch_norm(F.i64, NULL, NULL, NULL, NULL, 1, 0.1, 1e-5));
  TA(ct_batch_norm, CT_EINVAL, "eps", ct_batch_norm(F.x4, NULL, NULL, NULL, NULL, 1, 0.1, -1e-5));
  TA(ct_batch_norm, CT_EINVAL, "eps", ct_batch_norm(F.x4, NULL, NULL, NULL, NULL, 1, 0.1, NAN));
  T(ct_layer_norm, CT_EINVAL, ct_layer_norm(NULL, 1, NULL, NULL, 1e-5));
  TA(ct_layer_norm, CT_EINVAL, "normalized_ndim", ct_layer_norm(F.a, 0, NULL, NULL, 1e-5));
  TA(ct_layer_norm, CT_EINVAL, "normalized_ndim", ct_layer_norm(F.a, 3, NULL, NULL, 1e-5));
  TA(ct_layer_norm, CT_EINVAL, "normalized_ndim", ct_layer_norm(F.a, -1, NULL, NULL, 1e-5));
  TA(ct_layer_norm, CT_ESHAPE, "(4,)", ct_layer_norm(F.a, 1, F.r1, NULL, 1e-5));  /* weight (4) for (2, 3) */
  TA(ct_layer_norm, CT_ESHAPE, "bias", ct_layer_norm(F.a, 2, NULL, F.b3, 1e-5)); /* bias (3) for dims (2, 3) */
  TA(ct_layer_norm, CT_EDEVICE, "weight", ct_layer_norm(F.a, 2, F.fake, NULL, 1e-5));
  TA(ct_layer_norm, CT_EDTYPE, "int64", ct_layer_norm(F.i64, 1, NULL, NULL, 1e-5));
  TA(ct_layer_norm, CT_EDTYPE, "weight", ct_layer_norm(F.a, 1, F.i64, NULL, 1e-5));
  TA(ct_layer_norm, CT_EINVAL, "eps", ct_layer_norm(F.a, 1, NULL, NULL, -1e-5));
  TA(ct_layer_norm, CT_EINVAL, "eps", ct_layer_norm(F.a, 1, NULL, NULL, NAN));
  T(ct_dropout, CT_EINVAL, ct_dropout(NULL, 0.5, 1, NULL));
  T(ct_dropout, CT_EINVAL, ct_dropout(F.a, -0.5, 1, NULL));
  T(ct_dropout, CT_EINVAL, ct_dropout(F.a, NAN, 1, NULL));
  T(ct_softmax, CT_EINVAL, ct_softmax(NULL, 0));
  T(ct_softmax, CT_ESHAPE, ct_softmax(F.a, INT_MIN));
  TA(ct_softmax, CT_EDTYPE, "int64", ct_softmax(F.i64, 1)); /* torch: not implemented for 'Long' */
  T(ct_log_softmax, CT_EINVAL, ct_log_softmax(NULL, 0));
  T(ct_log_softmax, CT_ESHAPE, ct_log_softmax(F.a, 2));
  TA(ct_log_softmax, CT_EDTYPE, "int64", ct_log_softmax(F.i64, 0));

  /* losses */
  TN(ct_cross_entropy_ex, CT_EINVAL, "cross_entropy", ct_cross_entropy_ex(NULL, F.lab, NULL, -100, CT_REDUCTION_MEAN, 0));
  TN(ct_cross_entropy_ex, CT_EINVAL, "cross_entropy", ct_cross_entropy_ex(F.a, NULL, NULL, -100, CT_REDUCTION_MEAN, 0));
  TN(ct_cross_entropy_ex, CT_ESHAPE, "weight", ct_cross_entropy_ex(F.a, F.lab, F.r1, -100, CT_REDUCTION_MEAN, 0));
  TN(ct_cross_entropy_ex, CT_EDTYPE, "weight", ct_cross_entropy_ex(F.a, F.lab, F.lab, -100, CT_REDUCTION_MEAN, 0));
  TN(ct_cross_entropy_ex, CT_EDEVICE, "cross_entropy", ct_cross_entropy_ex(F.a, F.lab, F.fake, -100, CT_REDUCTION_MEAN, 0));
  TN(ct_cross_entropy_ex, CT_EINVAL, "reduction", ct_cross_entropy_ex(F.a, F.lab, NULL, -100, (ct_reduction)3, 0));
  TN(ct_cross_entropy_ex, CT_EINVAL, "label_smoothing", ct_cross_entropy_ex(F.a, F.lab, NULL, -100, CT_REDUCTION_MEAN, -0.5));
  T(ct_cross_entropy, CT_EINVAL, ct_cross_entropy(NULL, F.lab, CT_REDUCTION_MEAN, 0));
  T(ct_cross_entropy, CT_EINVAL, ct_cross_entropy(F.a, NULL, CT_REDUCTION_MEAN, 0));
  T(ct_cross_entropy, CT_EDTYPE, ct_cross_entropy(F.a, F.labf, CT_REDUCTION_MEAN, 0));
  T(ct_cross_entropy, CT_ESHAPE, ct_cross_entropy(F.a, F.r1, CT_REDUCTION_MEAN, 0));
  T(ct_cross_entropy, CT_ESHAPE, ct_cross_entropy(F.r1, F.lab, CT_REDUCTION_MEAN, 0));
  T(ct_cross_entropy, CT_EINVAL, ct_cross_entropy(F.a, F.lab, CT_REDUCTION_MEAN, 1.5));
  T(ct_cross_entropy, CT_EINVAL, ct_cross_entropy(F.a, F.lab, CT_REDUCTION_MEAN, NAN));
  TA(ct_cross_entropy, CT_EDTYPE, "int64", ct_cross_entropy(F.i64, F.lab, CT_REDUCTION_MEAN, 0));
  TA(ct_cross_entropy, CT_EINVAL, "reduction", ct_cross_entropy(F.a, F.lab, (ct_reduction)3, 0));
  TA(ct_cross_entropy, CT_EINVAL, "reduction", ct_cross_entropy(F.a, F.lab, (ct_reduction)-1, 0));
  F.lab->device = cuda7;
  T(ct_cross_entropy, CT_EDEVICE, ct_cross_entropy(F.a, F.lab, CT_REDUCTION_MEAN, 0));
  F.lab->device = CT_DEVICE_CPU;
  T(ct_mse_loss, CT_EINVAL, ct_mse_loss(NULL, F.a, CT_REDUCTION_MEAN));
  T(ct_mse_loss, CT_EINVAL, ct_mse_loss(F.a, NULL, CT_REDUCTION_MEAN));
  T(ct_mse_loss, CT_ESHAPE, ct_mse_loss(F.a, F.r1, CT_REDUCTION_MEAN));
  T(ct_mse_loss, CT_EDEVICE, ct_mse_loss(F.a, F.fake, CT_REDUCTION_MEAN));
  TA(ct_mse_loss, CT_EINVAL, "reduction", ct_mse_loss(F.a, F.b, (ct_reduction)99));

  /* joining and indexing */
  ct_tensor *two[2] = {F.a, F.b}, *with_null[2] = {F.a, NULL}, *mixed[2] = {F.a, F.fake}, *shapes[2] = {F.a, F.r1};
  T(ct_cat, CT_EINVAL, ct_cat(2, NULL, 0));
  T(ct_cat, CT_EINVAL, ct_cat(0, two, 0));
  T(ct_cat, CT_EINVAL, ct_cat(-1, two, 0));
  T(ct_cat, CT_EINVAL, ct_cat(2, with_null, 0));
  T(ct_cat, CT_ESHAPE, ct_cat(2, shapes, 0));
  T(ct_cat, CT_ESHAPE, ct_cat(2, two, 2));
  T(ct_cat, CT_EDEVICE, ct_cat(2, mixed, 0));
  T(ct_stack, CT_EINVAL, ct_stack(2, NULL, 0));
  T(ct_stack, CT_EINVAL, ct_stack(0, two, 0));
  T(ct_stack, CT_EINVAL, ct_stack(INT_MIN, two, 0));
  T(ct_stack, CT_EINVAL, ct_stack(2, with_null, 0));
  T(ct_stack, CT_ESHAPE, ct_stack(2, shapes, 0));
  T(ct_stack, CT_ESHAPE, ct_stack(2, two, 4));
  T(ct_stack, CT_EDEVICE, ct_stack(2, mixed, 0));
  T(ct_scaled_dot_product_attention, CT_EINVAL, ct_scaled_dot_product_attention(NULL, F.x4, F.x4, NULL, 0, 0, 0));
  T(ct_scaled_dot_product_attention, CT_EINVAL, ct_scaled_dot_product_attention(F.x4, NULL, F.x4, NULL, 0, 0, 0));
  T(ct_scaled_dot_product_attention, CT_EINVAL, ct_scaled_dot_product_attention(F.x4, F.x4, NULL, NULL, 0, 0, 0));
  T(ct_scaled_dot_product_attention, CT_ESHAPE, ct_scaled_dot_product_attention(F.a, F.a, F.a, NULL, 0, 0, 0));
  T(ct_scaled_dot_product_attention, CT_EDTYPE, ct_scaled_dot_product_attention(F.x4i, F.x4i, F.x4i, NULL, 0, 0, 0));
  TA(ct_scaled_dot_product_attention, CT_EDTYPE, "attn_mask", ct_scaled_dot_product_attention(F.x4, F.x4, F.x4, F.x4i, 0, 0, 0));
  TA(ct_scaled_dot_product_attention, CT_ESHAPE, "attn_mask", ct_scaled_dot_product_attention(F.x4, F.x4, F.x4, F.a, 0, 0, 0));
  TA(ct_scaled_dot_product_attention, CT_EINVAL, "dropout_p", ct_scaled_dot_product_attention(F.x4, F.x4, F.x4, NULL, -0.1, 0, 0));
  TA(ct_scaled_dot_product_attention, CT_EINVAL, "dropout_p", ct_scaled_dot_product_attention(F.x4, F.x4, F.x4, NULL, NAN, 0, 0));
  TA(ct_scaled_dot_product_attention, CT_EINVAL, "scale", ct_scaled_dot_product_attention(F.x4, F.x4, F.x4, NULL, 0, 0, INFINITY));
  TA(ct_scaled_dot_product_attention, CT_EINVAL, "is_causal", ct_scaled_dot_product_attention(F.x4, F.x4, F.x4, NULL, 0, -1, 0));
  T(ct_scaled_dot_product_attention, CT_EDEVICE, ct_scaled_dot_product_attention(F.x4, F.fake, F.x4, NULL, 0, 0, 0));
  T(ct_embedding, CT_EINVAL, ct_embedding(NULL, F.lab, CT_NO_PADDING_IDX));
  T(ct_embedding, CT_EINVAL, ct_embedding(F.a, NULL, CT_NO_PADDING_IDX));
  TA(ct_embedding, CT_EDTYPE, "float32", ct_embedding(F.a, F.labf, CT_NO_PADDING_IDX)); /* torch: Expected ... Long, Int */
  TA(ct_embedding, CT_EDTYPE, "int64", ct_embedding(F.i64, F.lab, CT_NO_PADDING_IDX));
  T(ct_embedding, CT_ESHAPE, ct_embedding(F.r1, F.lab, CT_NO_PADDING_IDX));
  TA(ct_embedding, CT_EINVAL, "padding_idx", ct_embedding(F.a, F.lab, 2));
  TA(ct_embedding, CT_EINVAL, "padding_idx", ct_embedding(F.a, F.lab, INT64_MAX));
  TA(ct_embedding, CT_EINVAL, "out of range", ct_embedding(F.a, F.i64t, CT_NO_PADDING_IDX)); /* F.a has 2 rows, F.i64t holds values up to 2 */
  T(ct_embedding, CT_EDEVICE, ct_embedding(F.fake, F.lab, CT_NO_PADDING_IDX));
  T(ct_topk, CT_EINVAL, ct_topk(NULL, 1, 0, 1, NULL));
  TA(ct_topk, CT_EINVAL, "k = 4", ct_topk(F.a, 4, 1, 1, NULL));
  TA(ct_topk, CT_EINVAL, "k = -1", ct_topk(F.a, -1, 1, 1, NULL));
  T(ct_topk, CT_ESHAPE, ct_topk(F.a, 1, 2, 1, NULL));
  T(ct_topk, CT_EDTYPE, ct_topk(F.i64, 1, 1, 1, NULL));
  T(ct_multinomial, CT_EINVAL, ct_multinomial(NULL, 1, 1, NULL));
  TA(ct_multinomial, CT_EINVAL, "num_samples", ct_multinomial(F.b3, 0, 1, NULL));
  TA(ct_multinomial, CT_EINVAL, "replacement", ct_multinomial(F.b3, 1, 2, NULL));
  TA(ct_multinomial, CT_EINVAL, ">= 0", ct_multinomial(F.neg3, 1, 1, NULL));
  T(ct_multinomial, CT_ESHAPE, ct_multinomial(F.x4, 1, 1, NULL));
  T(ct_multinomial, CT_EDTYPE, ct_multinomial(F.lab, 1, 1, NULL));
  T(ct_index_select, CT_EINVAL, ct_index_select(NULL, 0, F.lab));
  T(ct_index_select, CT_EINVAL, ct_index_select(F.a, 0, NULL));
  TA(ct_index_select, CT_EDTYPE, "float32", ct_index_select(F.a, 0, F.labf)); /* torch: Expected dtype int32/int64 */
  T(ct_index_select, CT_ESHAPE, ct_index_select(F.a, 0, F.i64));
  T(ct_index_select, CT_ESHAPE, ct_index_select(F.a, 5, F.lab));
  T(ct_index_select, CT_EDEVICE, ct_index_select(F.fake, 0, F.lab));
  T(ct_gather, CT_EINVAL, ct_gather(NULL, 0, F.i64));
  T(ct_gather, CT_EINVAL, ct_gather(F.a, 0, NULL));
  TA(ct_gather, CT_EDTYPE, "float32", ct_gather(F.a, 0, F.b));
  T(ct_gather, CT_ESHAPE, ct_gather(F.a, 0, F.lab));
  T(ct_gather, CT_ESHAPE, ct_gather(F.a, -3, F.i64));
  T(ct_gather, CT_EDEVICE, ct_gather(F.fake, 0, F.i64));
  S(ct_fill_, CT_EINVAL, ct_fill_(NULL, 1));
  S(ct_zero_, CT_EINVAL, ct_zero_(NULL));
}

/* ---- autograd.h */
static ct_tensor *square(ct_tensor *const *in, void *ctx) {
  (void)ctx;
  return ct_mul(in[0], in[0]);
}

static void noop_hook(ct_tensor *leaf, void *ctx) { (void)leaf, (void)ctx; }

static void test_autograd(void **state) {
  (void)state;
  S(ct_tensor_register_post_accumulate_grad_hook, CT_EINVAL, ct_tensor_register_post_accumulate_grad_hook(NULL, noop_hook, NULL));
  SN(ct_tensor_register_post_accumulate_grad_hook, CT_EINVAL, "fn", ct_tensor_register_post_accumulate_grad_hook(F.a, NULL, NULL));
  S(ct_tensor_register_post_accumulate_grad_hook, CT_EAUTOGRAD, ct_tensor_register_post_accumulate_grad_hook(F.a, noop_hook, NULL));
  S(ct_tensor_remove_post_accumulate_grad_hook, CT_EINVAL, ct_tensor_remove_post_accumulate_grad_hook(NULL, noop_hook, NULL));
  SN(ct_tensor_remove_post_accumulate_grad_hook, CT_EINVAL, "fn", ct_tensor_remove_post_accumulate_grad_hook(F.a, NULL, NULL));
  S(ct_tensor_remove_post_accumulate_grad_hook, CT_EINVAL, ct_tensor_remove_post_accumulate_grad_hook(F.a, noop_hook, NULL));
  S(ct_requires_grad_, CT_EINVAL, ct_requires_grad_(NULL, 1));
  S(ct_requires_grad_, CT_EDTYPE, ct_requires_grad_(F.i64, 1));
  V(ct_requires_grad, CT_EINVAL, ct_requires_grad(NULL) == 0);
  V(ct_is_leaf, CT_EINVAL, ct_is_leaf(NULL) == 0);
  T(ct_grad, CT_EINVAL, ct_grad(NULL));
  V(ct_zero_grad, CT_EINVAL, DO(ct_zero_grad(NULL)));
  P(ct_grad_fn_name, CT_EINVAL, ct_grad_fn_name(NULL));
  T(ct_detach, CT_EINVAL, ct_detach(NULL));
  S(ct_backward, CT_EINVAL, ct_backward(NULL));
  S(ct_backward, CT_EAUTOGRAD, ct_backward(F.scalar));
  S(ct_backward, CT_EAUTOGRAD, ct_backward(F.i64));
  N(ct_no_grad_begin, DO(ct_no_grad_begin()) && !ct_grad_enabled());
  N(ct_no_grad_end, DO(ct_no_grad_end()) && ct_grad_enabled());
  N(ct_no_grad_end, DO(ct_no_grad_end()) && ct_grad_enabled()); /* one end too many is ignored */
  N(ct_no_grad_begin, DO(ct_no_grad_begin()) && DO(ct_no_grad_end()) && ct_grad_enabled());
  N(ct_grad_enabled, ct_grad_enabled() == 1);
  ct_tensor *in[1] = {F.f64}, *nul[1] = {NULL};
  S(ct_gradcheck, CT_EINVAL, ct_gradcheck(NULL, NULL, 1, in, 1e-6, 1e-5, 1e-3));
  S(ct_gradcheck, CT_EINVAL, ct_gradcheck(square, NULL, 1, NULL, 1e-6, 1e-5, 1e-3));
  S(ct_gradcheck, CT_EINVAL, ct_gradcheck(square, NULL, -1, in, 1e-6, 1e-5, 1e-3));
  S(ct_gradcheck, CT_EINVAL, ct_gradcheck(square, NULL, 1, nul, 1e-6, 1e-5, 1e-3));
  S(ct_gradcheck, CT_EINVAL, ct_gradcheck(square, NULL, 1, in, 1e-6, 1e-5, 1e-3)); /* not requiring grad */
  S(ct_gradcheck, CT_EINVAL, ct_gradcheck(square, NULL, 1, (ct_tensor *[]){F.a}, 1e-6, 1e-5, 1e-3));
  /* autocast (cuttle/autocast.h); no row leaves a region open */
  S(ct_autocast_begin, CT_EDTYPE, ct_autocast_begin(CT_CPU, CT_F32, 1));
  S(ct_autocast_begin, CT_EDTYPE, ct_autocast_begin(CT_CUDA, CT_I64, 0));
  S(ct_autocast_begin, CT_EINVAL, ct_autocast_begin((ct_device_kind)99, CT_F16, 1));
  S(ct_autocast_end, CT_EINVAL, ct_autocast_end());
  V(ct_autocast_enabled, CT_EINVAL, ct_autocast_enabled((ct_device_kind)99) == 0);
  V(ct_autocast_dtype, CT_EINVAL, ct_autocast_dtype((ct_device_kind)-1) == CT_DTYPE_COUNT);
  N(ct_autocast_enabled, ct_autocast_enabled(CT_CPU) == 0);
  N(ct_autocast_dtype, ct_autocast_dtype(CT_CPU) == CT_BF16 && ct_autocast_dtype(CT_CUDA) == CT_F16);
  N(ct_autocast_begin, ct_autocast_begin(CT_CPU, CT_F16, 1) == CT_OK && ct_autocast_enabled(CT_CPU) == 1 &&
                           ct_autocast_end() == CT_OK && ct_autocast_enabled(CT_CPU) == 0);
  /* an op whose inputs autocast cast still fails under its own name */
  if (ct_autocast_begin(CT_CPU, CT_BF16, 1) == CT_OK) {
    T(ct_matmul, CT_ESHAPE, ct_matmul(F.a, F.b));
    T(ct_linear, CT_EDEVICE, ct_linear(F.a, F.fake, NULL));
    ct_autocast_end();
  }
}

/* ---- nn.h, optim.h */
static void test_nn_optim(void **state) {
  (void)state;
  ct_named_tensor nt[4];
  T(ct_module_forward, CT_EINVAL, ct_module_forward(NULL, F.a));
  T(ct_module_forward, CT_EINVAL, ct_module_forward(F.lin, NULL));
  /* the op's message, behind the function and the module (and the child) that ran it */
  TA(ct_module_forward, CT_ESHAPE, "(Linear(3, 2)): input has 4 features (shape (4,)), expected 3", ct_module_forward(F.lin, F.r1));
  TA(ct_module_forward, CT_EDEVICE, "(Linear(3, 2)): linear:", ct_module_forward(F.lin, F.fake));
  TA(ct_module_forward, CT_ESHAPE, "(Sequential): child 0, Linear(3, 2): input has 4 features (shape (1, 2, 4, 4))",
     ct_module_forward(F.seq, F.x4));
  P(ct_linear_new, CT_EINVAL, ct_linear_new(-1, 2, 1, CT_DEVICE_CPU, NULL));
  P(ct_linear_new, CT_EINVAL, ct_linear_new(3, -2, 1, CT_DEVICE_CPU, NULL));
  P(ct_linear_new, CT_EINVAL, ct_linear_new(INT64_MAX / 2, 4, 1, CT_DEVICE_CPU, NULL));
  P(ct_linear_new, CT_EDEVICE, ct_linear_new(3, 2, 1, cuda7, NULL));
  P(ct_linear_new, CT_EDEVICE, ct_linear_new(3, 2, 0, cpu3, NULL));
  P(ct_conv2d_new, CT_EINVAL, ct_conv2d_new(-1, 2, 3, NULL, 1, CT_DEVICE_CPU, NULL));
  P(ct_conv2d_new, CT_EINVAL, ct_conv2d_new(2, -2, 3, NULL, 1, CT_DEVICE_CPU, NULL));
  P(ct_conv2d_new, CT_EINVAL, ct_conv2d_new(2, 2, 0, NULL, 1, CT_DEVICE_CPU, NULL));
  P(ct_conv2d_new, CT_EINVAL, ct_conv2d_new(2, 2, -3, NULL, 1, CT_DEVICE_CPU, NULL));
  P(ct_conv2d_new, CT_EINVAL, ct_conv2d_new(INT64_MAX / 2, 4, 3, NULL, 1, CT_DEVICE_CPU, NULL));
  P(ct_conv2d_new, CT_EINVAL, ct_conv2d_new(2, 2, INT_MAX, NULL, 1, CT_DEVICE_CPU, NULL));
  P(ct_conv2d_new, CT_EINVAL, ct_conv2d_new(3, 2, 3, &(ct_conv2d_opts){.groups = 2}, 1, CT_DEVICE_CPU, NULL));
  P(ct_conv2d_new, CT_EDEVICE, ct_conv2d_new(2, 2, 3, NULL, 1, cuda7, NULL));
  /* the options, checked at construction as torch.nn.Conv2d does (0 means the default) */
  PA(ct_conv2d_new, CT_EINVAL, "stride", ct_conv2d_new(2, 2, 3, &(ct_conv2d_opts){.stride = {-1, 1}}, 1, CT_DEVICE_CPU, NULL));
  PA(ct_conv2d_new, CT_EINVAL, "stride", ct_conv2d_new(2, 2, 3, &(ct_conv2d_opts){.stride = {1, INT_MIN}}, 1, CT_DEVICE_CPU, NULL));
  PA(ct_conv2d_new, CT_EINVAL, "padding", ct_conv2d_new(2, 2, 3, &(ct_conv2d_opts){.padding = {-1, 0}}, 1, CT_DEVICE_CPU, NULL));
  PA(ct_conv2d_new, CT_EINVAL, "padding", ct_conv2d_new(2, 2, 3, &(ct_conv2d_opts){.padding = {0, -4}}, 1, CT_DEVICE_CPU, NULL));
  PA(ct_conv2d_new, CT_EINVAL, "dilation", ct_conv2d_new(2, 2, 3, &(ct_conv2d_opts){.dilation = {-1, 1}}, 1, CT_DEVICE_CPU, NULL));
  PA(ct_conv2d_new, CT_EINVAL, "groups", ct_conv2d_new(2, 2, 3, &(ct_conv2d_opts){.groups = -2}, 1, CT_DEVICE_CPU, NULL));
  PA(ct_conv2d_new, CT_EINVAL, "kernel_size", ct_conv2d_new(2, 2, INT_MIN, NULL, 1, CT_DEVICE_CPU, NULL));
  P(ct_batchnorm2d_new, CT_EINVAL, ct_batchnorm2d_new(-1, 0, 0, CT_DEVICE_CPU));
  P(ct_batchnorm2d_new, CT_EINVAL, ct_batchnorm2d_new(INT64_MAX, 0, 0, CT_DEVICE_CPU));
  P(ct_batchnorm2d_new, CT_EDEVICE, ct_batchnorm2d_new(4, 0, 0, cuda7));
  P(ct_batchnorm2d_new, CT_EDEVICE, ct_batchnorm2d_new(4, 0, 0, cpu_neg));
  PA(ct_batchnorm2d_new, CT_EINVAL, "eps", ct_batchnorm2d_new(4, -1e-5, 0, CT_DEVICE_CPU));
  PA(ct_batchnorm2d_new, CT_EINVAL, "eps", ct_batchnorm2d_new(4, NAN, 0, CT_DEVICE_CPU));
  ct_module *m = ct_relu_new();
  N(ct_relu_new, m != NULL);
  ct_module_free(m);
  P(ct_max_pool2d_new, CT_EINVAL, ct_max_pool2d_new(NULL));
  PA(ct_max_pool2d_new, CT_EINVAL, "kernel", ct_max_pool2d_new(&(ct_pool2d_opts){.kernel = {0, 2}}));
  PA(ct_max_pool2d_new, CT_EINVAL, "kernel", ct_max_pool2d_new(&(ct_pool2d_opts){.kernel = {2, -2}}));
  PA(ct_max_pool2d_new, CT_EINVAL, "stride", ct_max_pool2d_new(&(ct_pool2d_opts){.kernel = {2, 2}, .stride = {-1, 2}}));
  PA(ct_max_pool2d_new, CT_EINVAL, "stride", ct_max_pool2d_new(&(ct_pool2d_opts){.kernel = {2, 2}, .stride = {0, INT_MIN}}));
  PA(ct_max_pool2d_new, CT_EINVAL, "padding", ct_max_pool2d_new(&(ct_pool2d_opts){.kernel = {2, 2}, .padding = {-1, 0}}));
  PA(ct_max_pool2d_new, CT_EINVAL, "padding", ct_max_pool2d_new(&(ct_pool2d_opts){.kernel = {3, 3}, .padding = {0, 2}}));
  m = ct_flatten_new();
  N(ct_flatten_new, m != NULL);
  ct_module_free(m);
  P(ct_dropout_new, CT_EINVAL, ct_dropout_new(1.5));
  P(ct_dropout_new, CT_EINVAL, ct_dropout_new(-0.1));
  P(ct_dropout_new, CT_EINVAL, ct_dropout_new(NAN));
  P(ct_sequential_new, CT_EINVAL, ct_sequential_new(-1, NULL));
  P(ct_sequential_new, CT_EINVAL, ct_sequential_new(2, NULL));
  P(ct_sequential_new, CT_EINVAL, ct_sequential_new(2, (ct_module *[]){ct_relu_new(), NULL}));
  N(ct_module_free, DO(ct_module_free(NULL)));
  V(ct_module_train, CT_EINVAL, DO(ct_module_train(NULL, 1)));
  V(ct_module_type, CT_EINVAL, strcmp(ct_module_type(NULL), "?") == 0);
  S(ct_module_to, CT_EINVAL, ct_module_to(NULL, CT_DEVICE_CPU));
  S(ct_module_to, CT_EDEVICE, ct_module_to(F.lin, cuda7));
  S(ct_module_to, CT_EDEVICE, ct_module_to(F.lin, cpu3));
  S(ct_module_to, CT_EDEVICE, ct_module_to(F.lin, bad_kind));
  S(ct_module_to_memory_format, CT_EINVAL, ct_module_to_memory_format(NULL, CT_CHANNELS_LAST));
  S(ct_module_to_memory_format, CT_EINVAL, ct_module_to_memory_format(F.lin, (ct_memory_format)9));
  S(ct_module_named_tensors, CT_EINVAL, ct_module_named_tensors(NULL, 1, nt, 4));
  S(ct_module_named_tensors, CT_EINVAL, ct_module_named_tensors(F.lin, 1, nt, -1));
  N(ct_module_named_tensors, ct_module_named_tensors(F.lin, 1, NULL, 0) == 2);
  V(ct_module_num_params, CT_EINVAL, ct_module_num_params(NULL) == -1);
  P(ct_embedding_new, CT_EINVAL, ct_embedding_new(0, 4, CT_NO_PADDING_IDX, CT_DEVICE_CPU, NULL));
  P(ct_embedding_new, CT_EINVAL, ct_embedding_new(4, -1, CT_NO_PADDING_IDX, CT_DEVICE_CPU, NULL));
  PA(ct_embedding_new, CT_EINVAL, "padding_idx", ct_embedding_new(4, 2, 4, CT_DEVICE_CPU, NULL));
  PA(ct_embedding_new, CT_EINVAL, "padding_idx", ct_embedding_new(4, 2, -5, CT_DEVICE_CPU, NULL));
  P(ct_embedding_new, CT_EDEVICE, ct_embedding_new(4, 2, CT_NO_PADDING_IDX, cuda7, NULL));
  PA(ct_multihead_attention_new, CT_EINVAL, "divisible", ct_multihead_attention_new(10, 3, 0, 1, 1, CT_DEVICE_CPU, NULL));
  PA(ct_multihead_attention_new, CT_EINVAL, "divisible", ct_multihead_attention_new(0, 1, 0, 1, 1, CT_DEVICE_CPU, NULL));
  PA(ct_multihead_attention_new, CT_EINVAL, "dropout", ct_multihead_attention_new(4, 2, 1.0, 1, 1, CT_DEVICE_CPU, NULL));
  PA(ct_multihead_attention_new, CT_EINVAL, "batch_first", ct_multihead_attention_new(4, 2, 0, 1, 2, CT_DEVICE_CPU, NULL));
  P(ct_multihead_attention_new, CT_EDEVICE, ct_multihead_attention_new(4, 2, 0, 1, 1, cuda7, NULL));
  T(ct_multihead_attention_forward, CT_EINVAL, ct_multihead_attention_forward(NULL, F.x4, F.x4, F.x4, NULL, 0));
  T(ct_multihead_attention_forward, CT_EINVAL, ct_multihead_attention_forward(F.lin, F.a, F.a, F.a, NULL, 0));
  T(ct_multihead_attention_forward, CT_EINVAL, ct_multihead_attention_forward(F.lin, NULL, F.a, F.a, NULL, 0));
  N(ct_gpt2_config_default, DO(ct_gpt2_config_default(NULL))); /* nothing for NULL */
  S(ct_gpt2_config_check, CT_EINVAL, ct_gpt2_config_check(NULL));
  {
    ct_gpt2_config gc;
    ct_gpt2_config_default(&gc);
    gc.n_head = 7;
    SN(ct_gpt2_config_check, CT_EINVAL, "divisible", ct_gpt2_config_check(&gc));
    PA(ct_gpt2_new, CT_EINVAL, "divisible", ct_gpt2_new(&gc, CT_DEVICE_CPU, NULL));
    ct_gpt2_config_default(&gc);
    gc.vocab_size = 0;
    PA(ct_gpt2_new, CT_EINVAL, "vocab_size", ct_gpt2_new(&gc, CT_DEVICE_CPU, NULL));
    snprintf(gc.activation_function, sizeof gc.activation_function, "tanh");
    gc.vocab_size = 8;
    SN(ct_gpt2_config_check, CT_EINVAL, "activation_function", ct_gpt2_config_check(&gc));
  }
  P(ct_gpt2_new, CT_EINVAL, ct_gpt2_new(NULL, CT_DEVICE_CPU, NULL));
  P(ct_gpt2_config_of, CT_EINVAL, ct_gpt2_config_of(NULL));
  PA(ct_gpt2_config_of, CT_EINVAL, "Linear", ct_gpt2_config_of(F.lin));
  {
    ct_module *gm = NULL;
    S(ct_gpt2_from_pretrained, CT_EINVAL, ct_gpt2_from_pretrained(NULL, CT_DEVICE_CPU, &gm));
    S(ct_gpt2_from_pretrained, CT_EINVAL, ct_gpt2_from_pretrained("/tmp", CT_DEVICE_CPU, NULL));
    SN(ct_gpt2_from_pretrained, CT_EIO, "/nonexistent/gpt2", ct_gpt2_from_pretrained("/nonexistent/gpt2", CT_DEVICE_CPU, &gm));
  }
  P(ct_gpt2_cache_new, CT_EINVAL, ct_gpt2_cache_new(NULL, 1));
  PA(ct_gpt2_cache_new, CT_EINVAL, "Linear", ct_gpt2_cache_new(F.lin, 1));
  N(ct_gpt2_cache_free, DO(ct_gpt2_cache_free(NULL)));
  V(ct_gpt2_cache_length, CT_EINVAL, ct_gpt2_cache_length(NULL) == -1);
  T(ct_gpt2_forward_cached, CT_EINVAL, ct_gpt2_forward_cached(NULL, F.lab, NULL));
  T(ct_gpt2_forward_cached, CT_EINVAL, ct_gpt2_forward_cached(F.lin, NULL, NULL));
  S(ct_gpt2_save_pretrained, CT_EINVAL, ct_gpt2_save_pretrained(NULL, "/tmp/x"));
  S(ct_gpt2_save_pretrained, CT_EINVAL, ct_gpt2_save_pretrained(F.lin, NULL));
  SN(ct_gpt2_save_pretrained, CT_EINVAL, "Linear", ct_gpt2_save_pretrained(F.lin, "/tmp/x"));
  /* the BPE tokenizer (cuttle/tokenizer.h) */
  P(ct_bpe_load, CT_EINVAL, ct_bpe_load(NULL, "/tmp/merges.txt"));
  P(ct_bpe_load, CT_EINVAL, ct_bpe_load("/tmp/vocab.json", NULL));
  PA(ct_bpe_load, CT_EIO, "/nonexistent/vocab.json", ct_bpe_load("/nonexistent/vocab.json", "/nonexistent/merges.txt"));
  P(ct_bpe_parse, CT_EINVAL, ct_bpe_parse(NULL, 3, "", 0, NULL, NULL));
  P(ct_bpe_parse, CT_EINVAL, ct_bpe_parse("{}", 2, NULL, 3, NULL, NULL));
  PA(ct_bpe_parse, CT_EFORMAT, "vocab.json line 1", ct_bpe_parse("[1]", 3, "", 0, NULL, NULL));
  PA(ct_bpe_parse, CT_EFORMAT, "merges.txt line 2", ct_bpe_parse("{\"a\": 0}", 8, "#version: 0.2\na b c\n", 20, NULL, NULL));
  PA(ct_bpe_parse, CT_EFORMAT, "merges.txt line 1", ct_bpe_parse("{\"a\": 0}", 8, "a a\n", 4, NULL, NULL));
  {
    ct_bpe *bpe = ct_bpe_parse("{\"a\": 0}", 8, "", 0, NULL, NULL); /* one token, "a" */
    int64_t *ids = NULL, count = 0;
    S(ct_bpe_encode, CT_EINVAL, ct_bpe_encode(NULL, "a", 1, &ids, &count));
    S(ct_bpe_encode, CT_EINVAL, ct_bpe_encode(bpe, "a", 1, NULL, &count));
    S(ct_bpe_encode, CT_EINVAL, ct_bpe_encode(bpe, "a", 1, &ids, NULL));
    S(ct_bpe_encode, CT_EINVAL, ct_bpe_encode(bpe, NULL, 1, &ids, &count));
    S(ct_bpe_encode, CT_EINVAL, ct_bpe_encode(bpe, "b", 1, &ids, &count)); /* no token for "b", no "<|endoftext|>" */
    P(ct_bpe_decode, CT_EINVAL, ct_bpe_decode(NULL, (int64_t[]){0}, 1, NULL));
    P(ct_bpe_decode, CT_EINVAL, ct_bpe_decode(bpe, NULL, 1, NULL));
    P(ct_bpe_decode, CT_EINVAL, ct_bpe_decode(bpe, (int64_t[]){0}, -1, NULL));
    PA(ct_bpe_decode, CT_EINVAL, "id 1", ct_bpe_decode(bpe, (int64_t[]){0, 1}, 2, NULL));
    PA(ct_bpe_decode, CT_EINVAL, "id -1", ct_bpe_decode(bpe, (int64_t[]){-1}, 1, NULL));
    V(ct_bpe_vocab_size, CT_EINVAL, ct_bpe_vocab_size(NULL) == -1);
    V(ct_bpe_token_id, CT_EINVAL, ct_bpe_token_id(NULL, "a") == -1);
    V(ct_bpe_token_id, CT_EINVAL, ct_bpe_token_id(bpe, NULL) == -1);
    V(ct_bpe_token_id, CT_EINVAL, ct_bpe_token_id(bpe, "b") == -1);
    N(ct_bpe_free, DO(ct_bpe_free(NULL)));
    ct_bpe_free(bpe);
  }
  P(ct_text_from_file, CT_EINVAL, ct_text_from_file(NULL));
  PA(ct_text_from_file, CT_EIO, "/nonexistent/t.txt", ct_text_from_file("/nonexistent/t.txt"));
  P(ct_text_from_bytes, CT_EINVAL, ct_text_from_bytes(NULL, 3, NULL));
  P(ct_text_from_ids, CT_EINVAL, ct_text_from_ids(NULL, 3, 10, NULL));
  PA(ct_text_from_ids, CT_EINVAL, "vocab_size", ct_text_from_ids((int64_t[]){1}, 1, 0, NULL));
  PA(ct_text_from_ids, CT_EINVAL, "id 12", ct_text_from_ids((int64_t[]){1, 12}, 2, 10, NULL));
  N(ct_text_free, DO(ct_text_free(NULL)));
  V(ct_text_length, CT_EINVAL, ct_text_length(NULL, CT_TEXT_ALL) == -1);
  V(ct_text_vocab_size, CT_EINVAL, ct_text_vocab_size(NULL) == -1);
  V(ct_text_num_windows, CT_EINVAL, ct_text_num_windows(NULL, CT_TEXT_ALL, 4) == -1);
  {
    ct_tensor *tx = NULL, *ty = NULL;
    S(ct_text_batch, CT_EINVAL, ct_text_batch(NULL, CT_TEXT_ALL, 1, 4, 0, 0, CT_DEVICE_CPU, &tx, &ty));
    S(ct_text_windows, CT_EINVAL, ct_text_windows(NULL, CT_TEXT_ALL, 4, 0, 1, CT_DEVICE_CPU, &tx, &ty));
    ct_text *tt = ct_text_from_bytes("abcdef", 6, "six");
    SN(ct_text_batch, CT_ESHAPE, "six's whole split has 6 tokens", ct_text_batch(tt, CT_TEXT_ALL, 1, 8, 0, 0, CT_DEVICE_CPU, &tx, &ty));
    SN(ct_text_batch, CT_EINVAL, "B >= 1", ct_text_batch(tt, CT_TEXT_ALL, 0, 2, 0, 0, CT_DEVICE_CPU, &tx, &ty));
    SN(ct_text_batch, CT_EDEVICE, "ct_text_batch", ct_text_batch(tt, CT_TEXT_ALL, 1, 2, 0, 0, cuda7, &tx, &ty));
    SN(ct_text_windows, CT_EINVAL, "windows 3 .. 3", ct_text_windows(tt, CT_TEXT_ALL, 2, 3, 1, CT_DEVICE_CPU, &tx, &ty));
    ct_text_free(tt);
  }
  T(ct_clip_grad_norm_, CT_EINVAL, ct_clip_grad_norm_(NULL, 1, 2));
  TA(ct_clip_grad_norm_, CT_EINVAL, "max_norm", ct_clip_grad_norm_(F.lin, -1, 2));
  TA(ct_clip_grad_norm_, CT_EINVAL, "max_norm", ct_clip_grad_norm_(F.lin, INFINITY, 2));
  TA(ct_clip_grad_norm_, CT_EINVAL, "norm_type", ct_clip_grad_norm_(F.lin, 1, 0));
  TA(ct_clip_grad_norm_, CT_EINVAL, "norm_type", ct_clip_grad_norm_(F.lin, 1, NAN));
  V(ct_module_print, CT_EINVAL, DO(ct_module_print(NULL, stderr)));
  V(ct_module_print, CT_EINVAL, DO(ct_module_print(F.lin, NULL)));
  /* the layers of issue 19 */
  P(ct_batchnorm1d_new, CT_EINVAL, ct_batchnorm1d_new(0, 0, 0, CT_DEVICE_CPU));
  PA(ct_batchnorm1d_new, CT_EINVAL, "momentum", ct_batchnorm1d_new(4, 0, 1.5, CT_DEVICE_CPU));
  P(ct_batchnorm1d_new, CT_EDEVICE, ct_batchnorm1d_new(4, 0, 0, cuda7));
  P(ct_layernorm_new, CT_EINVAL, ct_layernorm_new(0, (int64_t[]){4}, 0, 1, CT_DEVICE_CPU));
  P(ct_layernorm_new, CT_EINVAL, ct_layernorm_new(1, NULL, 0, 1, CT_DEVICE_CPU));
  PA(ct_layernorm_new, CT_EINVAL, "normalized_shape[1]", ct_layernorm_new(2, (int64_t[]){4, 0}, 0, 1, CT_DEVICE_CPU));
  PA(ct_layernorm_new, CT_EINVAL, "eps", ct_layernorm_new(1, (int64_t[]){4}, -1, 1, CT_DEVICE_CPU));
  P(ct_layernorm_new, CT_EDEVICE, ct_layernorm_new(1, (int64_t[]){4}, 0, 1, cuda7));
  m = ct_sigmoid_new();
  N(ct_sigmoid_new, m != NULL);
  ct_module_free(m);
  m = ct_tanh_new();
  N(ct_tanh_new, m != NULL);
  ct_module_free(m);
  m = ct_silu_new();
  N(ct_silu_new, m != NULL);
  ct_module_free(m);
  m = ct_identity_new();
  N(ct_identity_new, m != NULL);
  ct_module_free(m);
  P(ct_gelu_new, CT_EINVAL, ct_gelu_new(2));
  P(ct_avg_pool2d_new, CT_EINVAL, ct_avg_pool2d_new(NULL));
  PA(ct_avg_pool2d_new, CT_EINVAL, "padding", ct_avg_pool2d_new(&(ct_pool2d_opts){.kernel = {2, 2}, .padding = {2, 0}}));
  P(ct_adaptive_avg_pool2d_new, CT_EINVAL, ct_adaptive_avg_pool2d_new(0, 1));
  P(ct_adaptive_avg_pool2d_new, CT_EINVAL, ct_adaptive_avg_pool2d_new(1, -3));
  /* modules that users define */
  P(ct_module_new, CT_EINVAL, ct_module_new("X", NULL, NULL, NULL));
  V(ct_module_ctx, CT_EINVAL, ct_module_ctx(NULL) == NULL);
  V(ct_module_is_training, CT_EINVAL, ct_module_is_training(NULL) == 0);
  S(ct_module_add_child, CT_EINVAL, ct_module_add_child(NULL, "a", ct_relu_new()));
  S(ct_module_add_child, CT_EINVAL, ct_module_add_child(F.lin, "a", ct_relu_new()));
  S(ct_module_add_child, CT_EINVAL, ct_module_add_child(F.seq, "a", NULL));
  S(ct_module_register_parameter, CT_EINVAL, ct_module_register_parameter(NULL, "w", ct_ones(1, s23, CT_F32, CT_DEVICE_CPU)));
  S(ct_module_register_parameter, CT_EINVAL, ct_module_register_parameter(F.seq, "w", NULL));
  S(ct_module_register_buffer, CT_EINVAL, ct_module_register_buffer(NULL, "b", ct_ones(1, s23, CT_F32, CT_DEVICE_CPU)));
  S(ct_module_register_buffer, CT_EINVAL, ct_module_register_buffer(F.lin, "b", ct_ones(1, s23, CT_F32, CT_DEVICE_CPU)));
  P(ct_module_child, CT_EINVAL, ct_module_child(NULL, "0"));
  P(ct_module_child, CT_EINVAL, ct_module_child(F.seq, NULL));
  PA(ct_module_child, CT_EINVAL, "no child \"7\"", ct_module_child(F.seq, "7"));
  P(ct_module_tensor, CT_EINVAL, ct_module_tensor(NULL, "0.weight"));
  PA(ct_module_tensor, CT_EINVAL, "no tensor \"scale\"", ct_module_tensor(F.seq, "0.scale"));
  V(ct_module_num_children, CT_EINVAL, ct_module_num_children(NULL) == CT_EINVAL);
  N(ct_module_num_children, ct_module_num_children(F.seq) == 2);
  P(ct_module_child_at, CT_EINVAL, ct_module_child_at(NULL, 0, NULL));
  P(ct_module_child_at, CT_EINVAL, ct_module_child_at(F.seq, 2, NULL));
  P(ct_module_child_at, CT_EINVAL, ct_module_child_at(F.seq, -1, NULL));
  PA(ct_resnet_new, CT_EINVAL, "pass 18, 34 or 50", ct_resnet_new(101, NULL, CT_DEVICE_CPU, NULL));
  P(ct_resnet_new, CT_EINVAL, ct_resnet_new(18, &(ct_resnet_opts){.in_channels = -1}, CT_DEVICE_CPU, NULL));
  P(ct_resnet_new, CT_EINVAL, ct_resnet_new(18, &(ct_resnet_opts){.num_classes = -2}, CT_DEVICE_CPU, NULL));
  P(ct_resnet_new, CT_EDEVICE, ct_resnet_new(18, NULL, cuda7, NULL));
  P(ct_model_new, CT_EINVAL, ct_model_new(NULL, CT_DEVICE_CPU, NULL));
  P(ct_model_new, CT_EINVAL, ct_model_new("resnet", CT_DEVICE_CPU, NULL));
  P(ct_model_new, CT_EDEVICE, ct_model_new("mlp", cuda7, NULL));
  P(ct_model_new, CT_EDEVICE, ct_model_new("cnn", cpu_neg, NULL));
  P(ct_model_new_for, CT_EINVAL, ct_model_new_for("resnet", 3, 32, 32, 10, CT_DEVICE_CPU, NULL));
  P(ct_model_new_for, CT_EINVAL, ct_model_new_for("mlp", 0, 32, 32, 10, CT_DEVICE_CPU, NULL));
  P(ct_model_new_for, CT_EINVAL, ct_model_new_for("mlp", 3, 32, 32, 0, CT_DEVICE_CPU, NULL));
  P(ct_model_new_for, CT_EINVAL, ct_model_new_for("cnn", 3, 3, 32, 10, CT_DEVICE_CPU, NULL));
  P(ct_model_new_for, CT_EDEVICE, ct_model_new_for("cnn", 3, 32, 32, 10, cuda7, NULL));
  /* tensor-core alignment */
  V(ct_alignment_multiple, CT_EDTYPE, ct_alignment_multiple((ct_dtype)99) == -1);
  V(ct_alignment_multiple, CT_EDTYPE, ct_alignment_multiple(CT_DTYPE_COUNT) == -1);
  {
    ct_alignment_issue is[2];
    int cnt = 7;
    S(ct_module_check_alignment, CT_EINVAL, ct_module_check_alignment(NULL, 2, s23, CT_F16, is, 2, &cnt));
    V(ct_module_check_alignment, CT_EINVAL, DO(ct_module_check_alignment(NULL, 2, s23, CT_F16, is, 2, &cnt)) && cnt == 0);
    S(ct_module_check_alignment, CT_EINVAL, ct_module_check_alignment(F.lin, -1, s23, CT_F16, is, 2, &cnt));
    S(ct_module_check_alignment, CT_EINVAL, ct_module_check_alignment(F.lin, CT_MAX_DIMS + 1, s23, CT_F16, is, 2, &cnt));
    S(ct_module_check_alignment, CT_EINVAL, ct_module_check_alignment(F.lin, 2, NULL, CT_F16, is, 2, &cnt));
    S(ct_module_check_alignment, CT_EINVAL, ct_module_check_alignment(F.lin, 2, s_neg, CT_F16, is, 2, &cnt));
    S(ct_module_check_alignment, CT_EINVAL, ct_module_check_alignment(F.lin, 2, s_over, CT_F16, is, 2, &cnt));
    S(ct_module_check_alignment, CT_EDTYPE, ct_module_check_alignment(F.lin, 2, s23, (ct_dtype)-1, is, 2, &cnt));
    SN(ct_module_check_alignment, CT_EINVAL, "ct_module_check_alignment: cap",
       ct_module_check_alignment(F.lin, 2, s23, CT_F16, is, -1, &cnt));
    SN(ct_module_check_alignment, CT_EINVAL, "ct_module_check_alignment: out is NULL",
       ct_module_check_alignment(F.lin, 2, s23, CT_F16, NULL, 2, &cnt));
    /* an input that does not fit: named with both shapes, as forward names it */
    SN(ct_module_check_alignment, CT_ESHAPE,
       "ct_module_check_alignment: layer 0, Linear(3, 2): input has 4 features (shape (1, 2, 4, 4)), expected 3",
       ct_module_check_alignment(F.seq, 4, (int64_t[]){1, 2, 4, 4}, CT_F16, is, 2, &cnt));
  }

  ct_optim_opts good = {.kind = CT_OPTIM_SGD};
  P(ct_optimizer_new, CT_EINVAL, ct_optimizer_new(NULL, &good));
  P(ct_optimizer_new, CT_EINVAL, ct_optimizer_new(F.lin, NULL));
  /* torch.optim's ValueErrors ("Invalid learning rate", "Invalid epsilon value", "Invalid beta
   * parameter at index 0"); a NaN fails them too */
  PA(ct_optimizer_new, CT_EINVAL, "learning rate", ct_optimizer_new(F.lin, &(ct_optim_opts){.lr = -1}));
  PA(ct_optimizer_new, CT_EINVAL, "learning rate", ct_optimizer_new(F.lin, &(ct_optim_opts){.lr = NAN}));
  PA(ct_optimizer_new, CT_EINVAL, "learning rate", ct_optimizer_new(F.lin, &(ct_optim_opts){.kind = CT_OPTIM_ADAMW, .lr = -INFINITY}));
  PA(ct_optimizer_new, CT_EINVAL, "nesterov", ct_optimizer_new(F.lin, &(ct_optim_opts){.nesterov = 1}));
  PA(ct_optimizer_new, CT_EINVAL, "beta1", ct_optimizer_new(F.lin, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .beta1 = 1.5}));
  PA(ct_optimizer_new, CT_EINVAL, "beta1", ct_optimizer_new(F.lin, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .beta1 = -0.1}));
  PA(ct_optimizer_new, CT_EINVAL, "beta2", ct_optimizer_new(F.lin, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .beta2 = 1}));
  PA(ct_optimizer_new, CT_EINVAL, "beta2", ct_optimizer_new(F.lin, &(ct_optim_opts){.kind = CT_OPTIM_ADAMW, .beta2 = NAN}));
  PA(ct_optimizer_new, CT_EINVAL, "eps", ct_optimizer_new(F.lin, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .eps = -1e-8}));
  PA(ct_optimizer_new, CT_EINVAL, "eps", ct_optimizer_new(F.lin, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .eps = NAN}));
  PA(ct_optimizer_new, CT_EINVAL, "weight_decay", ct_optimizer_new(F.lin, &(ct_optim_opts){.weight_decay = -1}));
  PA(ct_optimizer_new, CT_EINVAL, "momentum", ct_optimizer_new(F.lin, &(ct_optim_opts){.momentum = -0.9}));
  PA(ct_optimizer_new, CT_EINVAL, "momentum", ct_optimizer_new(F.lin, &(ct_optim_opts){.momentum = NAN}));
  PA(ct_optimizer_new, CT_EINVAL, "kind", ct_optimizer_new(F.lin, &(ct_optim_opts){.kind = (ct_optim_kind)3}));
  PA(ct_optimizer_new, CT_EINVAL, "kind", ct_optimizer_new(F.lin, &(ct_optim_opts){.kind = (ct_optim_kind)-1}));
  N(ct_optimizer_free, DO(ct_optimizer_free(NULL)));
  S(ct_optimizer_step, CT_EINVAL, ct_optimizer_step(NULL));
  V(ct_optimizer_zero_grad, CT_EINVAL, DO(ct_optimizer_zero_grad(NULL)));
  D(ct_optimizer_lr, CT_EINVAL, ct_optimizer_lr(NULL));
  double lr = ct_optimizer_lr(F.opt);
  V(ct_optimizer_set_lr, CT_EINVAL, DO(ct_optimizer_set_lr(NULL, 0.1)));
  V(ct_optimizer_set_lr, CT_EINVAL, DO(ct_optimizer_set_lr(F.opt, -0.1)) && ct_optimizer_lr(F.opt) == lr);
  V(ct_optimizer_set_lr, CT_EINVAL, DO(ct_optimizer_set_lr(F.opt, NAN)) && ct_optimizer_lr(F.opt) == lr);
  V(ct_optimizer_steps, CT_EINVAL, ct_optimizer_steps(NULL) == -1);
  S(ct_optimizer_named_state, CT_EINVAL, ct_optimizer_named_state(NULL, nt, 4));
  S(ct_optimizer_named_state, CT_EINVAL, ct_optimizer_named_state(F.opt, nt, -1));
  S(ct_optimizer_init_state, CT_EINVAL, ct_optimizer_init_state(NULL));
  V(ct_optimizer_set_steps, CT_EINVAL, DO(ct_optimizer_set_steps(NULL, 3)));
  V(ct_optimizer_set_steps, CT_EINVAL, DO(ct_optimizer_set_steps(F.opt, -3)) && ct_optimizer_steps(F.opt) == 0);
  D(ct_sched_lr, CT_EINVAL, ct_sched_lr(NULL, 0.1, 0));
  D(ct_sched_lr, CT_EINVAL, ct_sched_lr(&(ct_sched_opts){.kind = CT_SCHED_STEP, .step_size = 2}, 0.1, -1));
  /* sizes below 1 take their defaults (1), so these never divide by zero */
  N(ct_sched_lr, isfinite(ct_sched_lr(&(ct_sched_opts){.kind = CT_SCHED_STEP, .step_size = -2}, 0.1, 3)));
  N(ct_sched_lr, isfinite(ct_sched_lr(&(ct_sched_opts){.kind = CT_SCHED_COSINE, .t_max = -1}, 0.1, 3)));
  N(ct_sched_lr, ct_sched_lr(&(ct_sched_opts){.kind = (ct_sched_kind)99}, 0.1, 3) == 0.1);
  N(ct_optimizer_kind, DO(ct_optimizer_kind(NULL)) && ct_optimizer_kind(F.opt) == CT_OPTIM_ADAM);

  /* The GradScaler: GradScaler's constructor asserts growth_factor > 1 and backoff_factor < 1, and
   * unscale_, step and update raise RuntimeError when called out of order. */
  P(ct_grad_scaler_new, CT_EINVAL, ct_grad_scaler_new(NULL));
  PA(ct_grad_scaler_new, CT_EINVAL, "scale", ct_grad_scaler_new(&(ct_grad_scaler_opts){.init_scale = -1}));
  PA(ct_grad_scaler_new, CT_EINVAL, "scale", ct_grad_scaler_new(&(ct_grad_scaler_opts){.init_scale = NAN}));
  PA(ct_grad_scaler_new, CT_EINVAL, "growth_factor", ct_grad_scaler_new(&(ct_grad_scaler_opts){.growth_factor = 0.9}));
  PA(ct_grad_scaler_new, CT_EINVAL, "backoff_factor", ct_grad_scaler_new(&(ct_grad_scaler_opts){.backoff_factor = 1.5}));
  PA(ct_grad_scaler_new, CT_EINVAL, "growth_interval", ct_grad_scaler_new(&(ct_grad_scaler_opts){.growth_interval = -1}));
  ct_grad_scaler *gs = ct_grad_scaler_new(&(ct_grad_scaler_opts){0});
  assert_non_null(gs);
  ct_grad_scaler_state gst;
  N(ct_grad_scaler_free, DO(ct_grad_scaler_free(NULL)));
  T(ct_grad_scaler_scale, CT_EINVAL, ct_grad_scaler_scale(NULL, F.a));
  T(ct_grad_scaler_scale, CT_EINVAL, ct_grad_scaler_scale(gs, NULL));
  S(ct_grad_scaler_unscale_, CT_EINVAL, ct_grad_scaler_unscale_(NULL, F.opt));
  S(ct_grad_scaler_unscale_, CT_EINVAL, ct_grad_scaler_unscale_(gs, NULL));
  S(ct_grad_scaler_step, CT_EINVAL, ct_grad_scaler_step(NULL, F.opt));
  S(ct_grad_scaler_step, CT_EINVAL, ct_grad_scaler_step(gs, NULL));
  S(ct_grad_scaler_update, CT_EINVAL, ct_grad_scaler_update(NULL));
  S(ct_grad_scaler_update, CT_EINVAL, ct_grad_scaler_update(gs)); /* no unscale_ or step since the last update */
  D(ct_grad_scaler_scale_value, CT_EINVAL, ct_grad_scaler_scale_value(NULL));
  V(ct_grad_scaler_steps_taken, CT_EINVAL, ct_grad_scaler_steps_taken(NULL) == -1);
  V(ct_grad_scaler_steps_skipped, CT_EINVAL, ct_grad_scaler_steps_skipped(NULL) == -1);
  V(ct_grad_scaler_last_step_skipped, CT_EINVAL, ct_grad_scaler_last_step_skipped(NULL) == -1);
  S(ct_grad_scaler_state_get, CT_EINVAL, ct_grad_scaler_state_get(NULL, &gst));
  S(ct_grad_scaler_state_get, CT_EINVAL, ct_grad_scaler_state_get(gs, NULL));
  S(ct_grad_scaler_state_set, CT_EINVAL, ct_grad_scaler_state_set(NULL, &gst));
  S(ct_grad_scaler_state_set, CT_EINVAL, ct_grad_scaler_state_set(gs, NULL));
  ct_grad_scaler_state_get(gs, &gst);
  gst.backoff_factor = 2;
  SN(ct_grad_scaler_state_set, CT_EINVAL, "backoff_factor", ct_grad_scaler_state_set(gs, &gst));
  ct_grad_scaler_free(gs);
}

/* ---- io.h */
static void test_io(void **state) {
  (void)state;
  char path[4096], ok_path[4096];
  ct_safetensors_info info;
  const char *k, *v;
  snprintf(path, sizeof path, "%s/out.safetensors", F.dir);
  snprintf(ok_path, sizeof ok_path, "%s/t.safetensors", F.dir);
  const char *names[2] = {"a", "b"}, *null_name[1] = {NULL};
  ct_tensor *ts[2] = {F.a, F.b}, *null_t[1] = {NULL};
  ct_metadata_kv bad_kv = {NULL, "v"};
  S(ct_safetensors_save, CT_EINVAL, ct_safetensors_save(NULL, 2, names, ts, 0, NULL));
  S(ct_safetensors_save, CT_EINVAL, ct_safetensors_save(path, -1, names, ts, 0, NULL));
  S(ct_safetensors_save, CT_EINVAL, ct_safetensors_save(path, 2, NULL, ts, 0, NULL));
  S(ct_safetensors_save, CT_EINVAL, ct_safetensors_save(path, 2, names, NULL, 0, NULL));
  S(ct_safetensors_save, CT_EINVAL, ct_safetensors_save(path, 1, null_name, ts, 0, NULL));
  S(ct_safetensors_save, CT_EINVAL, ct_safetensors_save(path, 1, names, null_t, 0, NULL));
  S(ct_safetensors_save, CT_EINVAL, ct_safetensors_save(path, 0, NULL, NULL, -1, NULL));
  S(ct_safetensors_save, CT_EINVAL, ct_safetensors_save(path, 0, NULL, NULL, 1, NULL));
  S(ct_safetensors_save, CT_EINVAL, ct_safetensors_save(path, 0, NULL, NULL, 1, &bad_kv));
  P(ct_safetensors_open, CT_EINVAL, ct_safetensors_open(NULL));
  P(ct_safetensors_parse, CT_EINVAL, ct_safetensors_parse(NULL, 16, "x"));
  P(ct_safetensors_parse, CT_EFORMAT, ct_safetensors_parse(NULL, 0, NULL));
  N(ct_safetensors_close, DO(ct_safetensors_close(NULL)));
  V(ct_safetensors_count, CT_EINVAL, ct_safetensors_count(NULL) == -1);
  S(ct_safetensors_info_at, CT_EINVAL, ct_safetensors_info_at(NULL, 0, &info));
  S(ct_safetensors_info_at, CT_EINVAL, ct_safetensors_info_at(F.st, -1, &info));
  S(ct_safetensors_info_at, CT_EINVAL, ct_safetensors_info_at(F.st, 1, &info));
  S(ct_safetensors_info_at, CT_EINVAL, ct_safetensors_info_at(F.st, 0, NULL));
  V(ct_safetensors_find, CT_EINVAL, ct_safetensors_find(NULL, "a") == -1);
  V(ct_safetensors_find, CT_EINVAL, ct_safetensors_find(F.st, NULL) == -1);
  N(ct_safetensors_find, ct_safetensors_find(F.st, "zz") == -1 && ct_safetensors_find(F.st, "a") == 0);
  T(ct_safetensors_get, CT_EINVAL, ct_safetensors_get(NULL, "a", CT_DEVICE_CPU));
  T(ct_safetensors_get, CT_EINVAL, ct_safetensors_get(F.st, NULL, CT_DEVICE_CPU));
  T(ct_safetensors_get, CT_EINVAL, ct_safetensors_get(F.st, "zz", CT_DEVICE_CPU));
  T(ct_safetensors_get, CT_EDEVICE, ct_safetensors_get(F.st, "a", cuda7));
  T(ct_safetensors_get, CT_EDEVICE, ct_safetensors_get(F.st, "a", cpu3));
  P(ct_safetensors_metadata, CT_EINVAL, ct_safetensors_metadata(NULL, "k"));
  P(ct_safetensors_metadata, CT_EINVAL, ct_safetensors_metadata(F.st, NULL));
  N(ct_safetensors_metadata, ct_safetensors_metadata(F.st, "nope") == NULL);
  V(ct_safetensors_metadata_count, CT_EINVAL, ct_safetensors_metadata_count(NULL) == -1);
  S(ct_safetensors_metadata_at, CT_EINVAL, ct_safetensors_metadata_at(NULL, 0, &k, &v));
  S(ct_safetensors_metadata_at, CT_EINVAL, ct_safetensors_metadata_at(F.st, -1, &k, &v));
  S(ct_safetensors_metadata_at, CT_EINVAL, ct_safetensors_metadata_at(F.st, 1, &k, &v));
  N(ct_safetensors_metadata_at, ct_safetensors_metadata_at(F.st, 0, NULL, NULL) == CT_OK); /* both outputs optional */
  S(ct_checkpoint_save, CT_EINVAL, ct_checkpoint_save(NULL, F.lin, NULL, NULL));
  S(ct_checkpoint_save, CT_EINVAL, ct_checkpoint_save(path, NULL, NULL, NULL));
  S(ct_checkpoint_save, CT_EINVAL,
    ct_checkpoint_save(path, F.lin, NULL, &(ct_checkpoint_meta){.n_extra = 1, .extra = NULL}));
  S(ct_checkpoint_save, CT_EINVAL,
    ct_checkpoint_save(path, F.lin, NULL, &(ct_checkpoint_meta){.n_extra = -1, .extra = NULL}));
  S(ct_checkpoint_save, CT_EINVAL, ct_checkpoint_save(path, F.lin, NULL, &(ct_checkpoint_meta){.n_extra = 1, .extra = &bad_kv}));
  S(ct_checkpoint_load, CT_EINVAL, ct_checkpoint_load(NULL, F.lin, NULL, NULL));
  S(ct_checkpoint_load, CT_EINVAL, ct_checkpoint_load(ok_path, NULL, NULL, NULL));
}

/* ---- data.h */
static void test_data(void **state) {
  (void)state;
  ct_idx idx;
  float x[4];
  int64_t y, shape3[3];
  ct_tensor *bx, *by;
  static const uint8_t bytes[] = {0, 0, 8, 1, 0, 0, 0, 1, 5};
  N(ct_idx_type_size, ct_idx_type_size(0x42) == 0 && ct_idx_type_size(-1) == 0);
  S(ct_idx_parse, CT_EINVAL, ct_idx_parse(NULL, 9, "x", &idx));
  S(ct_idx_parse, CT_EINVAL, ct_idx_parse(bytes, sizeof bytes, "x", NULL));
  S(ct_idx_load, CT_EINVAL, ct_idx_load(NULL, &idx));
  S(ct_idx_load, CT_EINVAL, ct_idx_load("/nonexistent", NULL));
  N(ct_idx_free, DO(ct_idx_free(NULL)));
  T(ct_idx_to_tensor, CT_EINVAL, ct_idx_to_tensor(NULL, CT_DEVICE_CPU));
  T(ct_idx_to_tensor, CT_EINVAL, ct_idx_to_tensor(&(ct_idx){0}, CT_DEVICE_CPU));
  T(ct_idx_to_tensor, CT_EDEVICE, ct_idx_to_tensor(&F.idx, cuda7));
  ct_idx bad = F.idx;
  bad.ndim = 9;
  T(ct_idx_to_tensor, CT_EINVAL, ct_idx_to_tensor(&bad, CT_DEVICE_CPU));
  bad = F.idx, bad.shape[0] = -2;
  T(ct_idx_to_tensor, CT_EINVAL, ct_idx_to_tensor(&bad, CT_DEVICE_CPU));
  bad = F.idx, bad.shape[0] = INT64_MAX, bad.numel = INT64_MAX;
  T(ct_idx_to_tensor, CT_EINVAL, ct_idx_to_tensor(&bad, CT_DEVICE_CPU));
  bad = F.idx, bad.type = (ct_idx_type)0x42;
  T(ct_idx_to_tensor, CT_EINVAL, ct_idx_to_tensor(&bad, CT_DEVICE_CPU));

  uint8_t px[8] = {0};
  int64_t labels[2] = {0, 1}, bad_labels[2] = {0, 7};
  P(ct_dataset_from_u8, CT_EINVAL, ct_dataset_from_u8(NULL, labels, 2, 1, 2, 2, 2, 0, 1));
  P(ct_dataset_from_u8, CT_EINVAL, ct_dataset_from_u8(px, NULL, 2, 1, 2, 2, 2, 0, 1));
  P(ct_dataset_from_u8, CT_EINVAL, ct_dataset_from_u8(px, labels, -1, 1, 2, 2, 2, 0, 1));
  P(ct_dataset_from_u8, CT_EINVAL, ct_dataset_from_u8(px, labels, 2, 0, 2, 2, 2, 0, 1));
  P(ct_dataset_from_u8, CT_EINVAL, ct_dataset_from_u8(px, labels, 2, 1, -2, 2, 2, 0, 1));
  P(ct_dataset_from_u8, CT_EINVAL, ct_dataset_from_u8(px, labels, 2, 1, 2, 2, 0, 0, 1));
  P(ct_dataset_from_u8, CT_EINVAL, ct_dataset_from_u8(px, labels, 2, 1, 2, 2, 2, 0, 0));
  P(ct_dataset_from_u8, CT_EINVAL, ct_dataset_from_u8(px, bad_labels, 2, 1, 2, 2, 2, 0, 1));
  P(ct_dataset_from_u8, CT_EINVAL, ct_dataset_from_u8(px, labels, INT64_MAX / 2, INT_MAX, INT_MAX, INT_MAX, 2, 0, 1));
  N(ct_dataset_free, DO(ct_dataset_free(NULL)));
  V(ct_dataset_len, CT_EINVAL, ct_dataset_len(NULL) == -1);
  V(ct_dataset_sample_shape, CT_EINVAL, DO(ct_dataset_sample_shape(NULL, shape3)));
  V(ct_dataset_sample_shape, CT_EINVAL, DO(ct_dataset_sample_shape(F.ds, NULL)));
  V(ct_dataset_num_classes, CT_EINVAL, ct_dataset_num_classes(NULL) == -1);
  P(ct_dataset_pixels, CT_EINVAL, ct_dataset_pixels(NULL));
  P(ct_dataset_labels, CT_EINVAL, ct_dataset_labels(NULL));
  S(ct_dataset_get, CT_EINVAL, ct_dataset_get(NULL, 0, x, &y));
  S(ct_dataset_get, CT_EINVAL, ct_dataset_get(F.ds, -1, x, &y));
  S(ct_dataset_get, CT_EINVAL, ct_dataset_get(F.ds, 4, x, &y));
  S(ct_dataset_get, CT_EINVAL, ct_dataset_get(F.ds, INT64_MIN, x, &y));
  P(ct_fashion_mnist_load, CT_EIO, ct_fashion_mnist_load("/nonexistent-cuttle-dir", CT_SPLIT_TRAIN));
  P(ct_fashion_mnist_load, CT_EINVAL, ct_fashion_mnist_load("/nonexistent-cuttle-dir", (ct_split)7));
  N(ct_fashion_mnist_class_name, strcmp(ct_fashion_mnist_class_name(-1), "?") == 0 &&
                                     strcmp(ct_fashion_mnist_class_name(INT64_MAX), "?") == 0);
  P(ct_loader_new, CT_EINVAL, ct_loader_new(NULL, NULL));
  P(ct_loader_new, CT_EINVAL, ct_loader_new(F.ds, &(ct_loader_opts){.batch_size = -1}));
  P(ct_loader_new, CT_EINVAL, ct_loader_new(F.ds, &(ct_loader_opts){.num_workers = 65}));
  P(ct_loader_new, CT_EINVAL, ct_loader_new(F.ds, &(ct_loader_opts){.num_workers = -1}));
  P(ct_loader_new, CT_EINVAL, ct_loader_new(F.ds, &(ct_loader_opts){.prefetch_factor = -1}));
  PA(ct_loader_new, CT_EINVAL, "rank", ct_loader_new(F.ds, &(ct_loader_opts){.rank = 2, .world_size = 2}));
  PA(ct_loader_new, CT_EINVAL, "world_size", ct_loader_new(F.ds, &(ct_loader_opts){.world_size = -1}));
  PA(ct_loader_new, CT_EINVAL, "rank", ct_loader_new(F.ds, &(ct_loader_opts){.rank = 1}));
  P(ct_loader_new, CT_EDEVICE, ct_loader_new(F.ds, &(ct_loader_opts){.device = {CT_CUDA, 7}}));
  P(ct_loader_new, CT_EDEVICE, ct_loader_new(F.ds, &(ct_loader_opts){.device = {CT_CPU, -1}}));
  N(ct_loader_free, DO(ct_loader_free(NULL)));
  V(ct_loader_len, CT_EINVAL, ct_loader_len(NULL) == -1);
  V(ct_loader_epoch, CT_EINVAL, ct_loader_epoch(NULL) == -1);
  S(ct_loader_set_epoch, CT_EINVAL, ct_loader_set_epoch(NULL, 0));
  S(ct_loader_set_epoch, CT_EINVAL, ct_loader_set_epoch(F.loader, -1));
  S(ct_loader_next, CT_EINVAL, ct_loader_next(NULL, &bx, &by));
  S(ct_loader_next, CT_EINVAL, ct_loader_next(F.loader, NULL, &by));
  S(ct_loader_next, CT_EINVAL, ct_loader_next(F.loader, &bx, NULL));
}

/* ---- datasets.h (F.ds is read by F.loader, so its settings are frozen: every set call fails) */
static void test_datasets(void **state) {
  (void)state;
  float x[4], zero[1] = {0}, one[1] = {1}, zeros[2] = {0, 0}, ones[2] = {1, 1};
  int64_t y, recs;
  ct_image im;
  static const uint8_t buf[8] = {0};
  const ct_image tiny = {.h = 1, .w = 1, .c = 1, .data = (uint8_t *)buf};
  S(ct_dataset_set_normalize, CT_EINVAL, ct_dataset_set_normalize(NULL, 1, zero, one));
  S(ct_dataset_set_normalize, CT_EINVAL, ct_dataset_set_normalize(F.ds, 1, NULL, one));
  S(ct_dataset_set_normalize, CT_EINVAL, ct_dataset_set_normalize(F.ds, 1, zero, NULL));
  S(ct_dataset_set_normalize, CT_EINVAL, ct_dataset_set_normalize(F.ds, 2, zeros, ones));
  S(ct_dataset_set_normalize, CT_EINVAL, ct_dataset_set_normalize(F.ds, 1, zero, zero));
  S(ct_dataset_set_normalize, CT_EINVAL, ct_dataset_set_normalize(F.ds, 1, zero, one)); /* read by F.loader */
  S(ct_dataset_set_augment, CT_EINVAL, ct_dataset_set_augment(NULL, NULL));
  S(ct_dataset_set_augment, CT_EINVAL, ct_dataset_set_augment(F.ds, &(ct_augment){.crop_h = 1}));
  S(ct_dataset_set_augment, CT_EINVAL, ct_dataset_set_augment(F.ds, &(ct_augment){.crop_padding = 1}));
  S(ct_dataset_set_augment, CT_EINVAL, ct_dataset_set_augment(F.ds, &(ct_augment){.crop_h = 9, .crop_w = 1}));
  S(ct_dataset_set_augment, CT_EINVAL, ct_dataset_set_augment(F.ds, &(ct_augment){.crop_h = INT_MAX, .crop_w = INT_MAX, .crop_padding = INT_MAX}));
  S(ct_dataset_set_augment, CT_EINVAL, ct_dataset_set_augment(F.ds, &(ct_augment){.hflip_p = 2}));
  S(ct_dataset_set_augment, CT_EINVAL, ct_dataset_set_augment(F.ds, &(ct_augment){.hflip_p = NAN}));
  S(ct_dataset_set_augment, CT_EINVAL, ct_dataset_set_augment(F.ds, &(ct_augment){.hflip_p = 0.5f})); /* read by F.loader */
  S(ct_dataset_get_seeded, CT_EINVAL, ct_dataset_get_seeded(NULL, 0, 0, 0, x, &y));
  S(ct_dataset_get_seeded, CT_EINVAL, ct_dataset_get_seeded(F.ds, 4, 0, 0, x, &y));
  S(ct_dataset_get_seeded, CT_EINVAL, ct_dataset_get_seeded(F.ds, INT64_MIN, 0, 0, x, &y));
  S(ct_dataset_get_seeded, CT_EINVAL, ct_dataset_get_seeded(F.ds, 0, 0, -1, x, &y));
  P(ct_dataset_class_name, CT_EINVAL, ct_dataset_class_name(NULL, 0));
  P(ct_dataset_class_name, CT_EINVAL, ct_dataset_class_name(F.ds, 2));
  P(ct_dataset_class_name, CT_EINVAL, ct_dataset_class_name(F.ds, -1));
  P(ct_dataset_sample_path, CT_EINVAL, ct_dataset_sample_path(NULL, 0));
  P(ct_dataset_sample_path, CT_EINVAL, ct_dataset_sample_path(F.ds, 4));
  P(ct_dataset_sample_path, CT_EUNSUPPORTED, ct_dataset_sample_path(F.ds, 0)); /* in memory: no files */
  V(ct_dataset_skipped, CT_EINVAL, ct_dataset_skipped(NULL) == -1);
  P(ct_cifar10_load, CT_EINVAL, ct_cifar10_load(NULL, CT_SPLIT_TRAIN));
  P(ct_cifar10_load, CT_EINVAL, ct_cifar10_load(F.dir, (ct_split)5));
  PA(ct_cifar10_load, CT_EIO, "data_batch_1.bin", ct_cifar10_load("/nonexistent-cuttle-dir", CT_SPLIT_TRAIN));
  P(ct_cifar100_load, CT_EINVAL, ct_cifar100_load(NULL, CT_SPLIT_TRAIN, CT_CIFAR100_FINE));
  P(ct_cifar100_load, CT_EINVAL, ct_cifar100_load(F.dir, (ct_split)-1, CT_CIFAR100_FINE));
  P(ct_cifar100_load, CT_EINVAL, ct_cifar100_load(F.dir, CT_SPLIT_TEST, (ct_cifar100_label)7));
  PA(ct_cifar100_load, CT_EIO, "test.bin", ct_cifar100_load("/nonexistent-cuttle-dir", CT_SPLIT_TEST, CT_CIFAR100_COARSE));
  S(ct_cifar_check, CT_EINVAL, ct_cifar_check(NULL, 5, "x", 1, &recs));
  S(ct_cifar_check, CT_EINVAL, ct_cifar_check(buf, 8, "x", 1, NULL));
  S(ct_cifar_check, CT_EINVAL, ct_cifar_check(buf, 8, "x", 0, &recs));
  S(ct_cifar_check, CT_EFORMAT, ct_cifar_check(buf, 8, "x", 1, &recs));
  S(ct_image_decode, CT_EINVAL, ct_image_decode(NULL, 4, "x", CT_IMAGE_RGB, &im));
  S(ct_image_decode, CT_EINVAL, ct_image_decode(buf, 8, "x", CT_IMAGE_RGB, NULL));
  S(ct_image_decode, CT_EINVAL, ct_image_decode(buf, 8, "x", (ct_image_mode)3, &im));
  S(ct_image_decode, CT_EFORMAT, ct_image_decode(buf, 8, "x", CT_IMAGE_GRAY, &im));
  S(ct_image_load, CT_EINVAL, ct_image_load(NULL, CT_IMAGE_RGB, &im));
  S(ct_image_load, CT_EINVAL, ct_image_load("x.png", CT_IMAGE_RGB, NULL));
  S(ct_image_load, CT_EINVAL, ct_image_load("x.png", (ct_image_mode)-1, &im));
  S(ct_image_load, CT_EIO, ct_image_load("/nonexistent-cuttle-dir/x.png", CT_IMAGE_RGB, &im));
  S(ct_image_resize, CT_EINVAL, ct_image_resize(NULL, 2, 2, &im));
  S(ct_image_resize, CT_EINVAL, ct_image_resize(&tiny, 2, 2, NULL));
  S(ct_image_resize, CT_EINVAL, ct_image_resize(&(ct_image){0}, 2, 2, &im));
  S(ct_image_resize, CT_EINVAL, ct_image_resize(&(ct_image){.h = 1, .w = 1, .c = 2, .data = (uint8_t *)buf}, 2, 2, &im));
  S(ct_image_resize, CT_EINVAL, ct_image_resize(&(ct_image){.h = INT64_MAX, .w = 2, .c = 1, .data = (uint8_t *)buf}, 1, 1, &im));
  S(ct_image_resize, CT_EINVAL, ct_image_resize(&tiny, 0, 2, &im));
  S(ct_image_resize, CT_EINVAL, ct_image_resize(&tiny, -2, 2, &im));
  S(ct_image_resize, CT_EINVAL, ct_image_resize(&tiny, INT64_MAX, INT64_MAX, &im));
  N(ct_image_free, DO(ct_image_free(NULL)));
  P(ct_imagefolder_load, CT_EINVAL, ct_imagefolder_load(NULL, CT_SPLIT_TRAIN, NULL));
  P(ct_imagefolder_load, CT_EINVAL, ct_imagefolder_load(F.dir, (ct_split)3, NULL));
  PA(ct_imagefolder_load, CT_EINVAL, "resize_h", ct_imagefolder_load(F.dir, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.resize_h = 3}));
  PA(ct_imagefolder_load, CT_EINVAL, "crop_h", ct_imagefolder_load(F.dir, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.crop_h = INT_MAX, .crop_w = INT_MAX}));
  PA(ct_imagefolder_load, CT_EINVAL, "val_fraction", ct_imagefolder_load(F.dir, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.val_fraction = -0.5}));
  PA(ct_imagefolder_load, CT_EINVAL, "mode", ct_imagefolder_load(F.dir, CT_SPLIT_TRAIN, &(ct_imagefolder_opts){.mode = (ct_image_mode)9}));
  PA(ct_imagefolder_load, CT_EIO, "/nonexistent-cuttle-dir", ct_imagefolder_load("/nonexistent-cuttle-dir", CT_SPLIT_TRAIN, NULL));
  PA(ct_imagefolder_load, CT_EFORMAT, "no class folder", ct_imagefolder_load(F.dir, CT_SPLIT_TRAIN, NULL));
}

/* ---- monitor.h */
/* The process group is never joined here (ct_dist_init needs mpirun; tests/dist/test_ddp.c runs
 * it), so the collectives fail as documented for a process that has not called it: CT_EINVAL, or
 * CT_EUNSUPPORTED in a build without MPI (code 0 takes either). */
static void test_dist(void **state) {
  (void)state;
  ct_tensor *list[1] = {F.a};
  N(ct_dist_rank, ct_dist_rank() == 0);
  N(ct_dist_world_size, ct_dist_world_size() == 1);
  N(ct_dist_local_rank, ct_dist_local_rank() == 0);
  N(ct_dist_finalize, ct_dist_finalize() == CT_OK);
  S(ct_dist_all_reduce_mean, CT_EINVAL, ct_dist_all_reduce_mean(NULL, 1));
  S(ct_dist_all_reduce_mean, CT_EINVAL, ct_dist_all_reduce_mean(list, -1));
  S(ct_dist_all_reduce_mean, CT_EDTYPE, ct_dist_all_reduce_mean(&F.i64, 1));
  S(ct_dist_all_reduce_mean, 0, ct_dist_all_reduce_mean(list, 1));
  S(ct_dist_all_reduce_sum, CT_EINVAL, ct_dist_all_reduce_sum(NULL, 1));
  S(ct_dist_all_reduce_sum, CT_EINVAL, ct_dist_all_reduce_sum(list, -1));
  S(ct_dist_all_reduce_sum, CT_EINVAL, ct_dist_all_reduce_sum((ct_tensor *[]){NULL}, 1));
  S(ct_dist_all_reduce_sum, 0, ct_dist_all_reduce_sum(&F.i64, 1)); /* int64 passes the dtype check */
  S(ct_dist_all_reduce_sum, 0, ct_dist_all_reduce_sum(list, 1));
  SN(ct_dist_set_timeout, CT_EINVAL, "timeout", ct_dist_set_timeout(0));
  SN(ct_dist_set_timeout, CT_EINVAL, "timeout", ct_dist_set_timeout(-1));
  SN(ct_dist_set_timeout, CT_EINVAL, "timeout", ct_dist_set_timeout(NAN));
  SN(ct_dist_set_timeout, CT_EINVAL, "timeout", ct_dist_set_timeout(INFINITY));
  N(ct_dist_timeout, ct_dist_timeout() == 60.0);
  N(ct_dist_set_timeout, ct_dist_set_timeout(2.5) == CT_OK && ct_dist_timeout() == 2.5 &&
                             ct_dist_set_timeout(60) == CT_OK && ct_dist_timeout() == 60.0);
  S(ct_ddp_set_grad_sync, CT_EINVAL, ct_ddp_set_grad_sync(NULL, 0));
  ct_ddp_stats st;
  S(ct_ddp_get_stats, CT_EINVAL, ct_ddp_get_stats(NULL, &st));
  N(ct_dist_abort, DO(ct_dist_abort(1))); /* never joined: returns, doing nothing */
  S(ct_dist_broadcast, CT_EINVAL, ct_dist_broadcast((ct_tensor *[]){NULL}, 1, 0));
  S(ct_dist_broadcast, 0, ct_dist_broadcast(list, 1, 0));
  P(ct_ddp_new, CT_EINVAL, ct_ddp_new(NULL, NULL));
  PA(ct_ddp_new, CT_EINVAL, "bucket_mb", ct_ddp_new(F.lin, &(ct_ddp_opts){.bucket_mb = -1}));
  PA(ct_ddp_new, CT_EINVAL, "bucket_mb", ct_ddp_new(F.lin, &(ct_ddp_opts){.bucket_mb = NAN}));
  P(ct_ddp_new, 0, ct_ddp_new(F.lin, NULL));
  S(ct_ddp_sync_grads, CT_EINVAL, ct_ddp_sync_grads(NULL));
  V(ct_ddp_num_buckets, CT_EINVAL, ct_ddp_num_buckets(NULL) == -1);
  N(ct_ddp_free, DO(ct_ddp_free(NULL)));
}

/* ---- data_parallel.h: two replicas of F.lin on the CPU (its worker threads start and stop here) */
static void test_data_parallel(void **state) {
  (void)state;
  ct_device cpu2[2] = {CT_DEVICE_CPU, CT_DEVICE_CPU};
  P(ct_data_parallel_new, CT_EINVAL, ct_data_parallel_new(NULL, 2, cpu2, NULL));
  PA(ct_data_parallel_new, CT_EINVAL, "devices", ct_data_parallel_new(F.lin, 2, NULL, NULL));
  PA(ct_data_parallel_new, CT_EINVAL, "n must", ct_data_parallel_new(F.lin, 0, cpu2, NULL));
  PA(ct_data_parallel_new, CT_EINVAL, "n must", ct_data_parallel_new(F.lin, 65, cpu2, NULL));
  P(ct_data_parallel_new, CT_EDEVICE, ct_data_parallel_new(F.lin, 2, (ct_device[]){CT_DEVICE_CPU, cpu3}, NULL));
  P(ct_data_parallel_new, CT_EDEVICE, ct_data_parallel_new(F.lin, 1, &cuda7, NULL));
  P(ct_data_parallel_new, CT_EDEVICE, ct_data_parallel_new(F.lin, 1, &bad_kind, NULL));
  ct_data_parallel *dp = ct_data_parallel_new(F.lin, 2, cpu2, NULL);
  assert_non_null(dp);
  SN(ct_data_parallel_forward_backward, CT_EINVAL, "dp", ct_data_parallel_forward_backward(NULL, F.a, F.lab, NULL));
  SN(ct_data_parallel_forward_backward, CT_EINVAL, "x", ct_data_parallel_forward_backward(dp, NULL, F.lab, NULL));
  SN(ct_data_parallel_forward_backward, CT_EINVAL, "y", ct_data_parallel_forward_backward(dp, F.a, NULL, NULL));
  S(ct_data_parallel_forward_backward, CT_EINVAL, ct_data_parallel_forward_backward(dp, F.a, F.b3, NULL));
  S(ct_data_parallel_forward_backward, CT_EINVAL, ct_data_parallel_forward_backward(dp, F.scalar, F.lab, NULL));
  /* an op failing on a replica's thread (float targets): its error, under this function's name */
  S(ct_data_parallel_forward_backward, 0, ct_data_parallel_forward_backward(dp, F.a, F.labf, NULL));
  S(ct_data_parallel_broadcast, CT_EINVAL, ct_data_parallel_broadcast(NULL));
  V(ct_data_parallel_num_replicas, CT_EINVAL, ct_data_parallel_num_replicas(NULL) == -1);
  P(ct_data_parallel_replica, CT_EINVAL, ct_data_parallel_replica(NULL, 0));
  P(ct_data_parallel_replica, CT_EINVAL, ct_data_parallel_replica(dp, 2));
  P(ct_data_parallel_replica, CT_EINVAL, ct_data_parallel_replica(dp, -1));
  N(ct_data_parallel_free, DO(ct_data_parallel_free(dp)) && DO(ct_data_parallel_free(NULL)));
}

static void test_monitor(void **state) {
  (void)state;
  size_t alloc, res;
  char buf[256];
  ct_monitor_snapshot *s = ct_monitor_snapshot_new(&(ct_monitor_options){.pid = -5});
  N(ct_monitor_snapshot_new, s != NULL);
  N(ct_monitor_snapshot_free, DO(ct_monitor_snapshot_free(s)) && DO(ct_monitor_snapshot_free(NULL)));
  P(ct_monitor_render, CT_EINVAL, ct_monitor_render(NULL, CT_MONITOR_TEXT));
  P(ct_monitor_render, CT_EINVAL, ct_monitor_render(F.snap, (ct_monitor_format)99));
  S(ct_monitor_allocator_stats, CT_EINVAL, ct_monitor_allocator_stats(CT_DEVICE_CPU, NULL, &res));
  S(ct_monitor_allocator_stats, CT_EINVAL, ct_monitor_allocator_stats(CT_DEVICE_CPU, &alloc, NULL));
  S(ct_monitor_allocator_stats, 0, ct_monitor_allocator_stats(cuda7, &alloc, &res));
  S(ct_monitor_allocator_stats, CT_EDEVICE, ct_monitor_allocator_stats(cpu3, &alloc, &res));
  S(ct_monitor_allocator_stats, CT_EINVAL, ct_monitor_allocator_stats(bad_kind, &alloc, &res));
  N(ct_monitor_publish, ct_monitor_publish() == CT_OK);
  N(ct_monitor_unpublish, ct_monitor_unpublish() == CT_OK && ct_monitor_unpublish() == CT_OK);
  S(ct_monitor_stats_path, CT_EINVAL, ct_monitor_stats_path(getpid(), NULL, 256));
  S(ct_monitor_stats_path, CT_EINVAL, ct_monitor_stats_path(getpid(), buf, 4));
}

/* ---- the table covers the API: every ct_ function the headers declare has a row above */

/* Functions with no row, and why. */
static const char *const excluded[] = {
    "ct_dist_init", /* joins MPI for the whole process (MPI cannot start twice); tests/dist/test_ddp.c
                       runs it under mpirun, and in a build without MPI checks its CT_EUNSUPPORTED */
    NULL};

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (s) s[n] = 0;
  fclose(f);
  return s;
}

/* The names of the functions declared in one header: identifiers ct_* followed by "(" outside
 * comments and preprocessor lines. */
static int declared(const char *text, char names[][64], int cap, int n) {
  int line_start = 1;
  for (const char *p = text; *p;) {
    if (p[0] == '/' && p[1] == '*') {
      const char *e = strstr(p + 2, "*/");
      p = e ? e + 2 : p + strlen(p);
      continue;
    }
    if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') p++;
      continue;
    }
    if (line_start && *p == '#') { /* a directive, with its continuation lines */
      while (*p && !(*p == '\n' && p[-1] != '\\')) p++;
      continue;
    }
    if (*p == '\n') line_start = 1;
    else if (*p != ' ' && *p != '\t') line_start = 0;
    if (strncmp(p, "ct_", 3) == 0 && (p == text || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                                                      (p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= '0' && p[-1] <= '9')))) {
      const char *q = p;
      while (*q == '_' || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9')) q++;
      const char *r = q;
      while (*r == ' ' || *r == '\t' || *r == '\n') r++;
      if (*r == '(' && q - p < 64 && n < cap) {
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= strncmp(names[i], p, (size_t)(q - p)) == 0 && names[i][q - p] == 0;
        if (!dup) memcpy(names[n], p, (size_t)(q - p)), names[n][q - p] = 0, n++;
      }
      p = q;
      continue;
    }
    p++;
  }
  return n;
}

static void test_every_function_has_a_row(void **state) {
  (void)state;
  static const char *const headers[] = {"version", "status", "device", "tensor", "cuda",   "ops",
                                        "autograd", "nn",   "gpt2", "tokenizer", "optim",  "io",     "data", "datasets", "text", "monitor", "dist", "data_parallel", "autocast"};
  static char names[1024][64];
  const char *src = getenv("CUTTLE_SOURCE_DIR");
  char root[4096], path[4200];
  if (src) snprintf(root, sizeof root, "%s", src);
  else { /* __FILE__ is tests/api/test_api_errors.c under the source root */
    snprintf(root, sizeof root, "%s", __FILE__);
    for (int up = 0; up < 3; up++) {
      char *slash = strrchr(root, '/');
      if (slash) *slash = 0;
    }
  }
  int n = 0;
  for (size_t h = 0; h < sizeof headers / sizeof headers[0]; h++) {
    snprintf(path, sizeof path, "%s/include/cuttle/%s.h", root, headers[h]);
    char *text = read_text(path);
    if (!text) fprintf(stderr, "cannot read %s\n", path);
    assert_non_null(text);
    n = declared(text, names, 1024, n);
    free(text);
  }
  int missing = 0, excused = 0;
  for (int i = 0; i < n; i++) {
    int found = 0;
    for (int j = 0; j < n_covered && !found; j++) found = strcmp(names[i], covered[j]) == 0;
    for (size_t j = 0; excluded[j] && !found; j++) found = excused += strcmp(names[i], excluded[j]) == 0;
    if (!found) fprintf(stderr, "no row for %s\n", names[i]), missing++;
  }
  fprintf(stderr, "test_api_errors: %d rows; %d of %d declared functions have rows (%d excluded), %d rows failed\n", n_rows,
          n - missing - excused, n, excused, n_bad);
  assert_true(n > 200); /* the parser found the API */
  assert_int_equal(missing, 0);
  assert_int_equal(n_bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_device), cmocka_unit_test(test_dtypes_constructors), cmocka_unit_test(test_tensor_api),
      cmocka_unit_test(test_cuda_api),      cmocka_unit_test(test_ops),                 cmocka_unit_test(test_autograd),
      cmocka_unit_test(test_nn_optim),      cmocka_unit_test(test_io),                  cmocka_unit_test(test_data),
      cmocka_unit_test(test_datasets),
      cmocka_unit_test(test_monitor),       cmocka_unit_test(test_dist), cmocka_unit_test(test_data_parallel),
      cmocka_unit_test(test_every_function_has_a_row),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
