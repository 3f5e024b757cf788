/* src/core/backend.h: the contract between the core and a device backend (cpu, cuda, opencl).
 *
 * Two interfaces in one registry row (ct_backend): the device interface (enumeration and
 * properties, memory and its caching allocator, pinned host memory, copies, streams and events,
 * synchronization, TF32) and the kernel table (ct_kernels, generated from core/kernels.def). The
 * core and the ops validate arguments (devices, shapes, dtypes), allocate outputs on the inputs'
 * device and then call a kernel through CT_KERNEL_CALL, which turns a kernel the backend lacks into
 * CT_EUNSUPPORTED naming the op, the kernel, the dtype, the memory format and the device: a
 * missing kernel is an error, never a call through NULL. What a backend takes as it is (float16
 * matmul, a fused relu in max pooling, ...) is asked of ct__supports, never of a flag per case.
 * This header is core's: it includes nothing above core. */
#ifndef CUTTLE_BACKEND_H
#define CUTTLE_BACKEND_H

#include "core/internal.h"

typedef enum {
#define CT_UNARY(E, name, fwd, deriv) CT_UNARY_##E,
#include "core/ops.def"
  CT_UNARY_COUNT
} ct_unary_op;

typedef enum {
#define CT_BINARY(E, name, fwd, da, db) CT_BINARY_##E,
#define CT_COMPARE(E, name, pred) CT_BINARY_##E,
#include "core/ops.def"
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
  /* capturable (ct_optim_opts): a float32 0-dim tensor on p's device holding t, this step's count
   * (already advanced); the kernel then computes the bias corrections itself, 1 - beta^t in double
   * (in the device's REAL on OpenCL), and ignores the two above. NULL: the host's values above. */
  const ct_tensor *step;
} ct_adam_args;
typedef struct {
  double lr, momentum, dampening, weight_decay;
  int nesterov;
  int first_step; /* the momentum buffer starts as the gradient */
  const ct_tensor *step; /* as ct_adam_args.step: when set, first_step is t == 1, read on the device */
} ct_sgd_args;
/* The fused attention kernels' scalars (kernels.def's attention): the score scale (1/sqrt(D) by
 * default), the causal mask, and dropout's probability with the Philox key and counter it draws. */
typedef struct {
  double scale;
  int causal;
  double dropout_p; /* 0: no dropout (seed and offset unused) */
  uint64_t seed, offset;
} ct_attention_args;

/* The kernel ids (CT_K_<name>), one per line of core/kernels.def, then the capabilities that are
 * no kernel of their own but a variant of one that a backend may take: CT_K_pool2d_max_relu, pool2d
 * and pool2d_backward (and their NHWC forms) taking CT_POOL_MAX_RELU. */
typedef enum {
#define CT_KERNEL(name, params) CT_K_##name,
#include "core/kernels.def"
  CT_K_KERNEL_COUNT,
  CT_K_pool2d_max_relu = CT_K_KERNEL_COUNT,
  CT_K_COUNT
} ct_kernel_id;

/* The kernel table: a function per kernel, NULL (written CT_UNSUPPORTED in a backend's table) for
 * one the backend lacks. Read only through CT_KERNEL_CALL and ct__supports. */
typedef struct ct_kernels {
#define CT_KERNEL(name, params) ct_status(*name) params;
#include "core/kernels.def"
} ct_kernels;

/* How a backend's table marks a kernel it lacks. The tables are generated from the matrix of
 * src/backend/kernels_by_backend.def, whose Y and N pick the function or this. */
#define CT_UNSUPPORTED NULL
#define CT_HAS_Y(fn) fn
#define CT_HAS_N(fn) CT_UNSUPPORTED

