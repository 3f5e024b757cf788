/* examples/tensor_cores_case1.c: the tensor-core alignment exercise, Case 1: Linear layers whose sizes
 * do or do not meet NVIDIA's multiple-of-8 rule.
 *
 *   PyTorch:  # Case 1 - 15 features, 3 class classification
 *             data = torch.randn(128, 15)
 *             model = torch.nn.Sequential(
 *                 torch.nn.Linear(128, 64), torch.nn.Linear(64, 32), torch.nn.Linear(32, 16),
 *                 torch.nn.Linear(16, 8), torch.nn.Linear(8, 4), torch.nn.Linear(4, 5))
 *             model(data).shape
 *
 * The rule (tensor cores, float16): features and batch size are multiples of 8. What is wrong:
 *  1. Shape: the first layer takes 128 features, the data has 15. PyTorch stops with "mat1 and
 *     mat2 shapes cannot be multiplied (128x15 and 128x64)"; cuttle names the layer and both
 *     shapes. The 128 is the batch size, put where the features go. Fix: Linear(15, 64).
 *  2. Alignment: 15 input features (pad the data with a zero column to 16), and the last two
 *     layers, Linear(8, 4) and Linear(4, 5): 4 and 5 are not multiples of 8. The batch (128) and
 *     the widths 64, 32, 16, 8 are fine.
 *  3. The task: 3 classes, but the model gives 5 outputs. Give it 3, padded to 8 for the tensor
 *     cores (the 5 extra logits are ignored).
 *  4. No activation between the Linears: six linear maps in a row are one linear map, and the
 *     4-wide layer is a bottleneck narrower than the 5 outputs after it. Put a ReLU between them.
 * The program runs cuttle's check (ct_module_check_alignment) on the model as written, on the
 * model with the shape fixed, and on the model fixed as above; it prints what cuttle reports and
 * exits 1 when a report differs from the one expected (tests/examples/tensor_cores_case1.expect). */
#include <stdio.h>
#include "cuttle.h"

/* Prints the issues of model fed (ndim, shape) in float16, and the shape error if there is one;
 * returns the number of issues (listed also after a shape error). */
static int check(const char *title, ct_module *model, int ndim, const int64_t *shape) {
  ct_alignment_issue issues[16];
  int n = 0;
  ct_status s = ct_module_check_alignment(model, ndim, shape, CT_F16, issues, 16, &n);
  printf("%s: %d tensor-core alignment issue%s for float16\n", title, n, n == 1 ? "" : "s");
  for (int i = 0; i < n && i < 16; i++) printf("  %s\n", issues[i].message);
  if (s != CT_OK) printf("  shape error: %s\n", ct_last_error());
  return n;
}

static ct_module *linears(int n, const int64_t *widths, int relu) {
  ct_module *c[16];
  int k = 0;
  for (int i = 0; i + 1 < n; i++) {
    if (relu && i > 0) c[k++] = ct_relu_new();
    c[k++] = ct_linear_new(widths[i], widths[i + 1], 1, CT_DEVICE_CPU, NULL);
  }
  return ct_sequential_new(k, c);
}

int main(void) {
  int ok = 1;
  char s[64];
  ct_generator gen = ct_generator_new(0);
  ct_scope_begin(); /* the tensors of this program are released at its end */
  ct_tensor *data = ct_randn(2, (int64_t[]){128, 15}, 0, 1, CT_F32, CT_DEVICE_CPU, &gen);

  /* 1. As written: the shape error, and the alignment issues of the layers' own sizes. */
  ct_module *model = linears(7, (int64_t[]){128, 64, 32, 16, 8, 4, 5}, 0);
  ok &= check("as written", model, 2, ct_tensor_shape(data)) == 3;
  ct_tensor *y = ct_module_forward(model, data);
  printf("model(data): %s\n", y ? ct_shape_str(y, s, sizeof s) : ct_last_error());
  ok &= y == NULL && ct_last_status() == CT_ESHAPE;
  ct_module_free(model);

  /* 2. The first layer fixed, Linear(15, 64): it runs, and four sizes break the rule. */
  model = linears(7, (int64_t[]){15, 64, 32, 16, 8, 4, 5}, 0);
  ok &= check("first layer fixed", model, 2, ct_tensor_shape(data)) == 4;
  y = ct_module_forward(model, data);
  printf("model(data).shape = %s\n", y ? ct_shape_str(y, s, sizeof s) : ct_last_error());
  ok &= y != NULL;
  ct_module_free(model);

  /* 3. Following the rule: the data padded with a zero column to 16 features, ReLUs, and 3
   * classes padded to 8 outputs (read the first 3 logits). */
  ct_tensor *padded = ct_cat(2, (ct_tensor *[]){data, ct_zeros(2, (int64_t[]){128, 1}, CT_F32, CT_DEVICE_CPU)}, 1);
  model = linears(5, (int64_t[]){16, 64, 32, 16, 8}, 1);
  ok &= check("aligned", model, 2, ct_tensor_shape(padded)) == 0;
  y = ct_module_forward(model, padded);
  printf("model(padded).shape = %s\n", y ? ct_shape_str(y, s, sizeof s) : ct_last_error());
  ok &= y != NULL;
  ct_module_free(model);

  ct_scope_end();
  return ok ? 0 : 1;
}
