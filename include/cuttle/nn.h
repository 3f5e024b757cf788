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
/* torch.nn.BatchNorm2d (input (N, C, H, W)) and BatchNorm1d (input (N, C) or (N, C, L)), affine,
 * tracking running statistics: parameters "weight" (1) and "bias" (0), buffers "running_mean" (0),
 * "running_var" (1), float32 (num_features), and "num_batches_tracked", an int64 0-dim tensor that
 * each forward in training mode adds 1 to, as PyTorch's. eps 0 = 1e-5, momentum 0 = 0.1 (momentum
 * must be in [0, 1]; PyTorch's None, a cumulative average, is not offered). Errors: CT_EINVAL for
 * num_features < 1, eps < 0 or momentum outside [0, 1], CT_EDEVICE, CT_ENOMEM. A checkpoint or
 * safetensors file without num_batches_tracked (written before PyTorch 0.4.1, or by cuttle before
 * it kept one) loads, leaving the count as it is. */
CT_API ct_module *ct_batchnorm2d_new(int64_t num_features, double eps, double momentum, ct_device dev);
CT_API ct_module *ct_batchnorm1d_new(int64_t num_features, double eps, double momentum, ct_device dev);
/* torch.nn.LayerNorm(normalized_shape, eps, elementwise_affine): ct_layer_norm over the last ndim
 * dims of its input, whose sizes must be normalized_shape (ndim in [1, 8]); with elementwise_affine
 * the parameters "weight" (1) and "bias" (0) of normalized_shape, float32. eps 0 = 1e-5. Errors:
 * CT_EINVAL for ndim outside [1, 8], a NULL or non-positive shape or eps < 0, CT_EDEVICE,
 * CT_ENOMEM. */
CT_API ct_module *ct_layernorm_new(int ndim, const int64_t *normalized_shape, double eps, int elementwise_affine,
                                   ct_device dev);
/* Activations, no parameters: torch.nn.ReLU, Sigmoid, Tanh, SiLU (x sigmoid(x), ct_silu), and
 * GELU: the exact x Phi(x) (approximate 0, PyTorch's approximate='none', ct_gelu) or the tanh
 * approximation (approximate 1, approximate='tanh', ct_gelu_tanh). Errors: CT_ENOMEM; CT_EINVAL for
 * approximate not 0 or 1. */
CT_API ct_module *ct_relu_new(void);
CT_API ct_module *ct_sigmoid_new(void);
CT_API ct_module *ct_tanh_new(void);
CT_API ct_module *ct_silu_new(void);
CT_API ct_module *ct_gelu_new(int approximate);
/* torch.nn.MaxPool2d and AvgPool2d (count_include_pad=True): ct_max_pool2d's and ct_avg_pool2d's
 * options, checked here (CT_EINVAL for NULL opts, a kernel < 1, a negative stride, padding outside
 * [0, kernel / 2]); a zero stride is the kernel size. */
CT_API ct_module *ct_max_pool2d_new(const ct_pool2d_opts *opts);
CT_API ct_module *ct_avg_pool2d_new(const ct_pool2d_opts *opts);
/* torch.nn.AdaptiveAvgPool2d((out_h, out_w)): any output size (1, 1 is ResNet's global pooling);
 * ct_adaptive_avg_pool2d's semantics. Errors: CT_EINVAL for a size < 1. */
CT_API ct_module *ct_adaptive_avg_pool2d_new(int64_t out_h, int64_t out_w);
CT_API ct_module *ct_flatten_new(void); /* flattens dims 1..-1 */
CT_API ct_module *ct_dropout_new(double p);
/* torch.nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, batch_first=batch_first), with
 * its parameter names (state_dict keys): in_proj_weight (3E, E), in_proj_bias (3E) when bias, and
 * the child out_proj, a Linear(E, E) (out_proj.weight, out_proj.bias). Initialization as torch's
 * _reset_parameters: xavier_uniform_ on in_proj_weight, zero biases, out_proj.weight as Linear's.
 * ct_module_forward(m, x) is self-attention (query = key = value = x, no mask);
 * ct_multihead_attention_forward takes the rest. gen NULL: the default generator. The caller frees
 * m. Errors (NULL): CT_EINVAL for embed_dim not divisible by num_heads (or either below 1), dropout
 * outside [0, 1), bias or batch_first not 0 or 1; CT_EDEVICE; CT_ENOMEM. */
