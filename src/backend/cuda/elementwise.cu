/* src/backend/cuda/elementwise.cu: unary, binary and comparison ops, their backward kernels, and
 * where. The math is not written here: every formula comes from src/core/ops.def through the same
 * X-macros that build the enums in backend.h, so the CPU and the GPU compute the same expressions.
 *
 * The formulas are double-precision C expressions in x, y, a, b. Here x, y, a, b have the type C:
 * float for float32/float16/bfloat16 (and uint8/bool) storage, double for float64 and the integer
 * dtypes. The math functions resolve to their float overloads for float arguments; a double literal
 * in a formula (1.0 / x) promotes that one step to double, which costs nothing measurable on a
 * memory-bound kernel and only brings the result closer to the CPU's double reference.
 *
 * Each op is a template argument, so the op's switch folds away. Two kernels per op:
 *  - contiguous: every operand contiguous and of one floating dtype S (the common case);
 *  - strided: any strides (stride-0 broadcast dims included) over up to 8 dims merged by the
 *    iterator, each operand of any dtype, read and written through runtime dtype tags.
 * Integer operands (int32, int64, uint8, bool) with an integer result (neg, abs, relu, add, sub,
 * mul, pow, maximum, minimum, the comparisons) take a third, integer kernel, as the CPU's integer
 * path (src/backend/cpu/elementwise.c): exact int64 loads, arithmetic in unsigned long long, a
 * store that wraps modulo 2^bits (uint8 200 + 100 = 44, as in PyTorch). */
#include <math.h>

#include "backend/cuda/common.cuh"

/* ---- the formulas, generated from ops.def */

template <typename C>
static __device__ __forceinline__ C unary_fwd(const int op, const C x) {
  switch (op) {
#define CT_UNARY(E, name, fwd, deriv) \
  case CT_UNARY_##E:                  \
    return (C)(fwd);
#include "core/ops.def"
  }
  return C(0);
}

/* d op(x) / dx given y = op(x) */
template <typename C>
static __device__ __forceinline__ C unary_deriv(const int op, const C x, const C y) {
  switch (op) {
#define CT_UNARY(E, name, fwd, deriv) \
  case CT_UNARY_##E:                  \
    return (C)(deriv);
#include "core/ops.def"
  }
  return C(0);
}

/* op(a, b); a comparison gives 1 or 0 */
template <typename C>
static __device__ __forceinline__ C binary_fwd(const int op, const C a, const C b) {
  switch (op) {
#define CT_BINARY(E, name, fwd, da, db) \
  case CT_BINARY_##E:                   \
    return (C)(fwd);
#define CT_COMPARE(E, name, pred) \
  case CT_BINARY_##E:             \
    return (pred) ? C(1) : C(0);
#include "core/ops.def"
  }
  return C(0);
}

/* d op(a, b) / da (wrt 0) or / db (wrt 1), given y = op(a, b) */
template <typename C>
static __device__ __forceinline__ C binary_deriv(const int op, const int wrt, const C a, const C b, const C y) {
  switch (op) {
#define CT_BINARY(E, name, fwd, da, db) \
  case CT_BINARY_##E:                   \
    return wrt == 0 ? (C)(da) : (C)(db);
#include "core/ops.def"
  }
  return C(0);
}

/* ---- the integer path: int64 values, wrapping arithmetic in unsigned long long */

/* 1 when OP has an integer result on integer operands (the front-end gives the other unary ops a
 * float32 output; division is true division) */
static constexpr bool int_unary_op(int op) { return op == CT_UNARY_NEG || op == CT_UNARY_ABS || op == CT_UNARY_RELU; }
static constexpr bool int_binary_op(int op) { return op != CT_BINARY_DIV; }

template <int OP>
static __device__ __forceinline__ int64_t int_unary_fwd(int64_t x) {
  if (OP == CT_UNARY_NEG) return ct_wrap_i64(0ull - (unsigned long long)x);
  if (OP == CT_UNARY_ABS) return x < 0 ? ct_wrap_i64(0ull - (unsigned long long)x) : x;
  return x > 0 ? x : 0; /* relu */
}

