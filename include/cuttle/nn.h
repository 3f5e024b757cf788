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
/* Convert every 4-D parameter and buffer (conv weights) to memory format fmt, in place, keeping
 * the module's handles valid (model.to(memory_format=torch.channels_last)); other tensors stay as
 * they are. The gradients of converted tensors are cleared. Converting a channels_last model back
 * with CT_CONTIGUOUS_FORMAT restores row-major weights. Errors: CT_EINVAL for a NULL m or an invalid
 * fmt, CT_ENOMEM; on error the module is unchanged. */
CT_API ct_status ct_module_to_memory_format(ct_module *m, ct_memory_format fmt);

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

/* The same networks for (N, in_channels, h, w) images and num_classes classes (the data sets of
 * cuttle/datasets.h: CIFAR's (3, 32, 32) and 10 or 100, an image folder's): the mlp's first Linear
 * takes in_channels * h * w features and the last gives num_classes; the cnn's first Conv2d takes
 * in_channels, its first Linear 64 * (h / 4) * (w / 4) features (the two pools floor), its last
 * gives num_classes. ct_model_new(name, dev, gen) is ct_model_new_for(name, 1, 28, 28, 10, dev,
 * gen). Errors: those of ct_model_new; CT_EINVAL for sizes < 1 (the cnn needs h, w >= 4). */
CT_API ct_module *ct_model_new_for(const char *name, int64_t in_channels, int64_t h, int64_t w, int64_t num_classes,
                                   ct_device dev, ct_generator *gen);

/* ---- tensor-core alignment
 *
 * The rule, as the course notes on tensor cores give it after NVIDIA ("Optimizing GPU performance
 * with Tensor Cores", and the Deep Learning Performance guide's matrix-multiplication and
 * convolution pages): a matrix multiply or convolution runs on tensor cores, or runs there without
 * padding, when its dimensions are multiples of 8 for float16 and bfloat16 and of 16 for 8-bit
 * integers. For a Linear those are in_features, out_features and the batch size (the rows of its
 * input); for a Conv2d in_channels, out_channels (and the batch size). cuttle has no int8 dtype:
 * CT_U8 is its 8-bit integer type, and takes the 8-bit rule (the tensor cores' integer MMA takes
 * signed and unsigned 8-bit operands alike). */

/* The multiple the rule asks for in dtype dt: 8 for CT_F16 and CT_BF16, 16 for CT_U8, 0 (no rule)
 * for float32, float64 and the other integer types. -1 with CT_EDTYPE for an invalid dtype. */
CT_API int ct_alignment_multiple(ct_dtype dt);

/* One size of one layer that breaks the rule. */
typedef struct {
  char layer[64];    /* the layer's path, as in state_dict names: "0", "1.2"; "" for the module itself */
  char module[96];   /* the layer, with its sizes: "Linear(15, 64)", "Conv2d(3, 64, kernel_size=3)" */
  const char *what;  /* "in_features", "out_features", "in_channels", "out_channels" or "batch size"
                        (static storage) */
  int64_t value;     /* the size: 15 */
  int multiple;      /* what it must be a multiple of: 8 or 16 */
  int64_t padded;    /* the fix: value rounded up to the next multiple, 16 */
  char message[256]; /* "Linear(15, 64) [layer 0]: in_features 15 is not a multiple of 8 for float16: pad to 16" */
} ct_alignment_issue;

/* Check module m, fed inputs of shape input_shape (ndim sizes, batch first: (128, 15) for a
 * Linear, (64, 3, 26, 26) for a Conv2d), against the rule for dtype (the dtype autocast would run
 * its matrix multiplies in: CT_F16 or CT_BF16 under `cuttle train --amp`). The input shape is
 * carried through the layers (Sequential, Linear, Conv2d, BatchNorm2d, ReLU, MaxPool2d, Flatten,
 * Dropout) as forward would, without computing anything.
 * Lists every Linear's in_features and out_features and every Conv2d's in_channels and
 * out_channels that break the rule, in layer order, and the batch size once, at the first Linear
 * or Conv2d (the same rows feed every later one; for an input of more than 2 dims, a Linear's rows
 * are the product of the leading sizes). At most cap issues are written to out (out may be NULL
 * when cap is 0) and *count (count may be NULL) receives how many there are in all, so a second
 * call with a larger array gets the rest. No rule for dtype (float32): 0 issues, and the shapes
 * are still checked.
 * Returns CT_OK, or:
 *  CT_ESHAPE when the input does not fit a layer, e.g. Linear(128, 64) fed (128, 15): the message
 *    names the first such layer and both shapes, as ct_module_forward would ("ct_module_check_alignment:
 *    layer 0, Linear(128, 64): input has 15 features (shape (128, 15)), expected 128; ..."). The walk
 *    goes on past it as if the layer had been fed what it expects, so out and *count still list
 *    every issue;
 *  CT_EINVAL for a NULL m, ndim outside [0, 8], input_shape NULL with ndim > 0, a negative size, a
 *    negative cap, out NULL with cap > 0 (nothing is written);
 *  CT_EDTYPE for an invalid dtype.
 * The module is only read (borrowed); nothing is allocated. */
CT_API ct_status ct_module_check_alignment(ct_module *m, int ndim, const int64_t *input_shape, ct_dtype dtype,
                                           ct_alignment_issue *out, int cap, int *count);

#ifdef __cplusplus
}
#endif
#endif
