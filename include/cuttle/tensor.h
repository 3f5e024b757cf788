/* cuttle/tensor.h: dtypes, tensors, views, creation, explicit copies, the copy ledger and scopes.
 *
 * A tensor is a view (shape, strides in elements, offset) of a reference-counted storage that lives
 * on one device. Views share the storage, so a view and its base can be freed in any order.
 *
 * Ownership. A function that returns a new ct_tensor* hands out one reference:
 *  - with no scope open on this thread, the caller owns it and releases it with ct_tensor_free;
 *  - while a scope is open (ct_scope_begin), the scope holds it and releases it at ct_scope_end, so
 *    the temporaries of a training step need no free call each (DJL's NDManager, an autorelease
 *    pool). ct_tensor_free may still release one early; ct_scope_keep moves it out of the scope.
 * Functions that take tensors never take ownership of them. */
#ifndef CUTTLE_TENSOR_H
#define CUTTLE_TENSOR_H

#include "cuttle/export.h"

#include <stdint.h>
#include <stdio.h>
#include "cuttle/device.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_MAX_DIMS 8

/* X-macro: enum, name as PyTorch prints it, size in bytes, is-floating. */
#define CT_DTYPE_TABLE(X)      \
  X(CT_F32, "float32", 4, 1)   \
  X(CT_F64, "float64", 8, 1)   \
  X(CT_F16, "float16", 2, 1)   \
  X(CT_BF16, "bfloat16", 2, 1) \
  X(CT_I32, "int32", 4, 0)     \
  X(CT_I64, "int64", 8, 0)     \
  X(CT_U8, "uint8", 1, 0)      \
  X(CT_BOOL, "bool", 1, 0)

typedef enum {
#define CT__DTYPE_ENUM(e, name, size, fl) e,
  CT_DTYPE_TABLE(CT__DTYPE_ENUM)
#undef CT__DTYPE_ENUM
  CT_DTYPE_COUNT
} ct_dtype;

CT_API const char *ct_dtype_name(ct_dtype dt); /* "float32"; "?" for an invalid value */
CT_API size_t ct_dtype_size(ct_dtype dt);      /* bytes per element; 0 for an invalid value */
CT_API int ct_dtype_is_floating(ct_dtype dt);  /* 1 for f32, f64, f16, bf16 */
/* The dtype of a op on a and b, by PyTorch's promotion rules (torch.result_type on two tensors of
 * the same dimensionality): bool < u8 < i32 < i64 < floating; f16 with bf16 gives f32. */
CT_API ct_dtype ct_promote_types(ct_dtype a, ct_dtype b); /* CT_DTYPE_COUNT and CT_EDTYPE for an invalid dtype */
/* Parse "float32"/"f32", ... into *out. Errors: CT_EINVAL. */
CT_API ct_status ct_dtype_parse(const char *s, ct_dtype *out);

/* Half-precision conversions (IEEE 754 binary16 and bfloat16), round to nearest even; overflow
 * to float16 gives inf; a NaN stays NaN and comes out quiet, except bfloat16 -> float32, which
 * keeps the bits as c10::BFloat16 does (float16 -> float32 as c10's fp16_ieee_to_fp32_value). No
 * errors, no ownership: plain values. */
CT_API uint16_t ct_f32_to_f16(float f);
CT_API float ct_f16_to_f32(uint16_t h);
CT_API uint16_t ct_f32_to_bf16(float f);
CT_API float ct_bf16_to_f32(uint16_t h);

typedef struct ct_tensor ct_tensor;

/* ---- creation: every constructor takes a device; errors: CT_EINVAL (shape: ndim outside [0, 8], a
 * NULL shape with ndim > 0, a negative size, sizes whose product or byte count overflows int64),
 * CT_EDTYPE (an invalid dtype), CT_EDEVICE (a missing device), CT_ENOMEM. shape has ndim entries (ndim 0 is a
 * scalar tensor). */
