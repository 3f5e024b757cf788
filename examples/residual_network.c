/* examples/residual_network.c: a network you define yourself, like a torch.nn.Module subclass.
 *
 *   PyTorch:  class Block(nn.Module):
 *                 def __init__(self, c):
 *                     super().__init__()
 *                     self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False); self.bn1 = nn.BatchNorm2d(c)
 *                     self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False); self.bn2 = nn.BatchNorm2d(c)
 *                 def forward(self, x):
 *                     h = F.relu(self.bn1(self.conv1(x)))
 *                     return F.relu(self.bn2(self.conv2(h)) + x)
 *   cuttle:   ct_module_new("Block", block_forward, ...) and ct_module_add_child for each layer;
 *             block_forward finds them by name with ct_module_child. The state_dict names are the
 *             ones PyTorch would give ("blocks.0.conv1.weight").
 *
 * A small residual network (stem, two blocks, global average pooling, a Linear) trains for 30 Adam
 * steps on Fashion-MNIST batches on the best device present; the program checks that the loss
 * fell and exits 1 when it did not (tests/CMakeLists.txt runs it). */
#include <stdio.h>
#include "cuttle.h"

/* Run self's child `name` on x. */
static ct_tensor *child(ct_module *self, const char *name, ct_tensor *x) {
  return ct_module_forward(ct_module_child(self, name), x);
}

static ct_tensor *block_forward(ct_module *self, ct_tensor *x) {
  ct_scope_begin(); /* the temporaries below are released at ct_scope_end */
  ct_tensor *h = ct_relu(child(self, "bn1", child(self, "conv1", x)));
  ct_tensor *y = ct_relu(ct_add(child(self, "bn2", child(self, "conv2", h)), x));
  if (y) ct_scope_keep(y); /* the result goes to the caller */
  ct_scope_end();
  return y;
}

static ct_module *block_new(int64_t c, ct_device dev, ct_generator *gen) {
  ct_conv2d_opts same = {.padding = {1, 1}};
  ct_module *b = ct_module_new("Block", block_forward, NULL, NULL);
  ct_status s = ct_module_add_child(b, "conv1", ct_conv2d_new(c, c, 3, &same, 0, dev, gen));
  if (s == CT_OK) s = ct_module_add_child(b, "bn1", ct_batchnorm2d_new(c, 0, 0, dev));
  if (s == CT_OK) s = ct_module_add_child(b, "conv2", ct_conv2d_new(c, c, 3, &same, 0, dev, gen));
  if (s == CT_OK) s = ct_module_add_child(b, "bn2", ct_batchnorm2d_new(c, 0, 0, dev));
  if (s != CT_OK) ct_module_free(b), b = NULL;
  return b;
}

static ct_tensor *net_forward(ct_module *self, ct_tensor *x) {
  ct_scope_begin();
  ct_tensor *h = child(self, "blocks", ct_relu(child(self, "stem", x)));
  ct_tensor *y = child(self, "fc", ct_flatten(child(self, "pool", h), 1, -1));
  if (y) ct_scope_keep(y);
  ct_scope_end();
  return y;
}

static ct_module *net_new(ct_device dev, ct_generator *gen) {
  ct_conv2d_opts stem = {.stride = {2, 2}, .padding = {1, 1}};
  ct_module *net = ct_module_new("Net", net_forward, NULL, NULL);
  ct_status s = ct_module_add_child(net, "stem", ct_conv2d_new(1, 16, 3, &stem, 1, dev, gen));
  ct_module *blocks[2] = {block_new(16, dev, gen), block_new(16, dev, gen)};
  if (s == CT_OK) s = ct_module_add_child(net, "blocks", ct_sequential_new(2, blocks));
  else ct_module_free(blocks[0]), ct_module_free(blocks[1]);
  if (s == CT_OK) s = ct_module_add_child(net, "pool", ct_adaptive_avg_pool2d_new(1, 1));
  if (s == CT_OK) s = ct_module_add_child(net, "fc", ct_linear_new(16, 10, 1, dev, gen));
  if (s != CT_OK) ct_module_free(net), net = NULL;
  return net;
}

int main(void) {
  char name[32];
  ct_device dev = ct_device_best(CT_BEST_MOST_FREE_MEMORY);
  ct_generator gen = ct_generator_new(0);
  ct_module *net = net_new(dev, &gen);
  ct_dataset *train = ct_fashion_mnist_load(NULL, CT_SPLIT_TRAIN);
  ct_loader *loader = train ? ct_loader_new(train, &(ct_loader_opts){.batch_size = 64, .shuffle = 1, .device = dev}) : NULL;
  ct_optimizer *opt = net ? ct_optimizer_new(net, &(ct_optim_opts){.kind = CT_OPTIM_ADAM, .lr = 3e-3}) : NULL;
  if (!net || !loader || !opt) {
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }
  ct_named_tensor nt[64];
  int n = ct_module_named_tensors(net, 1, nt, 64);
  printf("Net on %s: %lld parameters, %d tensors in its state_dict, e.g. %s and %s\n",
         ct_device_str(dev, name, sizeof name), (long long)ct_module_num_params(net), n, nt[0].name, nt[n - 4].name);
  double first = 0, last = 0;
  for (int step = 0; step < 30; step++) {
    ct_scope_begin();
    ct_tensor *x, *y;
    if (ct_loader_next(loader, &x, &y) != 1) break;
    ct_optimizer_zero_grad(opt);
    ct_tensor *loss = ct_cross_entropy(ct_module_forward(net, x), y, CT_REDUCTION_MEAN, 0);
    if (!loss || ct_backward(loss) != CT_OK || ct_optimizer_step(opt) != CT_OK) {
      fprintf(stderr, "error at step %d: %s\n", step, ct_last_error());
      ct_scope_end();
      return 1;
    }
    double v = ct_item(loss);
    if (step == 0) first = v;
    last = v;
    if (step % 10 == 0 || step == 29) printf("step %2d  loss %.4f\n", step, v);
    ct_scope_end();
  }
  int ok = last < first;
  printf("loss %.4f -> %.4f: %s\n", first, last, ok ? "it learns" : "NOT LEARNING");
  ct_optimizer_free(opt);
  ct_loader_free(loader);
  ct_dataset_free(train);
  ct_module_free(net);
  return ok ? 0 : 1;
}