/* a ** b as PyTorch's integer pow (powi): by squaring, wrapping; b < 0 gives 1, +-1 or 0 */
static __device__ __forceinline__ int64_t int_pow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? (((unsigned long long)b & 1ull) ? -1 : 1) : 0;
  unsigned long long r = 1, base = (unsigned long long)a, e = (unsigned long long)b;
  for (; e; e >>= 1, base *= base)
    if (e & 1ull) r *= base;
  return ct_wrap_i64(r);
}

template <int OP>
static __device__ __forceinline__ int64_t int_binary_fwd(int64_t a, int64_t b) {
  switch (OP) {
    case CT_BINARY_ADD: return ct_wrap_i64((unsigned long long)a + (unsigned long long)b);
    case CT_BINARY_SUB: return ct_wrap_i64((unsigned long long)a - (unsigned long long)b);
    case CT_BINARY_MUL: return ct_wrap_i64((unsigned long long)a * (unsigned long long)b);
    case CT_BINARY_POW: return int_pow(a, b);
    case CT_BINARY_MAXIMUM: return a >= b ? a : b;
    case CT_BINARY_MINIMUM: return a <= b ? a : b;
    case CT_BINARY_EQ: return a == b;
    case CT_BINARY_NE: return a != b;
    case CT_BINARY_LT: return a < b;
    case CT_BINARY_LE: return a <= b;
    case CT_BINARY_GT: return a > b;
    case CT_BINARY_GE: return a >= b;
    default: return 0;
  }
}

#define GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* ---- kernels */

/* out (n) = op(x (n)), one floating dtype S computed in C */
template <int OP, typename S, typename C>
__global__ void unary_contig_kernel(S *__restrict__ out, const S *__restrict__ x, int64_t n) {
  GRID_LOOP(i, n) out[i] = ct_cast<S>(unary_fwd<C>(OP, ct_cast<C>(x[i])));
}

/* out = op(x) over the iterator (operands: out, x) with runtime dtypes */
template <int OP, typename C>
__global__ void unary_strided_kernel(void *out, int odt, const void *x, int xdt, ct__cuda_iter it, int64_t n) {
  GRID_LOOP(i, n) {
    int64_t off[2];
    ct_iter_offsets<2>(it, i, off);
    ct_st<C>(out, off[0], odt, unary_fwd<C>(OP, ct_ld<C>(x, off[1], xdt)));
  }
}

/* out = op(x) on integer operands over the iterator: ct_ld<int64_t> is exact, ct_st<int64_t> wraps */
template <int OP>
__global__ void unary_int_kernel(void *out, int odt, const void *x, int xdt, ct__cuda_iter it, int64_t n) {
  GRID_LOOP(i, n) {
    int64_t off[2];
    ct_iter_offsets<2>(it, i, off);
    ct_st<int64_t>(out, off[0], odt, int_unary_fwd<OP>(ct_ld<int64_t>(x, off[1], xdt)));
  }
}

/* out (n) = g * op'(x, y), all (n); y may be NULL (then y = op(x) is recomputed) */
template <int OP, typename S, typename C>
__global__ void unary_bw_contig_kernel(S *__restrict__ out, const S *__restrict__ g, const S *__restrict__ x,
                                       const S *__restrict__ y, int64_t n) {
  GRID_LOOP(i, n) {
    C xv = ct_cast<C>(x[i]);
    C yv = y ? ct_cast<C>(y[i]) : unary_fwd<C>(OP, xv);
    out[i] = ct_cast<S>(ct_cast<C>(g[i]) * unary_deriv<C>(OP, xv, yv));
  }
}

/* the same over the iterator (operands: out, g, x, y) */
template <int OP, typename C>
__global__ void unary_bw_strided_kernel(void *out, int odt, const void *g, int gdt, const void *x, int xdt,
                                        const void *y, int ydt, ct__cuda_iter it, int64_t n) {
  GRID_LOOP(i, n) {
    int64_t off[4];
    ct_iter_offsets<4>(it, i, off);
    C xv = ct_ld<C>(x, off[2], xdt);
    C yv = y ? ct_ld<C>(y, off[3], ydt) : unary_fwd<C>(OP, xv);
    ct_st<C>(out, off[0], odt, ct_ld<C>(g, off[1], gdt) * unary_deriv<C>(OP, xv, yv));
  }
}

/* out (n) = op(a (n), b (n)) */
template <int OP, typename S, typename C>
__global__ void binary_contig_kernel(S *__restrict__ out, const S *__restrict__ a, const S *__restrict__ b,
                                     int64_t n) {
  GRID_LOOP(i, n) out[i] = ct_cast<S>(binary_fwd<C>(OP, ct_cast<C>(a[i]), ct_cast<C>(b[i])));
}

