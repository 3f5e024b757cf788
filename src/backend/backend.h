/* src/backend/backend.h: the vtable, the only contract between the core and a device.
 *
 * The core validates arguments (devices, shapes, dtypes), allocates outputs on the inputs' device
 * and then calls one of these entries. Kernels may assume: every tensor argument lives on the
 * backend's device, shapes agree as documented per entry, outputs are contiguous unless said
 * otherwise, and inputs may be strided (including stride-0 broadcast dims). */
#ifndef CUTTLE_BACKEND_H
#define CUTTLE_BACKEND_H

#include "core/internal.h"

typedef enum {
#define CT_UNARY(E, name, fwd, deriv) CT_UNARY_##E,
#include "ops/ops.def"
  CT_UNARY_COUNT
} ct_unary_op;

typedef enum {
#define CT_BINARY(E, name, fwd, da, db) CT_BINARY_##E,
#define CT_COMPARE(E, name, pred) CT_BINARY_##E,
#include "ops/ops.def"
  CT_BINARY_COUNT
} ct_binary_op;

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { CT_REDUCE_SUM = 0, CT_REDUCE_MAX, CT_REDUCE_MIN } ct_reduce_op;
typedef enum { CT_DIST_UNIFORM = 0, CT_DIST_NORMAL, CT_DIST_RANDINT } ct_dist;
/* CT_POOL_MAX_RELU: max pooling of relu(x); its argmax marks a window whose maximum is 0 (no
 * positive element, no NaN) as passing no gradient */
typedef enum { CT_POOL_MAX = 0, CT_POOL_AVG, CT_POOL_MAX_RELU } ct_pool_kind;

/* Arguments of the fused optimizer kernels. */
typedef struct {
  double lr, beta1, beta2, eps, weight_decay;
  int decoupled;          /* AdamW: p *= 1 - lr wd; Adam: g += wd p */
  double bias_correction1; /* 1 - beta1^t */
  double bias_correction2; /* 1 - beta2^t */
} ct_adam_args;
typedef struct {
  double lr, momentum, dampening, weight_decay;
  int nesterov;
  int first_step; /* the momentum buffer starts as the gradient */
} ct_sgd_args;

