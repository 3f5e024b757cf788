/* tests/support/residual_module.h: modules the user defines (ct_module_new), for the tests that
 * check such a module under ct_data_parallel (tests/dist/test_data_parallel.c), DDP
 * (tests/dist/test_ddp.c) and on another device (tests/opencl/test_opencl_user_module.c), for
 * (N, 1, 28, 28) inputs and 10 classes:
 *  - residual_new: flatten, fc1, relu, then h + fc2(relu(h)), then fc3; parameters only;
 *  - residual_bn_new: flatten, fc1, relu, then h + relu(block(h)) where "block" is a user module of
 *    its own holding a Linear "fc" and a BatchNorm1d "bn", then fc3: buffers (running_mean,
 *    running_var, the int64 num_batches_tracked) two levels down a tree of user modules, the case
 *    where replicating, broadcasting or moving a model must carry more than its parameters. */
#ifndef CUTTLE_TESTS_RESIDUAL_MODULE_H
#define CUTTLE_TESTS_RESIDUAL_MODULE_H

#include "cuttle.h"

static inline ct_tensor *residual_forward(ct_module *self, ct_tensor *x) {
  ct_scope_begin();
  ct_tensor *h = ct_relu(ct_module_forward(ct_module_child(self, "fc1"), ct_flatten(x, 1, -1)));
  h = ct_add(h, ct_module_forward(ct_module_child(self, "fc2"), ct_relu(h)));
  ct_tensor *y = ct_module_forward(ct_module_child(self, "fc3"), h);
  if (y) ct_scope_keep(y);
  ct_scope_end();
  return y;
}

/* The module with its Linears drawn from g on dev; NULL with the error set. */
static inline ct_module *residual_new(ct_device dev, ct_generator *g) {
  ct_module *m = ct_module_new("Residual", residual_forward, NULL, NULL);
  ct_status s = m ? ct_module_add_child(m, "fc1", ct_linear_new(784, 32, 1, dev, g)) : ct_last_status();
  if (s == CT_OK) s = ct_module_add_child(m, "fc2", ct_linear_new(32, 32, 1, dev, g));
  if (s == CT_OK) s = ct_module_add_child(m, "fc3", ct_linear_new(32, 10, 1, dev, g));
  if (s != CT_OK) ct_module_free(m), m = NULL;
  return m;
}

/* block: bn(fc(h)). */
static inline ct_tensor *bn_block_forward(ct_module *self, ct_tensor *h) {
  ct_scope_begin();
  ct_tensor *y = ct_module_forward(ct_module_child(self, "bn"), ct_module_forward(ct_module_child(self, "fc"), h));
  if (y) ct_scope_keep(y);
  ct_scope_end();
  return y;
}

static inline ct_tensor *residual_bn_forward(ct_module *self, ct_tensor *x) {
  ct_scope_begin();
  ct_tensor *h = ct_relu(ct_module_forward(ct_module_child(self, "fc1"), ct_flatten(x, 1, -1)));
  h = ct_add(h, ct_relu(ct_module_forward(ct_module_child(self, "block"), h)));
  ct_tensor *y = ct_module_forward(ct_module_child(self, "fc3"), h);
  if (y) ct_scope_keep(y);
  ct_scope_end();
  return y;
}

/* The module with its Linears drawn from g on dev and BatchNorm1d's defaults (weight 1, bias 0,
 * running mean 0, variance 1, 0 batches tracked); NULL with the error set. Its named tensors, in
 * order: fc1.weight, fc1.bias, block.fc.weight, block.fc.bias, block.bn.weight, block.bn.bias,
 * block.bn.running_mean, block.bn.running_var, block.bn.num_batches_tracked, fc3.weight, fc3.bias. */
static inline ct_module *residual_bn_new(ct_device dev, ct_generator *g) {
  ct_module *m = ct_module_new("ResidualBN", residual_bn_forward, NULL, NULL);
  ct_module *b = m ? ct_module_new("BNBlock", bn_block_forward, NULL, NULL) : NULL;
  ct_status s = b ? ct_module_add_child(m, "fc1", ct_linear_new(784, 32, 1, dev, g)) : ct_last_status();
  if (s == CT_OK) s = ct_module_add_child(b, "fc", ct_linear_new(32, 32, 1, dev, g));
  if (s == CT_OK) s = ct_module_add_child(b, "bn", ct_batchnorm1d_new(32, 0, 0, dev));
  if (s == CT_OK) s = ct_module_add_child(m, "block", b); /* m owns b from here, even on failure */
  else ct_module_free(b);
  if (s == CT_OK) s = ct_module_add_child(m, "fc3", ct_linear_new(32, 10, 1, dev, g));
  if (s != CT_OK) ct_module_free(m), m = NULL;
  return m;
}

#endif