/* over the iterator (operands: out, a, b) */
template <int OP, typename C>
__global__ void binary_strided_kernel(void *out, int odt, const void *a, int adt, const void *b, int bdt,
                                      ct__cuda_iter it, int64_t n) {
  GRID_LOOP(i, n) {
    int64_t off[3];
    ct_iter_offsets<3>(it, i, off);
    ct_st<C>(out, off[0], odt, binary_fwd<C>(OP, ct_ld<C>(a, off[1], adt), ct_ld<C>(b, off[2], bdt)));
  }
}

/* out = op(a, b) on integer operands over the iterator */
template <int OP>
__global__ void binary_int_kernel(void *out, int odt, const void *a, int adt, const void *b, int bdt, ct__cuda_iter it,
                                  int64_t n) {
  GRID_LOOP(i, n) {
    int64_t off[3];
    ct_iter_offsets<3>(it, i, off);
    ct_st<int64_t>(out, off[0], odt, int_binary_fwd<OP>(ct_ld<int64_t>(a, off[1], adt), ct_ld<int64_t>(b, off[2], bdt)));
  }
}

/* out (n) = g * d op / d(a or b), all (n) */
template <int OP, typename S, typename C>
__global__ void binary_bw_contig_kernel(S *__restrict__ out, const S *__restrict__ g, const S *__restrict__ a,
                                        const S *__restrict__ b, int wrt, int64_t n) {
  GRID_LOOP(i, n) {
    C av = ct_cast<C>(a[i]), bv = ct_cast<C>(b[i]);
    C y = binary_fwd<C>(OP, av, bv);
    out[i] = ct_cast<S>(ct_cast<C>(g[i]) * binary_deriv<C>(OP, wrt, av, bv, y));
  }
}

/* over the iterator (operands: out, g, a, b) */
template <int OP, typename C>
__global__ void binary_bw_strided_kernel(void *out, int odt, const void *g, int gdt, const void *a, int adt,
                                         const void *b, int bdt, int wrt, ct__cuda_iter it, int64_t n) {
  GRID_LOOP(i, n) {
    int64_t off[4];
    ct_iter_offsets<4>(it, i, off);
    C av = ct_ld<C>(a, off[2], adt), bv = ct_ld<C>(b, off[3], bdt);
    C y = binary_fwd<C>(OP, av, bv);
    ct_st<C>(out, off[0], odt, ct_ld<C>(g, off[1], gdt) * binary_deriv<C>(OP, wrt, av, bv, y));
  }
}

/* out = cond ? a : b copying elements bit for bit (a, b, out of one dtype; T of its size) */
template <typename T>
__global__ void where_bits_kernel(T *out, const void *cond, int cdt, const T *a, const T *b, ct__cuda_iter it,
                                  int64_t n) {
  GRID_LOOP(i, n) {
    int64_t off[4];
    ct_iter_offsets<4>(it, i, off);
    out[off[0]] = ct_ld<float>(cond, off[1], cdt) != 0.0f ? a[off[2]] : b[off[3]];
  }
}

/* out = cond ? a : b with conversions (operands: out, cond, a, b) */
template <typename C>
__global__ void where_kernel(void *out, int odt, const void *cond, int cdt, const void *a, int adt, const void *b,
                             int bdt, ct__cuda_iter it, int64_t n) {
  GRID_LOOP(i, n) {
    int64_t off[4];
    ct_iter_offsets<4>(it, i, off);
    C v = ct_ld<float>(cond, off[1], cdt) != 0.0f ? ct_ld<C>(a, off[2], adt) : ct_ld<C>(b, off[3], bdt);
    ct_st<C>(out, off[0], odt, v);
  }
}

/* ---- launchers */

static int is_float_dtype(ct_dtype dt) { return dt == CT_F32 || dt == CT_F64 || dt == CT_F16 || dt == CT_BF16; }