CT_API ct_module *ct_multihead_attention_new(int64_t embed_dim, int64_t num_heads, double dropout, int bias, int batch_first,
                                             ct_device dev, ct_generator *gen);
/* MultiheadAttention's forward with need_weights=False (torch's fast path's result): query (N, L, E)
 * with batch_first (else (L, N, E)), key and value (N, S, E) -> (N, L, E) (or (L, N, E)), the
 * heads through ct_scaled_dot_product_attention (fused on the CPU), dropout on the attention
 * weights only in training mode. attn_mask: NULL, (L, S) or (N * num_heads, L, S), bool with torch's
 * MultiheadAttention meaning (true: NOT allowed to attend) or float (added). is_causal: 1 applies
 * the causal mask itself (torch takes it as a hint beside an explicit mask); not with attn_mask.
 * Returns a new tensor; the caller frees it. Errors (NULL, naming ct_multihead_attention_forward):
 * CT_EINVAL for a NULL argument or an m not made by ct_multihead_attention_new; CT_ESHAPE for an
 * input that is not 3-D with E features; then ct_scaled_dot_product_attention's errors. */
CT_API ct_tensor *ct_multihead_attention_forward(ct_module *m, ct_tensor *query, ct_tensor *key, ct_tensor *value,
                                                 ct_tensor *attn_mask, int is_causal);

/* torch.nn.Embedding(num_embeddings, embedding_dim, padding_idx): a "weight" (num_embeddings,
 * embedding_dim) float32 parameter drawn from N(0, 1) (torch's reset_parameters), its padding row
 * (CT_NO_PADDING_IDX for none, negative counts from the end) zeroed; the forward is ct_embedding:
 * int64/int32 indices (*) -> (*, embedding_dim), the padding row getting no gradient. gen NULL: the
 * default generator. Errors (NULL): CT_EINVAL for sizes below 1 or a padding_idx outside
 * [-num_embeddings, num_embeddings); CT_EDEVICE for a device that does not exist; CT_ENOMEM. */
CT_API ct_module *ct_embedding_new(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx, ct_device dev,
                                   ct_generator *gen);
/* torch.nn.Identity: forward returns its input (one more reference, which the caller frees). */
CT_API ct_module *ct_identity_new(void);
/* Takes ownership of the n modules (they are freed with the Sequential). Its children are named
 * "0", "1", ... as nn.Sequential's. */
CT_API ct_module *ct_sequential_new(int n, ct_module **children);

/* ---- modules that users define (torch.nn.Module)
 *
 * A user module is a forward function over named children, parameters and buffers, registered
 * after ct_module_new as a PyTorch module assigns them in __init__:
 *
 *   ct_module *blk = ct_module_new("BasicBlock", block_forward, NULL, NULL);
 *   ct_module_add_child(blk, "conv1", ct_conv2d_new(64, 64, 3, &o, 0, dev, gen));
 *   ct_module_add_child(blk, "bn1", ct_batchnorm2d_new(64, 0, 0, dev));
 *
 * and block_forward(self, x) finds them with ct_module_child(self, "conv1"). Their state_dict names
 * are PyTorch's ("layer1.0.conv1.weight", "bn1.running_mean"), so every function that walks
 * modules (ct_module_named_tensors, ct_module_to, ct_module_to_memory_format, ct_module_train,
 * checkpoints, optimizers, DDP, ct_data_parallel, autocast) treats them as it treats a Sequential.
 *
 * The forward function gets the module and its input (borrowed) and returns a new reference (the
 * ownership rules of cuttle/tensor.h: a scope may hold it), or NULL with the error set; it frees
 * the temporaries it makes (or runs in the caller's scope). To return the input unchanged, return
 * ct_tensor_retain(x). It must not register or remove children while it runs. ct_data_parallel
 * runs it from several threads at once, on different replicas that share ctx: a forward that
 * writes to ctx must lock. */
typedef ct_tensor *(*ct_module_forward_fn)(ct_module *self, ct_tensor *x);
/* A module of type type_name ("BasicBlock"; NULL or "" gives "Module"; copied) that runs forward.
 * ctx is the caller's data for forward (ct_module_ctx); free_ctx (may be NULL) is called on it when
 * the module is freed, or at once when this call fails. Errors: CT_EINVAL for a NULL forward,
 * CT_ENOMEM. The caller frees the module with ct_module_free. */
