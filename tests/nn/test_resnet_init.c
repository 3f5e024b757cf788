/* tests/nn/test_resnet_init.c: cuttle's ResNets start from torchvision's initialisation (issue 19;
 * torchvision/models/resnet.py ResNet.__init__, torch/nn/modules/linear.py Linear.reset_parameters),
 * checked on every layer of resnet18, resnet50 and the small-input resnet18:
 *  - Conv2d (no bias): weight ~ kaiming_normal_(mode="fan_out", nonlinearity="relu"), that is
 *    N(0, 2 / fan_out) with fan_out = out_channels * kh * kw. The sample mean, standard deviation and
 *    kurtosis (3 for a normal; 1.8 for a uniform of the same variance, which a wrong draw would give)
 *    must lie within Z standard errors for the tensor's element count;
 *  - BatchNorm2d: weight 1 and bias 0 everywhere (zero_init_residual=False, so the last BN of a
 *    block too), running_mean 0, running_var 1, num_batches_tracked an int64 0;
 *  - fc: weight and bias ~ U(-b, b) with b = 1 / sqrt(in_features): every value within b, the
 *    extremes near +-b, mean 0 and variance b^2 / 3 within Z standard errors.
 * The seeds are fixed, so the test is deterministic; Z = 5 makes it robust to a change of seed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

#define Z 5.0 /* standard errors allowed for a sample statistic */

typedef struct {
  int convs, bns, linears;
} counts;

/* Assert |got - want| <= tol, naming the tensor and the statistic when it is not. */
static void near(const char *path, const char *stat, double got, double want, double tol) {
  if (fabs(got - want) > tol) fprintf(stderr, "%s: %s %.6g, expected %.6g +- %.3g\n", path, stat, got, want, tol);
  assert_true(fabs(got - want) <= tol);
}

/* The number of tensors (parameters and buffers) a module holds itself. */
static int own_tensors(ct_module *m) { return ct_module_named_tensors(m, 1, NULL, 0); }

/* Mean, second and fourth moments about 0 of a tensor's values. */
static void moments(ct_tensor *t, int64_t *n, double *mean, double *m2, double *m4, double *maxabs, double *min, double *max) {
  double *v = ct_test_values(t), s1 = 0, s2 = 0, s4 = 0;
  *n = ct_tensor_numel(t), *maxabs = 0, *min = INFINITY, *max = -INFINITY;
  for (int64_t i = 0; i < *n; i++) {
    double x = v[i];
    s1 += x, s2 += x * x, s4 += x * x * x * x;
    *maxabs = fmax(*maxabs, fabs(x)), *min = fmin(*min, x), *max = fmax(*max, x);
  }
  free(v);
  *mean = s1 / (double)*n, *m2 = s2 / (double)*n, *m4 = s4 / (double)*n;
}

static void check_conv(const char *path, ct_module *c) {
  assert_int_equal(own_tensors(c), 1); /* bias=False, as torchvision's conv3x3 / conv1x1 */
  ct_tensor *w = ct_module_tensor(c, "weight");
  const int64_t *s = ct_tensor_shape(w);
  double sigma = sqrt(2.0 / (double)(s[0] * s[2] * s[3])), mean, m2, m4, maxabs, lo, hi;
  int64_t n;
  moments(w, &n, &mean, &m2, &m4, &maxabs, &lo, &hi);
  double rn = sqrt((double)n);
  near(path, "weight mean", mean, 0, Z * sigma / rn);
  near(path, "weight std", sqrt(m2), sigma, Z * sigma / sqrt(2.0 * (double)n)); /* sd of a normal's sample std */
  near(path, "weight kurtosis", m4 / (m2 * m2), 3, Z * sqrt(24.0 / (double)n));
}

/* Every value of t equals want (and t is float32). */
static void check_const(const char *path, ct_module *bn, const char *name, double want) {
  ct_tensor *t = ct_module_tensor(bn, name);
  assert_int_equal(ct_tensor_dtype(t), CT_F32);
  double *v = ct_test_values(t);
  for (int64_t i = 0; i < ct_tensor_numel(t); i++) {
    if (v[i] != want) fprintf(stderr, "%s.%s[%lld] = %g, expected %g\n", path, name, (long long)i, v[i], want);
    assert_true(v[i] == want);
  }
  free(v);
}