/* Operand k's strides, or NULL's zeros (an absent optional operand). */
static const int64_t zero_strides[CT_MAX_DIMS] = {0};
static void make_iter(ct__cuda_iter *it, ct_tensor *out, int nops, ct_tensor *const *ops) {
  const int64_t *strides[4];
  for (int k = 0; k < nops; k++) strides[k] = ops[k] ? ops[k]->stride : zero_strides;
  ct__cuda_iter_init(it, out->ndim, out->shape, nops, strides);
}
static const void *ptr_or_null(ct_tensor *t) { return t ? ct__ptr(t) : NULL; }

/* Float storage types keyed by dtype, with their compute type: f32, f16, bf16 -> float; f64 -> double. */
#define DISPATCH_FLOAT(dt, ...)                                                                  \
  switch (dt) {                                                                                  \
    case CT_F32: { typedef float S; typedef float C; __VA_ARGS__; break; }                       \
    case CT_F64: { typedef double S; typedef double C; __VA_ARGS__; break; }                     \
    case CT_F16: { typedef __half S; typedef float C; __VA_ARGS__; break; }                      \
    default: { typedef __nv_bfloat16 S; typedef float C; __VA_ARGS__; break; }                   \
  }

static int any_wants_double(int n, ct_tensor *const *ts) {
  for (int k = 0; k < n; k++)
    if (ts[k] && ct__cuda_wants_double(ts[k]->dtype)) return 1;
  return 0;
}
static int is_int_dtype(ct_dtype dt) { return dt == CT_I32 || dt == CT_I64 || dt == CT_U8 || dt == CT_BOOL; }
static int all_int(int n, ct_tensor *const *ts) {
  for (int k = 0; k < n; k++)
    if (ts[k] && !is_int_dtype(ts[k]->dtype)) return 0;
  return 1;
}
static int all_same_float(int n, ct_tensor *const *ts) {
  for (int k = 0; k < n; k++)
    if (ts[k] && (ts[k]->dtype != ts[0]->dtype || !is_float_dtype(ts[k]->dtype))) return 0;
  return 1;
}

template <int OP>
static ct_status launch_unary(ct__cuda_ctx *ctx, ct_tensor *out, ct_tensor *x, int64_t n) {
  ct_tensor *ops[2] = {out, x};
  ct__cuda_iter it;
  make_iter(&it, out, 2, ops);
  unsigned grid = ct__cuda_blocks(ctx, n);
  if (int_unary_op(OP) && all_int(2, ops)) {
    if constexpr (int_unary_op(OP)) /* instantiated only for the ops that have an integer result */
      unary_int_kernel<OP><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(ct__ptr(out), out->dtype, ct__ptr(x), x->dtype, it, n);
  } else if (all_same_float(2, ops) && ct__cuda_iter_is_contiguous(&it, 2)) {
    DISPATCH_FLOAT(out->dtype,
                   unary_contig_kernel<OP, S, C><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
                       (S *)ct__ptr(out), (const S *)ct__ptr(x), n));
  } else if (any_wants_double(2, ops)) {
    unary_strided_kernel<OP, double><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(ct__ptr(out), out->dtype, ct__ptr(x),
                                                                                 x->dtype, it, n);
  } else {
    unary_strided_kernel<OP, float><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(ct__ptr(out), out->dtype, ct__ptr(x),
                                                                                x->dtype, it, n);
  }
  CT_CUDA_LAUNCHED("unary_kernel");
  return CT_OK;
}

/* out, x: same shape */
ct_status ct__cuda_unary(ct_unary_op op, ct_tensor *out, ct_tensor *x) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(out);
  if (!ctx) return ct_last_status();
  int64_t n = ct__numel(out->ndim, out->shape);
  if (n == 0) return CT_OK;
  switch (op) {
#define CT_UNARY(E, name, fwd, deriv) \
  case CT_UNARY_##E:                  \
    return launch_unary<CT_UNARY_##E>(ctx, out, x, n);
#include "core/ops.def"
    default: break;
  }
  return ct__error(CT_EINVAL, "cuda: unary op %d is not a unary op", (int)op);
}