CT_API ct_module *ct_module_new(const char *type_name, ct_module_forward_fn forward, void *ctx, void (*free_ctx)(void *ctx));
CT_API void *ct_module_ctx(const ct_module *m); /* the ctx given to ct_module_new; NULL for a layer */
/* 1 in training mode (ct_module_train), 0 in eval mode; 0 and CT_EINVAL for NULL. */
CT_API int ct_module_is_training(const ct_module *m);
/* Register child under name (torch.nn.Module.add_module). Takes ownership of child, even when it
 * fails (so a constructor's result can be passed directly: a NULL child returns the constructor's
 * pending error). Errors: CT_EINVAL for a NULL m or child, m not made with ct_module_new, a name
 * that is NULL, empty, longer than 63 characters, contains '.' or is taken by a child or tensor of
 * m; CT_ENOMEM. */
CT_API ct_status ct_module_add_child(ct_module *m, const char *name, ct_module *child);
/* Register t under name as a parameter (torch.nn.Module.register_parameter: t becomes a leaf that
 * requires grad, and optimizers, DDP and checkpoints see it) or a buffer (register_buffer: saved
 * and moved with the module, never trained; any dtype). Takes the caller's reference to t, even
 * when it fails. Errors: those of ct_module_add_child for m and name; CT_EDTYPE for an integer
 * parameter; CT_EINVAL for a parameter that is an op's result (not a leaf). */
CT_API ct_status ct_module_register_parameter(ct_module *m, const char *name, ct_tensor *t);
CT_API ct_status ct_module_register_buffer(ct_module *m, const char *name, ct_tensor *t);
/* The descendant at a dotted path of child names ("layer1.0.conv1"; a Sequential's children are
 * "0", "1", ...), borrowed from m (torch.nn.Module.get_submodule). NULL with CT_EINVAL naming the
 * missing part. */
CT_API ct_module *ct_module_child(ct_module *m, const char *path);
/* The parameter or buffer at a dotted path ("layer1.0.bn1.running_mean": its state_dict name),
 * borrowed from m. NULL with CT_EINVAL naming the missing part. */
CT_API ct_tensor *ct_module_tensor(ct_module *m, const char *path);
/* m's direct children in registration order: their count (CT_EINVAL for NULL), and child i,
 * borrowed, with its name in *name (may be NULL; valid while m lives); NULL and CT_EINVAL for i
 * outside [0, count). */
CT_API int ct_module_num_children(const ct_module *m);
CT_API ct_module *ct_module_child_at(ct_module *m, int i, const char **name);

CT_API void ct_module_free(ct_module *m);
/* Run the module; see ops.h for ownership of the result. */
CT_API ct_tensor *ct_module_forward(ct_module *m, ct_tensor *x);
/* Training mode (dropout active, batch norm on batch statistics) or eval mode; recursive. */
CT_API void ct_module_train(ct_module *m, int training);
/* "Linear", "Sequential", ..., a user module's type_name; "?" and CT_EINVAL for NULL */
CT_API const char *ct_module_type(const ct_module *m);

/* Move every parameter and buffer to dev, keeping the module's handles valid (nn.Module.to).
 * Errors: CT_EDEVICE, CT_ENOMEM; on error the module is unchanged. */
CT_API ct_status ct_module_to(ct_module *m, ct_device dev);
/* Convert every 4-D parameter and buffer (conv weights) to memory format fmt, in place, keeping
 * the module's handles valid (model.to(memory_format=torch.channels_last)); other tensors stay as
 * they are. The gradients of converted tensors are cleared. Converting a channels_last model back
 * with CT_CONTIGUOUS_FORMAT restores row-major weights. Errors: CT_EINVAL for a NULL m or an invalid
 * fmt, CT_ENOMEM; on error the module is unchanged. */
CT_API ct_status ct_module_to_memory_format(ct_module *m, ct_memory_format fmt);

/* Named tensors of a module in torch.nn.Module.state_dict's order: each module's parameters, then
 * its buffers (with_buffers), then its children's, depth first, in registration order. */
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
/* torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm, norm_type): the norm of all of m's
 * parameter gradients together, total = (sum over every element g of |g|^p)^(1/p) (p = INFINITY:
 * max |g|), computed in float32 (float64 for float64 gradients), then every gradient multiplied in
 * place by min(1, max_norm / (total + 1e-6)). Parameters without a gradient are skipped. The
 * total stays on the gradients' device, nothing is read back (no synchronization), and a
 * non-finite total scales as torch's does (error_if_nonfinite=False). Returns the total as a new
 * 0-dim tensor (float32 or float64, on the gradients' device; a CPU 0 when no parameter has a
 * gradient), which the caller frees. Errors (NULL, ct_last_error() naming ct_clip_grad_norm_):
 * CT_EINVAL for a NULL m, a max_norm negative, NaN or infinite, or a norm_type not > 0;
 * CT_EDEVICE for gradients on different devices; CT_ENOMEM. */
