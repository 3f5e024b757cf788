/* examples/tensor_cores_case2.c: the tensor-core alignment exercise, Case 2: Linear layers whose sizes
 * do or do not meet NVIDIA's multiple-of-8 rule.
 *
 *   PyTorch:  # Case 2 - 15 features, 16 class classification
 *             data = torch.randn(123, 16)
 *             dataloader = torch.utils.data.DataLoader(data, batch_size=64)
 *             model = torch.nn.Sequential(
 *                 torch.nn.Linear(128, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32), torch.nn.ReLU(),
 *                 torch.nn.Linear(32, 16))
 *             for batch in dataloader:
 *                 model(dataloader)
 *
 * The rule (tensor cores, float16): features and batch size are multiples of 8. What is wrong:
 *  1. model(dataloader): the loop passes the loader, not the batch. In C this mistake does not
 *     compile: ct_module_forward takes a ct_tensor *, and a ct_loader * is another type.
 *  2. Shape: the first layer takes 128 features, the data has 16 (and the comment says 15).
 *     Fix: Linear(16, 64).
 *  3. Alignment, in the data loading: 123 samples in batches of 64 leave a last batch of 59, not a
 *     multiple of 8. Fix: drop_last (or 128 samples). The model's widths (16, 64, 32, 16) and the
 *     16 classes are fine.
 * The program runs cuttle's check (ct_module_check_alignment) and the forward on every batch of
 * the loader, then on the fixed model and loader; it prints what cuttle reports and exits 1 when a
 * report differs from the one expected (tests/examples/tensor_cores_case2.expect). */
#include <stdint.h>
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

static ct_module *mlp(int64_t in) {
  return ct_sequential_new(5, (ct_module *[]){ct_linear_new(in, 64, 1, CT_DEVICE_CPU, NULL), ct_relu_new(),
                                              ct_linear_new(64, 32, 1, CT_DEVICE_CPU, NULL), ct_relu_new(),
                                              ct_linear_new(32, 16, 1, CT_DEVICE_CPU, NULL)});
}

/* One epoch: the check and the forward on every batch. Returns the number of batches whose
 * forward failed with a shape error; *batches and *issues receive the number of batches and the
 * alignment issues found in all. */
static int epoch(const char *name, ct_module *model, ct_loader *loader, int *batches, int *issues) {
  ct_tensor *x, *y;
  int failed = 0;
  char title[64], s[64];
  *batches = *issues = 0;
  for (;;) {
    ct_scope_begin(); /* this batch's tensors are released at the end of the iteration */
    if (ct_loader_next(loader, &x, &y) != 1) {
      ct_scope_end();
      break;
    }
    /* The loader gives (B, C, H, W) = (B, 1, 1, 16); a batch of rows is (B, 16). */
    ct_tensor *batch = ct_flatten(x, 1, -1);
    snprintf(title, sizeof title, "%s, batch %d %s", name, *batches, ct_shape_str(batch, s, sizeof s));
    int n = check(title, model, 2, ct_tensor_shape(batch));
    *issues += n;
    ct_tensor *out = ct_module_forward(model, batch);
    printf("  model(batch): %s\n", out ? ct_shape_str(out, s, sizeof s) : ct_last_error());
    failed += !out && ct_last_status() == CT_ESHAPE;
    ++*batches;
    ct_scope_end();
  }
  return failed;
}

int main(void) {
  enum { N = 123, F = 16 };
  static uint8_t pixels[N * F];
  static int64_t labels[N];
  uint64_t r = 42;
  for (int i = 0; i < N * F; i++) r = r * 6364136223846793005u + 1442695040888963407u, pixels[i] = (uint8_t)(r >> 56);
  for (int i = 0; i < N; i++) labels[i] = i % 16;
  /* data = torch.randn(123, 16): 123 rows of 16 features (random pixels, normalized to mean 0 and
   * standard deviation about 1); ct_dataset holds 8-bit samples, so each row is a (1, 1, 16) image */
  ct_dataset *data = ct_dataset_from_u8(pixels, labels, N, 1, 1, F, 16, 0.5f, 0.29f);
  ct_loader *loader = ct_loader_new(data, &(ct_loader_opts){.batch_size = 64});
  ct_module *model = mlp(128);
  int ok = data && loader && model, batches, issues;

  /* As written (with the batch passed, as C requires): every batch is a shape error, and the last
   * batch, 59 rows, breaks the rule. */
  ok &= epoch("as written", model, loader, &batches, &issues) == 2 && batches == 2 && issues == 1;
  ct_loader_free(loader);
  ct_module_free(model);

  /* Fixed: Linear(16, 64), and drop_last so that every batch has 64 rows. */
  loader = ct_loader_new(data, &(ct_loader_opts){.batch_size = 64, .drop_last = 1});
  model = mlp(16);
  ok &= loader && model && epoch("fixed", model, loader, &batches, &issues) == 0 && batches == 1 && issues == 0;
  ct_loader_free(loader);
  ct_module_free(model);
  ct_dataset_free(data);
  return ok ? 0 : 1;
}
