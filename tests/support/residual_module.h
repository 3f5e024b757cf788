/* tests/support/residual_module.h: a module the user defines (ct_module_new), for the tests that
 * check such a module under ct_data_parallel (tests/dist/test_data_parallel.c) and DDP
 * (tests/dist/test_ddp.c): flatten, fc1, relu, then h + fc2(relu(h)), then fc3, for (N, 1, 28, 28)
 * inputs and 10 classes. */
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

#endif