CT_API ct_tensor *ct_clip_grad_norm_(ct_module *m, double max_norm, double norm_type);
/* Print the module tree in PyTorch's repr style. */
CT_API void ct_module_print(ct_module *m, FILE *f);

/* The reference networks of `cuttle train`, for (N, 1, 28, 28) float32 images and 10 classes,
 * built as Sequentials so their state_dict keys match the same nn.Sequential in PyTorch:
 *  "mlp": Flatten, Linear(784, 256), ReLU, Linear(256, 128), ReLU, Linear(128, 10)
 *  "cnn": Conv2d(1, 32, 3, padding=1), ReLU, MaxPool2d(2), Conv2d(32, 64, 3, padding=1), ReLU,
 *         MaxPool2d(2), Flatten, Linear(3136, 128), ReLU, Linear(128, 10)
 * Errors: CT_EINVAL for another name (the message lists the names), those of the constructors. */
CT_API ct_module *ct_model_new(const char *name, ct_device dev, ct_generator *gen);

/* The same networks, and "resnet18", "resnet34", "resnet50" (ct_resnet_new with in_channels and
 * num_classes; small_input when the name ends in "-small": "resnet18-small"), for (N, in_channels,
 * h, w) images and num_classes classes (the data sets of
 * cuttle/datasets.h: CIFAR's (3, 32, 32) and 10 or 100, an image folder's): the mlp's first Linear
 * takes in_channels * h * w features and the last gives num_classes; the cnn's first Conv2d takes
 * in_channels, its first Linear 64 * (h / 4) * (w / 4) features (the two pools floor), its last
 * gives num_classes. ct_model_new(name, dev, gen) is ct_model_new_for(name, 1, 28, 28, 10, dev,
 * gen). Errors: those of ct_model_new; CT_EINVAL for sizes < 1 (the cnn needs h, w >= 4). */
CT_API ct_module *ct_model_new_for(const char *name, int64_t in_channels, int64_t h, int64_t w, int64_t num_classes,
                                   ct_device dev, ct_generator *gen);

/* ---- torchvision's ResNets */
typedef struct {
  int64_t in_channels; /* channels of the input images; 0 = 3 (1 for Fashion-MNIST) */
  int64_t num_classes; /* 0 = 1000 */
  /* For small images (CIFAR's 32 x 32, Fashion-MNIST's 28 x 28): conv1 is a 3 x 3 stride-1 conv
   * (padding 1) and there is no maxpool, the usual CIFAR form; the state_dict keys stay the same
   * (conv1.weight is then (64, in_channels, 3, 3)). 0: torchvision's 7 x 7 stride-2 conv1 and
   * 3 x 3 stride-2 max-pool. */
  int small_input;
} ct_resnet_opts;
/* torchvision.models.resnet18, resnet34 or resnet50 (depth 18, 34, 50; BasicBlock [2, 2, 2, 2]
 * and [3, 4, 6, 3], Bottleneck [3, 4, 6, 3], with the stride in the Bottleneck's 3 x 3 conv as
 * torchvision >= 0.13) for (N, in_channels, H, W) float32 images, giving (N, num_classes) logits.
 * State-dict names, shapes and dtypes are torchvision's (num_batches_tracked int64), so a
 * torchvision model's safetensors file loads with ct_checkpoint_load and the reverse. Initialized as
 * torchvision (src/nn/resnet.c): conv weights kaiming_normal_(mode="fan_out", relu), BatchNorm 1
 * and 0, fc PyTorch's Linear default; drawn from gen (NULL: the default generator) on dev. Built
 * from user modules (ct_module_new: "ResNet", "BasicBlock", "Bottleneck"). opts may be NULL (the
 * defaults). The caller frees the module with ct_module_free. Errors: CT_EINVAL for another depth
 * or sizes < 0, CT_EDEVICE, CT_ENOMEM. Inputs need H, W >= 1 (the stem and the strides floor; the
 * adaptive pool takes any size left). */
CT_API ct_module *ct_resnet_new(int depth, const ct_resnet_opts *opts, ct_device dev, ct_generator *gen);

/* ---- tensor-core alignment
 *
 * The rule, as NVIDIA gives it ("Optimizing GPU performance
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