static void check_bn(const char *path, ct_module *bn) {
  assert_int_equal(own_tensors(bn), 5);
  check_const(path, bn, "weight", 1), check_const(path, bn, "bias", 0);
  check_const(path, bn, "running_mean", 0), check_const(path, bn, "running_var", 1);
  ct_tensor *nbt = ct_module_tensor(bn, "num_batches_tracked");
  if (ct_tensor_dtype(nbt) != CT_I64) fprintf(stderr, "%s.num_batches_tracked is not int64\n", path);
  assert_int_equal(ct_tensor_dtype(nbt), CT_I64);
  assert_int_equal(ct_tensor_ndim(nbt), 0);
  assert_true(ct_item(nbt) == 0);
}

/* U(-b, b): variance b^2/3, and the sample variance's standard error sqrt(0.8 / n) b^2/3 (the
 * uniform's kurtosis is 1.8). Both extremes come within 5% of +-b but for a chance of 2 * 0.975^n,
 * 2e-11 for n >= 1000: so a bound too small fails even where the variance's tolerance is wide. */
static void check_uniform(const char *path, ct_tensor *t, double b, const char *what) {
  double mean, m2, m4, maxabs, lo, hi;
  int64_t n;
  moments(t, &n, &mean, &m2, &m4, &maxabs, &lo, &hi);
  char stat[64];
  snprintf(stat, sizeof stat, "%s max |x| / bound", what);
  if (maxabs > b * (1 + 1e-6)) near(path, stat, maxabs / b, 1, 0); /* fails, saying by how much */
  if (n >= 1000) near(path, stat, fmin(hi, -lo) / b, 1, 0.05);
  snprintf(stat, sizeof stat, "%s mean", what);
  near(path, stat, mean, 0, Z * b / sqrt(3.0 * (double)n));
  snprintf(stat, sizeof stat, "%s variance", what);
  near(path, stat, m2, b * b / 3, Z * sqrt(0.8 / (double)n) * b * b / 3);
}

static void check_linear(const char *path, ct_module *fc) {
  assert_int_equal(own_tensors(fc), 2);
  ct_tensor *w = ct_module_tensor(fc, "weight");
  double b = 1 / sqrt((double)ct_tensor_shape(w)[1]); /* kaiming_uniform_(a=sqrt(5)) is this bound too */
  check_uniform(path, w, b, "weight");
  check_uniform(path, ct_module_tensor(fc, "bias"), b, "bias");
}

/* Check every Conv2d, BatchNorm2d and Linear under m (its state_dict path in path), counting them. */
static void visit(ct_module *m, const char *path, counts *c) {
  const char *type = ct_module_type(m);
  if (strcmp(type, "Conv2d") == 0) check_conv(path, m), c->convs++;
  else if (strcmp(type, "BatchNorm2d") == 0) check_bn(path, m), c->bns++;
  else if (strcmp(type, "Linear") == 0) check_linear(path, m), c->linears++;
  for (int i = 0, k = ct_module_num_children(m); i < k; i++) {
    const char *name;
    ct_module *child = ct_module_child_at(m, i, &name);
    char sub[256];
    snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", name);
    visit(child, sub, c);
  }
}

/* depth, opts, and torchvision's layer counts: 1 + 2 per BasicBlock (8) or 3 per Bottleneck (16)
 * + 3 or 4 downsample convs, a BN after each. */
static void check_resnet(int depth, ct_resnet_opts opts, uint64_t seed, int want_convs) {
  ct_generator g = ct_generator_new(seed);
  ct_module *m = ct_assert_nonnull(ct_resnet_new(depth, &opts, CT_DEVICE_CPU, &g));
  counts c = {0};
  visit(m, "", &c);
  printf("resnet%d%s: %d convs, %d BatchNorms and %d Linear initialised as torchvision's\n", depth,
         opts.small_input ? " (small_input)" : "", c.convs, c.bns, c.linears);
  assert_int_equal(c.convs, want_convs);
  assert_int_equal(c.bns, want_convs);
  assert_int_equal(c.linears, 1);
  ct_module_free(m);
}

static void resnet18_init(void **state) { (void)state, check_resnet(18, (ct_resnet_opts){0}, 21, 20); }
static void resnet50_init(void **state) { (void)state, check_resnet(50, (ct_resnet_opts){0}, 22, 53); }
/* The 3x3 stem: fan_out 64 * 9; 1 channel and 10 classes, as `cuttle train --model resnet18-small`. */
static void resnet18_small_init(void **state) {
  (void)state, check_resnet(18, (ct_resnet_opts){.in_channels = 1, .num_classes = 10, .small_input = 1}, 23, 20);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(resnet18_init), cmocka_unit_test(resnet50_init),
                                     cmocka_unit_test(resnet18_small_init)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