typedef struct ct_backend {
  const char *name; /* "cpu", "cuda", "opencl" */
  ct_device_kind kind;

  /* ---- the device interface */
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

  /* memory figures and cache control of device index (cuttle/cuda.h). memory_stats fills
   * allocated, reserved, peak_allocated and num_device_mallocs; every entry may be NULL (the
   * device keeps no figures: zeros, and nothing to empty or reset). */
  ct_status (*memory_stats)(int index, ct_memory_stats *out);
  ct_status (*empty_cache)(int index);
  ct_status (*reset_peak_memory_stats)(int index);

  /* page-locked (pinned) host memory, cached like device memory. Only a backend whose devices copy
   * faster from it has these (CUDA, OpenCL); NULL on the CPU. The core asks the registry which
   * backend pins (ct__pinning_backend), never a kind by name. pinned_alloc returns NULL with
   * CT_ENOMEM / CT_EBACKEND set; pinned_free takes back a block from pinned_alloc (the bytes may
   * still be read by queued copies: the backend must not hand them out again before those end);
   * pinned_stats fills the pinned_* fields of out; pinned_empty_cache frees the idle blocks. */
  void *(*pinned_alloc)(size_t nbytes);
  void (*pinned_free)(void *p, size_t nbytes);
  void (*pinned_stats)(ct_memory_stats *out);
  void (*pinned_empty_cache)(void);

  /* float32 matmul/convolution may use TF32 (cuttle/cuda.h, ct_set_allow_tf32); NULL: no effect */
  void (*set_allow_tf32)(int on);

  /* streams and events of device index, as opaque backend handles. stream NULL means the device's
   * compute stream (where every op runs). Events are recorded after all work queued so far on the
   * stream; event_elapsed_ms waits for `end` and gives the milliseconds between the two.
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

  /* graphs of device index (CUDA graphs): capture_begin starts recording the work the calling
   * thread queues on the compute stream, instead of running it; capture_end stops and gives the
   * executable graph in *out (on failure: NULL, the error set, the capture abandoned); replay queues
   * the whole graph on the compute stream; graph_free releases it and its memory pool. All NULL
   * together when the backend cannot capture (the core then reports CT_EUNSUPPORTED). */
  ct_status (*graph_capture_begin)(int index);
  ct_status (*graph_capture_end)(int index, void **out);
  ct_status (*graph_replay)(int index, void *graph);
  void (*graph_free)(int index, void *graph);

  /* ---- the kernels, and what they take as they are */
  ct_kernels kernels;
  /* 1 when kernel (or capability) k takes dtype dt in memory format fmt as it is, else 0; asked
   * through ct__supports, which answers 0 for a kernel the table lacks. NULL: every kernel of the
   * table takes every dtype and format the front-end passes it. The cases asked: CT_K_matmul,
   * CT_K_conv2d and CT_K_conv2d_relu_pool2x2 with CT_F16/CT_BF16 (else the front-end computes in
   * float32: operands widened, the result rounded once), CT_K_batch_norm with CT_F16/CT_BF16 (both
   * batch norm kernels then take a half input with float32 parameters and statistics; else the
   * front-end casts the input to float32 around them), and CT_K_pool2d_max_relu. */
  int (*supports)(ct_kernel_id k, ct_dtype dt, ct_memory_format fmt);
  /* max pooling's argmax (y's shape) is the backend's own record for its backward; this picks its
   * dtype for an input x and options o (NULL: int64 flat indices h W + w into x's plane) */
  ct_dtype (*pool2d_argmax_dtype)(const ct_tensor *x, const ct_pool2d_opts *o);
} ct_backend;

/* The names of the kernels and capabilities, for messages: ct__kernel_names[CT_K_matmul] is
 * "matmul" (core/dispatch.c). */
extern const char *const ct__kernel_names[CT_K_COUNT];

/* CT_KERNEL_CALL(be, name, op, t, args...): be's kernel `name` on args, or, where be lacks it,
 * CT_EUNSUPPORTED with "<op>: the <be> backend has no <name> kernel (<dtype>, <format>, on
 * <device of t>)"; t is the tensor the message describes (the output or first operand). Evaluates
 * to a ct_status. The one way the ops and the core call a kernel (scripts/kernel_tables.sh checks
 * that no file reads `kernels.` otherwise). */
#define CT_KERNEL_CALL(be, name, op, t, ...)                                                              \
  ((be)->kernels.name ? (__atomic_load_n(&ct__profile_mode, __ATOMIC_RELAXED)                           \
                             ? (ct__profile_begin(),                                                    \
                                ct__profile_end(CT_K_##name, (op), (t), (be)->kernels.name(__VA_ARGS__))) \
                             : (be)->kernels.name(__VA_ARGS__))                                         \
                      : ct__kernel_missing((be), CT_K_##name, (op), (t)))
/* The profiler's hooks in CT_KERNEL_CALL (core/profiler.c, cuttle/profiler.h): the mode (a
 * ct_profile_mode, 0 when off), the clock read before a kernel call (begin), and after it (end:
 * waits for t's device first in CT_PROFILE_SYNC, adds the call's self time to its row, returns s).
 * The comma operator orders begin before the call; end's arguments, the call among them, come after
 * it in an order C leaves open, so CT_KERNEL_CALL's op and t must be plain values, without side
 * effects and not changed by the call (every call site passes a name or a string). */
extern int ct__profile_mode;
void ct__profile_begin(void);
ct_status ct__profile_end(ct_kernel_id k, const char *op, const ct_tensor *t, ct_status s);
/* be->memcpy(d.index, dst, src, nbytes, kind, async), timed as a row memcpy_host_to_device (kind
 * 0), memcpy_device_to_host (1) or memcpy_device_to_device (2) of op on d while the profiler is on:
 * the core's copies between memories, which no kernel call covers. Returns memcpy's status. */
ct_status ct__profile_memcpy(const ct_backend *be, ct_device d, void *dst, const void *src, size_t nbytes, int kind,
                             int async, const char *op);
/* How many times CT_PROFILE_SYNC has waited for a device (not the CPU) since the process began. */
int64_t ct__profile_waits(void);
/* The error of CT_KERNEL_CALL for a kernel be lacks: sets it and returns CT_EUNSUPPORTED. */
ct_status ct__kernel_missing(const ct_backend *be, ct_kernel_id k, const char *op, const ct_tensor *t);
/* 1 when be has kernel k (or capability k) and takes dt in fmt as it is (be->supports), else 0. */
int ct__supports(const ct_backend *be, ct_kernel_id k, ct_dtype dt, ct_memory_format fmt);
/* 1 when be's table has kernel k (k < CT_K_KERNEL_COUNT), else 0. */
int ct__has_kernel(const ct_backend *be, ct_kernel_id k);

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