template <int OP>
static ct_status launch_unary_bw(ct__cuda_ctx *ctx, ct_tensor *out, ct_tensor *g, ct_tensor *x, ct_tensor *y,
                                 int64_t n) {
  ct_tensor *ops[4] = {out, g, x, y};
  ct__cuda_iter it;
  make_iter(&it, out, 4, ops);
  unsigned grid = ct__cuda_blocks(ctx, n);
  if (all_same_float(4, ops) && ct__cuda_iter_is_contiguous(&it, y ? 4 : 3)) {
    DISPATCH_FLOAT(out->dtype, unary_bw_contig_kernel<OP, S, C><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
                                   (S *)ct__ptr(out), (const S *)ct__ptr(g), (const S *)ct__ptr(x),
                                   (const S *)ptr_or_null(y), n));
  } else if (any_wants_double(4, ops)) {
    unary_bw_strided_kernel<OP, double><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
        ct__ptr(out), out->dtype, ct__ptr(g), g->dtype, ct__ptr(x), x->dtype, ptr_or_null(y), y ? y->dtype : 0, it, n);
  } else {
    unary_bw_strided_kernel<OP, float><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
        ct__ptr(out), out->dtype, ct__ptr(g), g->dtype, ct__ptr(x), x->dtype, ptr_or_null(y), y ? y->dtype : 0, it, n);
  }
  CT_CUDA_LAUNCHED("unary_backward_kernel");
  return CT_OK;
}

/* out, g, x, y: same shape; y = op(x) may be NULL (recomputed) */
ct_status ct__cuda_unary_backward(ct_unary_op op, ct_tensor *out, ct_tensor *g, ct_tensor *x, ct_tensor *y) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(out);
  if (!ctx) return ct_last_status();
  int64_t n = ct__numel(out->ndim, out->shape);
  if (n == 0) return CT_OK;
  switch (op) {
#define CT_UNARY(E, name, fwd, deriv) \
  case CT_UNARY_##E:                  \
    return launch_unary_bw<CT_UNARY_##E>(ctx, out, g, x, y, n);
#include "core/ops.def"
    default: break;
  }
  return ct__error(CT_EINVAL, "cuda: unary op %d is not a unary op", (int)op);
}

template <int OP>
static ct_status launch_binary(ct__cuda_ctx *ctx, ct_tensor *out, ct_tensor *a, ct_tensor *b, int64_t n,
                               int is_compare) {
  ct_tensor *ops[3] = {out, a, b};
  ct__cuda_iter it;
  make_iter(&it, out, 3, ops);
  unsigned grid = ct__cuda_blocks(ctx, n);
  if (int_binary_op(OP) && all_int(3, ops)) {
    if constexpr (int_binary_op(OP))
      binary_int_kernel<OP><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(ct__ptr(out), out->dtype, ct__ptr(a), a->dtype,
                                                                        ct__ptr(b), b->dtype, it, n);
  } else if (!is_compare && all_same_float(3, ops) && ct__cuda_iter_is_contiguous(&it, 3)) {
    DISPATCH_FLOAT(out->dtype, binary_contig_kernel<OP, S, C><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
                                   (S *)ct__ptr(out), (const S *)ct__ptr(a), (const S *)ct__ptr(b), n));
  } else if (any_wants_double(3, ops)) {
    binary_strided_kernel<OP, double><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
        ct__ptr(out), out->dtype, ct__ptr(a), a->dtype, ct__ptr(b), b->dtype, it, n);
  } else {
    binary_strided_kernel<OP, float><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
        ct__ptr(out), out->dtype, ct__ptr(a), a->dtype, ct__ptr(b), b->dtype, it, n);
  }
  CT_CUDA_LAUNCHED("binary_kernel");
  return CT_OK;
}

/* out, a, b: same shape (a and b expanded, possibly with stride-0 dims) */
ct_status ct__cuda_binary(ct_binary_op op, ct_tensor *out, ct_tensor *a, ct_tensor *b) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(out);
  if (!ctx) return ct_last_status();
  int64_t n = ct__numel(out->ndim, out->shape);
  if (n == 0) return CT_OK;
  switch (op) {
#define CT_BINARY(E, name, fwd, da, db) \
  case CT_BINARY_##E:                   \
    return launch_binary<CT_BINARY_##E>(ctx, out, a, b, n, 0);
#define CT_COMPARE(E, name, pred) \
  case CT_BINARY_##E:             \
    return launch_binary<CT_BINARY_##E>(ctx, out, a, b, n, 1);
#include "core/ops.def"
    default: break;
  }
  return ct__error(CT_EINVAL, "cuda: binary op %d is not a binary op", (int)op);
}

