/* cuttle/nn.h: neural-network modules whose parameters live on a device.
 *
 * A module owns its parameters (tensors that require grad) and buffers (BatchNorm's running
 * statistics), named as in a PyTorch state_dict: "weight", "bias", and "0.weight", "1.running_mean"
 * inside a Sequential. Initializations follow PyTorch's defaults (kaiming_uniform with a = sqrt 5
 * for Linear and Conv2d weights, uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for their biases). */
#ifndef CUTTLE_NN_H
#define CUTTLE_NN_H

#include "cuttle/export.h"

#include "cuttle/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_module ct_module;

/* Constructors: parameters are created in float32 on dev, drawn from gen (NULL: the default
 * generator). Return NULL on error (CT_EINVAL for bad sizes, CT_EDEVICE, CT_ENOMEM). The caller
 * frees the module with ct_module_free. */
CT_API ct_module *ct_linear_new(int64_t in_features, int64_t out_features, int bias, ct_device dev, ct_generator *gen);
CT_API ct_module *ct_conv2d_new(int64_t in_channels, int64_t out_channels, int kernel_size, const ct_conv2d_opts *opts,
                         int bias, ct_device dev, ct_generator *gen);
/* eps 0 = 1e-5, momentum 0 = 0.1 */
CT_API ct_module *ct_batchnorm2d_new(int64_t num_features, double eps, double momentum, ct_device dev);
CT_API ct_module *ct_relu_new(void);
CT_API ct_module *ct_max_pool2d_new(const ct_pool2d_opts *opts);
CT_API ct_module *ct_flatten_new(void); /* flattens dims 1..-1 */
CT_API ct_module *ct_dropout_new(double p);
/* Takes ownership of the n modules (they are freed with the Sequential). */
CT_API ct_module *ct_sequential_new(int n, ct_module **children);

CT_API void ct_module_free(ct_module *m);
/* Run the module; see ops.h for ownership of the result. */
CT_API ct_tensor *ct_module_forward(ct_module *m, ct_tensor *x);
/* Training mode (dropout active, batch norm on batch statistics) or eval mode; recursive. */
CT_API void ct_module_train(ct_module *m, int training);
CT_API const char *ct_module_type(const ct_module *m); /* "Linear", "Sequential", ...; "?" and CT_EINVAL for NULL */

/* Move every parameter and buffer to dev, keeping the module's handles valid (nn.Module.to).
 * Errors: CT_EDEVICE, CT_ENOMEM; on error the module is unchanged. */
CT_API ct_status ct_module_to(ct_module *m, ct_device dev);

/* Named tensors of a module: parameters first or both, in registration order. */
typedef struct {
  char name[192];   /* "0.weight" */
  ct_tensor *tensor; /* borrowed: owned by the module */
  int is_buffer;    /* 1 for a buffer (running_mean), 0 for a parameter */
} ct_named_tensor;
/* Writes at most cap entries to out (out may be NULL to count) and returns the total count, or
 * CT_EINVAL for a NULL m or a negative cap.
 * with_buffers: 0 = parameters only (for an optimizer), 1 = parameters and buffers (state_dict). */
CT_API int ct_module_named_tensors(ct_module *m, int with_buffers, ct_named_tensor *out, int cap);
/* Total number of parameter elements; -1 with CT_EINVAL for NULL. ct_module_train and
 * ct_module_print set CT_EINVAL for a NULL argument. */
CT_API int64_t ct_module_num_params(ct_module *m);
/* Print the module tree in PyTorch's repr style. */
CT_API void ct_module_print(ct_module *m, FILE *f);

/* The reference networks of `cuttle train`, for (N, 1, 28, 28) float32 images and 10 classes,
 * built as Sequentials so their state_dict keys match the same nn.Sequential in PyTorch:
 *  "mlp": Flatten, Linear(784, 256), ReLU, Linear(256, 128), ReLU, Linear(128, 10)
 *  "cnn": Conv2d(1, 32, 3, padding=1), ReLU, MaxPool2d(2), Conv2d(32, 64, 3, padding=1), ReLU,
 *         MaxPool2d(2), Flatten, Linear(3136, 128), ReLU, Linear(128, 10)
 * Errors: CT_EINVAL for another name (the message lists the names), those of the constructors. */
CT_API ct_module *ct_model_new(const char *name, ct_device dev, ct_generator *gen);

#ifdef __cplusplus
}
#endif
#endif