typedef struct ct_backend {
  const char *name; /* "cpu", "cuda", "opencl" */
  ct_device_kind kind;

  /* devices */
  int (*device_count)(void);
  /* 1 when device index is a GPU that ct_try_gpu may choose, else 0. NULL: the registry row says
   * (src/core/device.c: every CUDA device is a GPU, the CPU is none). */
  int (*device_is_gpu)(int index);
  ct_status (*device_props)(int index, ct_device_props *out);
  ct_status (*synchronize)(int index);

  /* memory: alloc returns NULL and sets CT_ENOMEM with the figures on failure */
  void *(*alloc)(int index, size_t nbytes);
  void (*free)(int index, void *p, size_t nbytes);
  /* dir: 0 host->device, 1 device->host, 2 device->device. host memory is pageable unless the
   * backend says it is pinned. Returns CT_OK or CT_EBACKEND. */
  ct_status (*memcpy)(int index, void *dst, const void *src, size_t nbytes, int dir, int non_blocking);

  /* dst[i] = (dtype of dst) src[i], same shape, any strides, any dtypes */
  ct_status (*copy)(ct_tensor *dst, ct_tensor *src);
  ct_status (*fill)(ct_tensor *dst, double value);
  /* out = op(x); out contiguous, x same shape */
  ct_status (*unary)(ct_unary_op op, ct_tensor *out, ct_tensor *x);
  /* out = g * op'(x, y): the backward of a unary op; all same shape */
  ct_status (*unary_backward)(ct_unary_op op, ct_tensor *out, ct_tensor *g, ct_tensor *x, ct_tensor *y);
  /* out = op(a, b); a and b already expanded to out's shape */
  ct_status (*binary)(ct_binary_op op, ct_tensor *out, ct_tensor *a, ct_tensor *b);
  /* out = g * d op(a, b) / d(a if wrt == 0 else b); all expanded to out's shape */
  ct_status (*binary_backward)(ct_binary_op op, int wrt, ct_tensor *out, ct_tensor *g, ct_tensor *a, ct_tensor *b);
  /* out = cond ? a : b, all expanded to out's shape */
  ct_status (*where)(ct_tensor *out, ct_tensor *cond, ct_tensor *a, ct_tensor *b);
  /* out has x's ndim with size 1 on reduced dims. indices (int64, out's shape) may be NULL; for
   * MAX/MIN it receives the flat index within the reduced dims (argmax over one dim). */
  ct_status (*reduce)(ct_reduce_op op, ct_tensor *out, ct_tensor *indices, ct_tensor *x);
  /* out (B, M, N) = a (B, M, K) @ b (B, K, N); a, b may be strided in their last two dims */
  ct_status (*matmul)(ct_tensor *out, ct_tensor *a, ct_tensor *b);
  ct_status (*conv2d)(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o);
  /* gx and/or gw and/or gb may be NULL when not wanted */
  ct_status (*conv2d_backward)(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                               const ct_conv2d_opts *o);
  /* max pooling's argmax (y's shape) is the backend's own record for its backward; this picks its
   * dtype for an input x and options o (NULL: int64 flat indices h W + w into x's plane) */
  ct_dtype (*pool2d_argmax_dtype)(const ct_tensor *x, const ct_pool2d_opts *o);
  int pool2d_fuses_relu; /* 1: pool2d and pool2d_backward take CT_POOL_MAX_RELU */
  /* conv2d, then max pooling of its relu with a 2x2 window and stride 2, in float32 (and the halves
   * of conv2d_relu_pool2x2_halves, with their own argmax format there), without the
   * conv output (N, O, Hc, Wc) in memory: y (N, O, Hc/2, Wc/2); argmax as pool2d_argmax_dtype's
   * choice for that pooling and CT_POOL_MAX_RELU's marks. The backward takes gy of y's shape.
   * NULL: no such kernel (the front-end then runs conv2d and pool2d). */
  ct_status (*conv2d_relu_pool2x2)(ct_tensor *y, ct_tensor *argmax, ct_tensor *x, ct_tensor *w, ct_tensor *b,
                                   const ct_conv2d_opts *o);
  ct_status (*conv2d_relu_pool2x2_backward)(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *argmax,
                                            ct_tensor *x, ct_tensor *w, const ct_conv2d_opts *o);
  ct_status (*pool2d)(ct_pool_kind kind, ct_tensor *y, ct_tensor *argmax, ct_tensor *x, const ct_pool2d_opts *o);
  ct_status (*pool2d_backward)(ct_pool_kind kind, ct_tensor *gx, ct_tensor *gy, ct_tensor *argmax, const ct_pool2d_opts *o);
  /* softmax or log_softmax over the last dim of a contiguous (R, C) x */
  ct_status (*softmax)(ct_tensor *y, ct_tensor *x, int log);
  ct_status (*softmax_backward)(ct_tensor *gx, ct_tensor *gy, ct_tensor *y, int log);
  /* fill out with a distribution; element i uses Philox counter (offset + i / 4, i % 4) */
  ct_status (*random)(ct_tensor *out, ct_dist dist, double p0, double p1, uint64_t seed, uint64_t offset);
  /* out = x.index_select(dim, index) and its backward: gx (zeroed) += scatter of gy */
  ct_status (*index_select)(ct_tensor *out, ct_tensor *x, int dim, ct_tensor *index);
  ct_status (*index_add)(ct_tensor *gx, int dim, ct_tensor *index, ct_tensor *gy);
  /* out = x.gather(dim, index) and its backward: gx (zeroed) scatter_add of gy */
  ct_status (*gather)(ct_tensor *out, ct_tensor *x, int dim, ct_tensor *index);
  ct_status (*scatter_add)(ct_tensor *gx, int dim, ct_tensor *index, ct_tensor *gy);
  /* Fused optimizer updates over contiguous p, g and state of one floating dtype (formulas in
   * src/optim/optimizer.c). May be NULL: the optimizer then composes elementwise ops. */
  ct_status (*adam_step)(ct_tensor *p, ct_tensor *g, ct_tensor *m, ct_tensor *v, const ct_adam_args *a);
  ct_status (*sgd_step)(ct_tensor *p, ct_tensor *g, ct_tensor *buf, const ct_sgd_args *a);

  /* ---- memory figures and cache control of device index (cuttle/cuda.h). memory_stats fills
   * allocated, reserved, peak_allocated and num_device_mallocs; every entry may be NULL (the
   * device keeps no figures: zeros, and nothing to empty or reset). */
  ct_status (*memory_stats)(int index, ct_memory_stats *out);
  ct_status (*empty_cache)(int index);
  ct_status (*reset_peak_memory_stats)(int index);

  /* ---- page-locked (pinned) host memory, cached like device memory. Only a backend whose
   * devices copy faster from it has these (CUDA, OpenCL); NULL on the CPU. The core asks the
   * registry which backend pins (ct__pinning_backend), never a kind by name. pinned_alloc returns NULL with
   * CT_ENOMEM / CT_EBACKEND set; pinned_free takes back a block from pinned_alloc (the bytes may
   * still be read by queued copies: the backend must not hand them out again before those end);
   * pinned_stats fills the pinned_* fields of out; pinned_empty_cache frees the idle blocks. */
  void *(*pinned_alloc)(size_t nbytes);
  void (*pinned_free)(void *p, size_t nbytes);
  void (*pinned_stats)(ct_memory_stats *out);
  void (*pinned_empty_cache)(void);

  /* float32 matmul/convolution may use TF32 (cuttle/cuda.h, ct_set_allow_tf32); NULL: no effect */
  void (*set_allow_tf32)(int on);

  /* ---- streams and events of device index, as opaque backend handles. stream NULL means the
   * device's compute stream (where every op runs). Events are recorded after all work queued so far
   * on the stream; event_elapsed_ms waits for `end` and gives the milliseconds between the two.
   * event_query returns 1 when the event completed, 0 when not yet, a negative ct_status on error.
   * All may be NULL only together (the core then reports CT_EUNSUPPORTED). */
  ct_status (*stream_new)(int index, void **out);
  void (*stream_free)(int index, void *stream);
  ct_status (*stream_synchronize)(int index, void *stream);
  ct_status (*stream_wait_event)(int index, void *stream, void *event);
  ct_status (*event_record)(int index, void *stream, void **out);
  ct_status (*event_synchronize)(int index, void *event);
  int (*event_query)(int index, void *event);
  ct_status (*event_elapsed_ms)(int index, void *start, void *end, double *ms);
  void (*event_free)(int index, void *event);

  /* ---- mixed precision (src/optim/grad_scaler.c): g *= inv_scale in place over a contiguous
   * floating g, and found_inf (a contiguous 1-element float32 tensor on g's device) set to 1.0 when
   * any element of g is inf or NaN, else left as it is; one fused pass, as PyTorch's
   * _amp_foreach_non_finite_check_and_unscale_ (aten/src/ATen/native/cuda/AmpKernels.cu). The flag
   * is written only by the device, never read back here, so the call needs no synchronization.
   * NULL (the CUDA backend for now): the scaler composes the check and the product from ops.
   * Kept last in the struct so that backends with designated initializers need no new line. */
  ct_status (*amp_unscale_)(ct_tensor *g, double inv_scale, ct_tensor *found_inf);

  /* ---- channels_last (NHWC) kernels (src/ops/memory_format.c; cuttle/tensor.h's ct_memory_format).
   * The tensors keep their logical (N, C, H, W) shapes; every 4-D one here is dense channels_last
   * (ct_tensor_is_contiguous_format(t, CT_CHANNELS_LAST)): x, y, gx, gy and the weight w and its
   * gradient gw (O, C/G, kH, kW), which is (O, kH, kW, C/G) in memory. b and gb (O) are contiguous;
   * f32 and f64 (x, w, b of one dtype). Max pooling's argmax is int32 in y's shape and format, the
   * flat index h W + w into x's plane (-1: no gradient, for CT_POOL_MAX_RELU; planes of 2^31 pixels
   * or more take the NCHW path); CT_POOL_MAX_RELU is
   * passed only when pool2d_fuses_relu is set. NULL: the front-end permutes to NCHW, runs the
   * entries above and permutes the results back (correct everywhere, two copies slower). The CUDA
   * backend's cuDNN would take x, w and y here with CUDNN_TENSOR_NHWC descriptors. */
  ct_status (*conv2d_nhwc)(ct_tensor *y, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_conv2d_opts *o);
  ct_status (*conv2d_nhwc_backward)(ct_tensor *gx, ct_tensor *gw, ct_tensor *gb, ct_tensor *gy, ct_tensor *x, ct_tensor *w,
                                    const ct_conv2d_opts *o);
  ct_status (*pool2d_nhwc)(ct_pool_kind kind, ct_tensor *y, ct_tensor *argmax, ct_tensor *x, const ct_pool2d_opts *o);
  ct_status (*pool2d_nhwc_backward)(ct_pool_kind kind, ct_tensor *gx, ct_tensor *gy, ct_tensor *argmax,
                                    const ct_pool2d_opts *o);

  /* The half dtypes (bits 1u << CT_F16, 1u << CT_BF16) that matmul, and conv2d with its backward,
   * take as they are (a, b, out or x, w, b, y all of that dtype), accumulating in float32: on the
   * CPU, bf16 matmul where OpenBLAS has cblas_sbgemm. A half dtype not set is computed by the
   * front-end in float32 (operands cast, the result rounded once). */
  unsigned matmul_halves, conv2d_halves;
  /* The half dtypes (bits as above) that conv2d_relu_pool2x2 and its backward take as they are
   * (x, w, b, y, gy and the gradients all of that dtype), computing in float32 inside without a
   * full-size float32 copy of an activation. Their argmax is then (N, O, ceil(Hp Wp / 2)) uint8:
   * each pooled plane's window positions (0 1 / 2 3, 4 for a window relu passes nothing through),
   * two a byte, the first in the low nibble: half the bytes of one a position, so that what the op
   * keeps for its backward shrinks with its output. A half dtype not set runs the ops one by one
   * (conv2d, then relu_max_pool2d). */
  unsigned conv2d_relu_pool2x2_halves;
} ct_backend;

/* out = op(a, b) in place where out may alias a (b broadcasts to out): for accumulating gradients
 * and for optimizer updates. ops/elementwise.c. */
ct_status ct__binary_into(ct_binary_op op, ct_tensor *out, ct_tensor *a, ct_tensor *b);

/* The registry: the backend for a device kind, or NULL when it is not compiled in. */
const ct_backend *ct__backend(ct_device_kind kind);
/* The backend whose pinned host memory serves copies with device d, or NULL when none pins
 * (core/cuda.c): d's own backend for a device other than the CPU, the first in registry order that
 * has pinned_alloc and a device for the CPU. */
const ct_backend *ct__pinning_backend(ct_device d);
/* 1 when s is pinned host memory from be's pinned_alloc, so that be may copy from or to it
 * asynchronously (its pinned cache fences only its own copies), else 0. */
int ct__pinned_by(const ct_storage *s, const ct_backend *be);
extern const ct_backend ct__cpu_backend;
#ifdef CUTTLE_WITH_CUDA
extern const ct_backend ct__cuda_backend;
#endif
#ifdef CUTTLE_WITH_OPENCL
extern const ct_backend ct__opencl_backend;
#endif

#ifdef __cplusplus
}
#endif
#endif