template <int OP>
static ct_status launch_binary_bw(ct__cuda_ctx *ctx, int wrt, ct_tensor *out, ct_tensor *g, ct_tensor *a,
                                  ct_tensor *b, int64_t n) {
  ct_tensor *ops[4] = {out, g, a, b};
  ct__cuda_iter it;
  make_iter(&it, out, 4, ops);
  unsigned grid = ct__cuda_blocks(ctx, n);
  if (all_same_float(4, ops) && ct__cuda_iter_is_contiguous(&it, 4)) {
    DISPATCH_FLOAT(out->dtype, binary_bw_contig_kernel<OP, S, C><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
                                   (S *)ct__ptr(out), (const S *)ct__ptr(g), (const S *)ct__ptr(a),
                                   (const S *)ct__ptr(b), wrt, n));
  } else if (any_wants_double(4, ops)) {
    binary_bw_strided_kernel<OP, double><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
        ct__ptr(out), out->dtype, ct__ptr(g), g->dtype, ct__ptr(a), a->dtype, ct__ptr(b), b->dtype, wrt, it, n);
  } else {
    binary_bw_strided_kernel<OP, float><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(
        ct__ptr(out), out->dtype, ct__ptr(g), g->dtype, ct__ptr(a), a->dtype, ct__ptr(b), b->dtype, wrt, it, n);
  }
  CT_CUDA_LAUNCHED("binary_backward_kernel");
  return CT_OK;
}

/* out, g, a, b: same shape; wrt 0 (d/da) or 1 (d/db) */
ct_status ct__cuda_binary_backward(ct_binary_op op, int wrt, ct_tensor *out, ct_tensor *g, ct_tensor *a,
                                   ct_tensor *b) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(out);
  if (!ctx) return ct_last_status();
  int64_t n = ct__numel(out->ndim, out->shape);
  if (n == 0) return CT_OK;
  switch (op) {
#define CT_BINARY(E, name, fwd, da, db) \
  case CT_BINARY_##E:                   \
    return launch_binary_bw<CT_BINARY_##E>(ctx, wrt, out, g, a, b, n);
#include "core/ops.def"
    default: break;
  }
  return ct__error(CT_EINVAL, "cuda: binary op %d has no gradient (comparisons are not differentiable)", (int)op);
}

/* out, cond, a, b: same shape (expanded) */
ct_status ct__cuda_where(ct_tensor *out, ct_tensor *cond, ct_tensor *a, ct_tensor *b) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(out);
  if (!ctx) return ct_last_status();
  int64_t n = ct__numel(out->ndim, out->shape);
  if (n == 0) return CT_OK;
  ct_tensor *ops[4] = {out, cond, a, b};
  ct__cuda_iter it;
  make_iter(&it, out, 4, ops);
  unsigned grid = ct__cuda_blocks(ctx, n);
  if (a->dtype == out->dtype && b->dtype == out->dtype) {
    switch (ct_dtype_size(out->dtype)) {
#define WHERE_BITS(T)                                                                                       \
  where_bits_kernel<T><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>((T *)ct__ptr(out), ct__ptr(cond), cond->dtype, \
                                                                   (const T *)ct__ptr(a), (const T *)ct__ptr(b), it, n)
      case 1: WHERE_BITS(uint8_t); break;
      case 2: WHERE_BITS(uint16_t); break;
      case 4: WHERE_BITS(uint32_t); break;
      default: WHERE_BITS(uint64_t); break;
#undef WHERE_BITS
    }
  } else if (is_int_dtype(out->dtype) && is_int_dtype(a->dtype) && is_int_dtype(b->dtype)) {
    /* integer -> integer conversions wrap, and int64 stays exact */
    where_kernel<int64_t><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(ct__ptr(out), out->dtype, ct__ptr(cond),
                                                                      cond->dtype, ct__ptr(a), a->dtype, ct__ptr(b),
                                                                      b->dtype, it, n);
  } else if (any_wants_double(4, ops)) {
    where_kernel<double><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(ct__ptr(out), out->dtype, ct__ptr(cond),
                                                                     cond->dtype, ct__ptr(a), a->dtype, ct__ptr(b),
                                                                     b->dtype, it, n);
  } else {
    where_kernel<float><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>(ct__ptr(out), out->dtype, ct__ptr(cond),
                                                                    cond->dtype, ct__ptr(a), a->dtype, ct__ptr(b),
                                                                    b->dtype, it, n);
  }
  CT_CUDA_LAUNCHED("where_kernel");
  return CT_OK;
}
