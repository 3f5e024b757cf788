/* src/nn/module.h: the module struct shared by module.c (generic walking) and layers.c (each
 * layer's constructor and forward). */
#ifndef CUTTLE_MODULE_H
#define CUTTLE_MODULE_H

#include "core/internal.h"

typedef enum { CT_M_LINEAR, CT_M_CONV2D, CT_M_BATCHNORM2D, CT_M_RELU, CT_M_MAXPOOL2D, CT_M_FLATTEN, CT_M_DROPOUT, CT_M_SEQUENTIAL } ct_module_kind;

#define CT_MODULE_SLOTS 4

struct ct_module {
  ct_module_kind kind;
  int training;
  /* named tensors in state_dict order: parameters, then buffers */
  int n_slots;
  const char *slot_name[CT_MODULE_SLOTS];
  ct_tensor *slot[CT_MODULE_SLOTS];
  int slot_is_buffer[CT_MODULE_SLOTS];
  /* layer settings */
  int64_t in, out;
  int kernel;
  ct_conv2d_opts conv;
  ct_pool2d_opts pool;
  double p, eps, momentum;
  /* Sequential */
  int n_children;
  ct_module **children;
};

ct_module *ct__module_alloc(ct_module_kind kind);
/* Take t (a fresh, untracked reference) as the module's named tensor. */
void ct__module_add(ct_module *m, const char *name, ct_tensor *t, int is_buffer);
/* A short description naming the layer's sizes, for error messages: "Linear(128, 64)",
 * "Conv2d(3, 64, kernel_size=3)", "BatchNorm2d(64)", "ReLU()", "Sequential". Returns buf. */
char *ct__module_desc(const ct_module *m, char *buf, size_t n);
/* Does an input of this shape fit the layer's sizes? Linear: (*, in_features); Conv2d: (N,
 * in_channels, H, W); BatchNorm2d: (N, num_features, *); any shape for the others. 1 if it does,
 * else 0 with CT_ESHAPE set, naming the shapes without any prefix: "input has 15 features (shape
 * (128, 15)), expected 128; ...". The caller puts the module in front (ct__error_prefix). Used by
 * forward (layers.c) and ct_module_check_alignment (alignment.c), so both say the same. */
int ct__module_input_fits(const ct_module *m, int ndim, const int64_t *shape);
/* The parameter or buffer t takes the converted copy c's storage, device, offset and strides, and
 * c takes t's old storage (freeing c then frees it); t's gradient is zeroed, since it no longer
 * fits. How ct_module_to (module.c) and ct_module_to_memory_format (memory_format.c) convert a
 * module in place, so that the handles optimizers hold stay valid. */
void ct__module_swap_storage(ct_tensor *t, ct_tensor *c);

#endif