CT_API ct_tensor *ct_empty(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev);
CT_API ct_tensor *ct_zeros(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev);
CT_API ct_tensor *ct_ones(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev);
CT_API ct_tensor *ct_full(int ndim, const int64_t *shape, double value, ct_dtype dt, ct_device dev);
/* The 0-dim tensor holding value. */
CT_API ct_tensor *ct_scalar(double value, ct_dtype dt, ct_device dev);
/* 1-D [start, start+step, ...) below end (exclusive), like torch.arange. step != 0. */
CT_API ct_tensor *ct_arange(double start, double end, double step, ct_dtype dt, ct_device dev);
/* A tensor of the given shape holding a copy of numel contiguous elements of dtype dt read from
 * the host buffer data (row-major). The buffer stays the caller's. */
CT_API ct_tensor *ct_from_host(const void *data, int ndim, const int64_t *shape, ct_dtype dt, ct_device dev);

/* ---- random numbers. A Philox4x32-10 counter-based generator (Salmon et al., "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11): element i of a draw is a pure function of (seed, offset + i),
 * so the same seed gives the same numbers on every device and for any thread count. */
typedef struct {
  uint64_t seed;
  uint64_t offset; /* counter of 128-bit blocks consumed so far */
} ct_generator;

CT_API ct_generator ct_generator_new(uint64_t seed);
/* Uniform in [lo, hi). dt must be floating. gen may be NULL for the process-wide default
 * generator (seeded by ct_manual_seed, default seed 0). */
CT_API ct_tensor *ct_rand(int ndim, const int64_t *shape, double lo, double hi, ct_dtype dt, ct_device dev, ct_generator *gen);
/* Normal with mean and std (Box-Muller on Philox outputs). dt must be floating. */
CT_API ct_tensor *ct_randn(int ndim, const int64_t *shape, double mean, double std, ct_dtype dt, ct_device dev, ct_generator *gen);
/* Integers uniform in [lo, hi). dt must be an integer dtype; hi > lo. */
CT_API ct_tensor *ct_randint(int ndim, const int64_t *shape, int64_t lo, int64_t hi, ct_dtype dt, ct_device dev, ct_generator *gen);
/* Reseed the default generator (torch.manual_seed). */
CT_API void ct_manual_seed(uint64_t seed);
CT_API ct_generator *ct_default_generator(void);

/* ---- accessors. A NULL t sets CT_EINVAL and gives -1 (ndim, size, numel), NULL (shape, strides,
 * data), CT_DTYPE_COUNT (dtype), a device that does not exist (index -1) or 0 (is_contiguous). */
CT_API int ct_tensor_ndim(const ct_tensor *t);
CT_API const int64_t *ct_tensor_shape(const ct_tensor *t);   /* ndim entries */
CT_API const int64_t *ct_tensor_strides(const ct_tensor *t); /* ndim entries, in elements */
CT_API int64_t ct_tensor_size(const ct_tensor *t, int dim);  /* dim may be negative; -1 if out of range */
CT_API int64_t ct_tensor_numel(const ct_tensor *t);
CT_API ct_dtype ct_tensor_dtype(const ct_tensor *t);
CT_API ct_device ct_tensor_device(const ct_tensor *t);
CT_API int ct_tensor_is_contiguous(const ct_tensor *t);
/* Host pointer to the first element for a CPU tensor (shape/strides apply), NULL for others. */
CT_API void *ct_tensor_data(ct_tensor *t);
/* Writes "(2, 3)" into buf of size n and returns buf; NULL with CT_EINVAL for a NULL t or buf. */
CT_API char *ct_shape_str(const ct_tensor *t, char *buf, size_t n);

/* ---- ownership (see the top of this file) */
/* Add a reference; the caller releases it with ct_tensor_free. Returns t (NULL for NULL, with
 * CT_EINVAL set unless an error is already pending, as for the ops). */
CT_API ct_tensor *ct_tensor_retain(ct_tensor *t);
/* Release one reference. NULL is allowed. */
CT_API void ct_tensor_free(ct_tensor *t);

/* Open a scope on this thread; scopes nest. Only a stack deeper than 8 scopes allocates: CT_ENOMEM
 * when that fails, and then no scope was opened (so no ct_scope_end belongs to this call). */
CT_API ct_status ct_scope_begin(void);
/* Release every reference the innermost scope still holds, and close it. */
CT_API void ct_scope_end(void);
/* Move one reference to t out of the innermost scope: to the enclosing scope if there is one, else
 * to the caller. Returns t. A no-op when t is not held by the innermost scope. NULL with CT_ENOMEM
 * when the enclosing scope cannot grow: t then stays in the innermost scope. */
