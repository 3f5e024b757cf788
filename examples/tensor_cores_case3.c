/* examples/tensor_cores_case3.c: the tensor-core alignment exercise, Case 3: Linear layers whose sizes
 * do or do not meet NVIDIA's multiple-of-8 rule.
 *
 *   PyTorch:  # Case 3 - Images and convolution
 *             data, mask = torch.randn(1024, 3, 26, 26), torch.randn(1024, 1, 26, 26)
 *             dataset = SuperDataset(data, mask) # let's assume this is a torch.utils.data.Dataset
 *             dataloader = torch.utils.data.DataLoader(dataset, batch_size=64, drop_last=True)
 *             model = torch.nn.Sequential(
 *                 torch.nn.Conv2d(3, 64, kernel_size=3)
 *                 torch.nn.ReLU(),
 *                 torch.nn.Conv2d(64, 128, kernel_size=3), torch.nn.ReLU(),
 *                 torch.nn.Conv2d(128, 64, kernel_size=3), torch.nn.ReLU(),
 *                 torch.nn.Conv2d(64, 1, kernel_size=3)
 *                 torch.nn.Sigmoid(),
 *             )
 *             for img, mask in dataloader:
 *                 predicted = model(dataloader)
 *
 * The rule (tensor cores, float16): channels and batch size are multiples of 8. What is wrong:
 *  1. Two commas are missing (after the first and the last Conv2d): Python stops with a
 *     SyntaxError, as a C compiler would.
 *  2. model(dataloader): the loop passes the loader, not img. In C this mistake does not compile:
 *     ct_module_forward takes a ct_tensor *, and a ct_loader * is another type.
 *  3. Shape: each 3x3 convolution without padding takes 2 pixels off each side's size, so the
 *     26x26 images come out 18x18 while the masks are 26x26: the loss cannot compare them. Fix:
 *     padding=1 in every Conv2d.
 *  4. Alignment: the 3 input channels (RGB) of the first Conv2d, and the 1 output channel of the
 *     last; pad both to 8 (zero channels in, read channel 0 out). The batch (64, and 1024 samples
 *     make 16 full batches, so drop_last drops nothing) and the widths 64, 128, 64 are fine.
 * The program runs cuttle's check (ct_module_check_alignment), then the model on the first batch
 * and the loss against its mask; it prints what cuttle reports and exits 1 when a report differs
 * from the one expected (tests/examples/tensor_cores_case3.expect). */
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

/* Conv2d(cin, 64), ReLU, Conv2d(64, 128), ReLU, Conv2d(128, 64), ReLU, Conv2d(64, cout), all 3x3
 * with the given padding. cuttle has no Sigmoid module: ct_sigmoid is applied to the output. */
static ct_module *convnet(int64_t cin, int64_t cout, int padding) {
  ct_conv2d_opts o = {.padding = {padding, padding}};
  return ct_sequential_new(7, (ct_module *[]){ct_conv2d_new(cin, 64, 3, &o, 1, CT_DEVICE_CPU, NULL), ct_relu_new(),
                                              ct_conv2d_new(64, 128, 3, &o, 1, CT_DEVICE_CPU, NULL), ct_relu_new(),
                                              ct_conv2d_new(128, 64, 3, &o, 1, CT_DEVICE_CPU, NULL), ct_relu_new(),
                                              ct_conv2d_new(64, cout, 3, &o, 1, CT_DEVICE_CPU, NULL)});
}

/* n random images of c channels, 26x26, as a dataset (its labels are unused: 0). */
static ct_dataset *images(int64_t n, int c, uint64_t seed) {
  static uint8_t px[1024 * 3 * 26 * 26];
  static int64_t labels[1024];
  for (int64_t i = 0; i < n * c * 26 * 26; i++)
    seed = seed * 6364136223846793005u + 1442695040888963407u, px[i] = (uint8_t)(seed >> 56);
  return ct_dataset_from_u8(px, labels, n, c, 26, 26, 1, 0.5f, 0.29f);
}

int main(void) {
  /* SuperDataset(data, mask) as two datasets read in step: both loaders keep the order (no
   * shuffle), so the i-th batches hold the same samples. */
  ct_dataset *data = images(1024, 3, 1), *mask = images(1024, 1, 2);
  ct_loader_opts lo = {.batch_size = 64, .drop_last = 1};
  ct_loader *data_loader = ct_loader_new(data, &lo), *mask_loader = ct_loader_new(mask, &lo);
  ct_module *model = convnet(3, 1, 0);
  int ok = data && mask && data_loader && mask_loader && model;
  printf("batches per epoch: %lld\n", (long long)ct_loader_len(data_loader));

  ct_scope_begin(); /* the tensors of the first batch are released at its end */
  ct_tensor *img = NULL, *m = NULL, *label;
  ok &= ok && ct_loader_next(data_loader, &img, &label) == 1 && ct_loader_next(mask_loader, &m, &label) == 1;
  char s1[64], s2[64];
  ok &= check("as written", model, 4, ct_tensor_shape(img)) == 2;
  ct_tensor *predicted = ct_sigmoid(ct_module_forward(model, img));
  printf("model(img).shape = %s, mask.shape = %s\n", predicted ? ct_shape_str(predicted, s1, sizeof s1) : ct_last_error(),
         ct_shape_str(m, s2, sizeof s2));
  /* cuttle has no binary cross-entropy: the mean squared error shows the same mismatch */
  ct_tensor *loss = ct_mse_loss(predicted, m, CT_REDUCTION_MEAN);
  printf("loss(predicted, mask): %s\n", loss ? "computed" : ct_last_error());
  ok &= predicted && !loss && ct_last_status() == CT_ESHAPE;
  ct_scope_end();
  ct_module_free(model);

  /* Fixed: padding=1 keeps 26x26, and the channels padded to 8 on both ends. */
  model = convnet(8, 8, 1);
  ok &= model && check("fixed", model, 4, (int64_t[]){64, 8, 26, 26}) == 0;
  ct_module_free(model);

  ct_loader_free(data_loader), ct_loader_free(mask_loader);
  ct_dataset_free(data), ct_dataset_free(mask);
  return ok ? 0 : 1;
}
