/* src/nn/module.h: the module struct shared by module.c (generic walking, user modules),
 * layers.c (each layer's constructor and forward), alignment.c, memory_format.c and dist's
 * replicas (data_parallel.c). */
#ifndef CUTTLE_MODULE_H
#define CUTTLE_MODULE_H

#include "core/internal.h"
#include "cuttle/nn.h"

typedef enum {
  CT_M_LINEAR, CT_M_CONV2D, CT_M_BATCHNORM2D, CT_M_RELU, CT_M_MAXPOOL2D, CT_M_FLATTEN, CT_M_DROPOUT, CT_M_SEQUENTIAL,
  CT_M_AVGPOOL2D, CT_M_ADAPTIVEAVGPOOL2D, CT_M_IDENTITY, CT_M_SIGMOID, CT_M_TANH, CT_M_GELU, CT_M_SILU, CT_M_BATCHNORM1D,
  CT_M_LAYERNORM, CT_M_EMBEDDING,
  CT_M_USER, /* ct_module_new: a user's forward over named children, parameters and buffers */
  CT_M_KIND_COUNT
} ct_module_kind;

struct ct_module {
  ct_module_kind kind;
  int training;
  /* named tensors in registration order (state_dict lists a module's parameters, then its buffers) */
  int n_slots, cap_slots;
  char **slot_name;        /* owned copies */
  ct_tensor **slot;        /* owned references */
  unsigned char *slot_is_buffer;
  /* named children, in registration order (a Sequential's are "0", "1", ...) */
  int n_children, cap_children;
  char **child_name; /* owned copies */
  ct_module **children;
  /* layer settings */
  int64_t in, out;
  int kernel;
  ct_conv2d_opts conv;
  ct_pool2d_opts pool;
  double p, eps, momentum;
  int approximate;       /* GELU: 1 for the tanh approximation */
  int64_t out_size[2];   /* AdaptiveAvgPool2d */
  int64_t padding_idx;   /* Embedding: the row without gradient, or -1 */
  int norm_ndim;         /* LayerNorm: normalized_shape's dims */
  int64_t norm_shape[CT_MAX_DIMS];
  /* CT_M_USER */
  char *type_name;
  ct_module_forward_fn user_forward;
  void *ctx;
  void (*free_ctx)(void *ctx); /* NULL in a replica (data_parallel.c), which borrows its source's ctx */
};

ct_module *ct__module_alloc(ct_module_kind kind);
/* Take t (a fresh, untracked reference) as the module's named tensor; the name is copied. Returns
 * CT_OK, or CT_ENOMEM (t is then freed). */
ct_status ct__module_add(ct_module *m, const char *name, ct_tensor *t, int is_buffer);
/* Take child as m's child under name (copied). CT_ENOMEM frees child. */
ct_status ct__module_add_child(ct_module *m, const char *name, ct_module *child);
/* The slot named name, or -1. */
int ct__module_find_slot(const ct_module *m, const char *name);
/* A short description naming the layer's sizes, for error messages: "Linear(128, 64)",
 * "Conv2d(3, 64, kernel_size=3)", "BatchNorm2d(64)", "ReLU()", "Sequential". Returns buf. */
char *ct__module_desc(const ct_module *m, char *buf, size_t n);
/* Does an input of this shape fit the layer's sizes? Linear: (*, in_features); Conv2d: (N,
 * in_channels, H, W); BatchNorm2d: (N, num_features, H, W); BatchNorm1d: (N, num_features) or
 * (N, num_features, L); LayerNorm: (*, normalized_shape); any shape for the others. 1 if it does,
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