CT_API ct_tensor *ct_scope_keep(ct_tensor *t);

/* ---- views: share storage with t; errors: CT_ESHAPE with the shapes in the message. */
/* New shape with the same numel; one entry may be -1. Copies (like torch.reshape) when t's strides
 * do not allow a view. */
CT_API ct_tensor *ct_reshape(ct_tensor *t, int ndim, const int64_t *shape);
/* Like ct_reshape but never copies: fails with CT_ESHAPE when no view is possible (torch.view). */
CT_API ct_tensor *ct_view(ct_tensor *t, int ndim, const int64_t *shape);
CT_API ct_tensor *ct_permute(ct_tensor *t, const int *dims);
CT_API ct_tensor *ct_transpose(ct_tensor *t, int d0, int d1);
/* Elements [start, start+length) of dim (torch.narrow). */
CT_API ct_tensor *ct_narrow(ct_tensor *t, int dim, int64_t start, int64_t length);
/* Python's t[..., start:end:step, ...] on one dim; end is clamped to the size; step >= 1. */
CT_API ct_tensor *ct_slice(ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
/* Broadcast to shape (size-1 dims get stride 0; new leading dims may be added; -1 keeps a size). */
CT_API ct_tensor *ct_expand(ct_tensor *t, int ndim, const int64_t *shape);
CT_API ct_tensor *ct_unsqueeze(ct_tensor *t, int dim);
CT_API ct_tensor *ct_squeeze(ct_tensor *t, int dim);
/* Dims start_dim..end_dim merged into one (torch.flatten). */
CT_API ct_tensor *ct_flatten(ct_tensor *t, int start_dim, int end_dim);
/* t itself (one more reference) when contiguous, else a contiguous copy. */
CT_API ct_tensor *ct_contiguous(ct_tensor *t);
/* A contiguous copy of t in dtype dt (one more reference to t when it already has dt). */
CT_API ct_tensor *ct_cast(ct_tensor *t, ct_dtype dt);

/* ---- memory formats (PyTorch's torch.memory_format). A channels_last tensor keeps its logical
 * shape (N, C, H, W) and indexing; only its strides change, to (H W C, 1, W C, C): the channels of
 * one pixel lie next to each other in memory (NHWC), as torch.channels_last. conv2d, max/avg
 * pooling, batch norm, relu and the elementwise ops take either format and give their result in
 * the format their input suggests (ct_tensor_suggest_memory_format), as PyTorch does; reshape,
 * flatten and ct_contiguous give row-major (NCHW) results, as torch's do. */
typedef enum {
  CT_CONTIGUOUS_FORMAT = 0, /* row-major, torch.contiguous_format */
  CT_CHANNELS_LAST = 1      /* 4-D only: strides (H W C, 1, W C, C), torch.channels_last */
} ct_memory_format;
/* t in memory format fmt (Tensor.contiguous(memory_format=...)). Returns t itself (one more
 * reference) when t is already dense in fmt and its strides suggest fmt (a tensor with size-1 dims
 * can be dense in both formats; then its strides decide, as ct_tensor_suggest_memory_format), else
 * a copy with fmt's strides, which autograd differentiates as the identity. Any dtype and device.
 * Errors: CT_EINVAL for a NULL t or an invalid fmt; CT_ESHAPE when fmt is CT_CHANNELS_LAST and t
 * is not 4-D (torch: "required rank 4 tensor to use channels_last format"); CT_ENOMEM. */
CT_API ct_tensor *ct_contiguous_format(ct_tensor *t, ct_memory_format fmt);
/* 1 when t's elements are dense in memory format fmt (Tensor.is_contiguous(memory_format=...)):
 * row-major for CT_CONTIGUOUS_FORMAT (as ct_tensor_is_contiguous), strides (H W C, 1, W C, C) for
 * CT_CHANNELS_LAST on a 4-D t; size-1 dims may have any stride, as in PyTorch. 0 otherwise (a t
 * that is not 4-D is never channels_last). A NULL t or an invalid fmt gives 0 with CT_EINVAL set. */
CT_API int ct_tensor_is_contiguous_format(const ct_tensor *t, ct_memory_format fmt);
/* The memory format t's strides suggest (PyTorch's TensorBase::suggest_memory_format and
 * is_channels_last_strides_2d in c10/core/MemoryFormat.h): CT_CHANNELS_LAST when t is 4-D and its
 * strides order the dims as channels_last (C fastest, then W, H, N), ties of size-1 dims going to
 * CT_CONTIGUOUS_FORMAT; else CT_CONTIGUOUS_FORMAT. This is the rule by which an op chooses the
 * format of its output. A NULL t gives CT_CONTIGUOUS_FORMAT with CT_EINVAL set. */
CT_API ct_memory_format ct_tensor_suggest_memory_format(const ct_tensor *t);

/* ---- explicit copies between devices */
enum {
  CT_COPY = 1 << 0,         /* always copy, even when t already lives on dev */
  CT_NON_BLOCKING = 1 << 1, /* asynchronous when the host side is pinned; recorded honestly */
};
/* CT_NON_BLOCKING in detail (cuttle/cuda.h has pinned memory and events):
 *  - host to GPU from a pinned tensor (ct_empty_pinned, ct_pin_memory): the copy is queued on the
 *    device's copy stream and ct_to returns at once; ops on the result wait for it, and the source
 *    may be freed at once (the pinned cache keeps its bytes until the copy ended). From pageable
 *    memory the copy blocks, and the ledger counts it as blocking.
 *  - GPU to host: the result is allocated pinned and the copy is asynchronous: read it only after
 *    ct_synchronize(device) or an event recorded after the ct_to (as torch's .to(non_blocking=True)).
 *  - within one GPU: always asynchronous (stream-ordered). Without the CUDA backend: no effect. */
/* t on dev. Returns t itself (one more reference) when it already lives there and CT_COPY is not
 * given, else a copy, counted in the ledger. Errors: CT_EDEVICE for a missing device, CT_EINVAL for
 * NULL t or flags other than CT_COPY and CT_NON_BLOCKING. */
CT_API ct_tensor *ct_to(ct_tensor *t, ct_device dev, int flags);
/* Copy src into dst elementwise (same shape or broadcastable to dst; any dtypes; both on one
 * device, or one on the CPU). Errors: CT_ESHAPE, CT_EDEVICE. */
CT_API ct_status ct_copy_(ct_tensor *dst, ct_tensor *src);
/* Copy t's elements, converted to dt, row-major into the host buffer out of nbytes bytes. A
 * synchronization point for a device tensor. Errors: CT_EINVAL when nbytes is too small. */
CT_API ct_status ct_to_host(ct_tensor *t, void *out, size_t nbytes, ct_dtype dt);
/* The value of a one-element tensor as a double (a synchronization point on a GPU). Returns NAN
 * and sets CT_ESHAPE when t has more than one element. */
CT_API double ct_item(ct_tensor *t);

/* The ledger of host<->device traffic: every copy and synchronization point since the start or the
 * last ct_ledger_reset, on this process. */
typedef struct {
  uint64_t h2d_copies, h2d_bytes;     /* host to device */
  uint64_t d2h_copies, d2h_bytes;     /* device to host */
  uint64_t d2d_copies, d2d_bytes;     /* between two devices or within one */
  uint64_t pinned_copies;             /* of the above, from or to pinned host memory */
  uint64_t sync_copies;               /* of the above, that blocked the host */
  uint64_t syncs;                     /* synchronization points (ct_item, ct_synchronize, ...) */
} ct_ledger;
CT_API ct_ledger ct_ledger_get(void);
CT_API void ct_ledger_reset(void);
/* Print the ledger in one line to f. */
CT_API void ct_ledger_print(FILE *f);

/* ---- printing, in PyTorch's style:
 * tensor([[1.0000, 2.0000],
 *         [3.0000, 4.0000]], dtype=float32, device=cpu)
 * Large tensors are summarized with "..." (more than 1000 elements, 3 at each edge). */
CT_API ct_status ct_tensor_print(ct_tensor *t, FILE *f);
/* The same text into a malloc'd string the caller frees; NULL on error. */
CT_API char *ct_tensor_to_string(ct_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
