/* src/backend/cuda/index.cu: index_select, gather and their backward kernels index_add and
 * scatter_add (accumulating with atomicAdd).
 *
 * All four walk one index space W with three stride vectors: the walked tensor, the index tensor,
 * and the target tensor whose coordinate at `dim` is replaced by the index value:
 *   index_select  W = out's shape;   out[w] = x[w with w_dim := index[w_dim]]   (index 1-D)
 *   gather        W = index's shape; out[w] = x[w with w_dim := index[w]]
 *   index_add     W = gy's shape;    gx[w with w_dim := index[w_dim]] += gy[w]
 *   scatter_add   W = index's shape; gx[w with w_dim := index[w]] += gy[w]
 * A 1-D index of index_select/index_add becomes a stride vector that is zero except at dim.
 * index: int32 or int64. The core validates index values when it can; an index outside
 * [0, size of dim) is never dereferenced here: select/gather write 0 and the adds skip it.
 * Atomic adds exist for float32, float64, float16 (sm_70+), bfloat16 (sm_80+), int32 and int64. */
#include "backend/cuda/common.cuh"

typedef struct {
  int ndim, dim;
  int64_t size[CT_MAX_DIMS];
  int64_t walk[CT_MAX_DIMS], idx[CT_MAX_DIMS], tgt[CT_MAX_DIMS];
  int64_t bound; /* size of the target's dim */
} index_geom;

/* offsets of w in the walked tensor, the index, and the target without its dim term */
static __device__ __forceinline__ void geom_offsets(const index_geom &g, int64_t i, int64_t &ow, int64_t &oi,
                                                    int64_t &ot) {
  ow = oi = ot = 0;
  for (int d = g.ndim - 1; d >= 0; d--) {
    int64_t s = g.size[d], q = i / s, c = i - q * s;
    i = q;
    ow += c * g.walk[d];
    oi += c * g.idx[d];
    if (d != g.dim) ot += c * g.tgt[d];
  }
}

static __device__ __forceinline__ int64_t load_index(const void *index, int is64, int64_t o) {
  return is64 ? ((const int64_t *)index)[o] : (int64_t)((const int32_t *)index)[o];
}

/* ---- kernels */

/* out[walk] = x[target] (T: an unsigned type of the element size) */
template <typename T>
__global__ void index_copy_kernel(T *out, const T *x, const void *index, int is64, index_geom g, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t ow, oi, ot;
    geom_offsets(g, i, ow, oi, ot);
    int64_t k = load_index(index, is64, oi);
    out[ow] = (k >= 0 && k < g.bound) ? x[ot + k * g.tgt[g.dim]] : T(0);
  }
}

static __device__ __forceinline__ void atomic_add(float *p, float v) { atomicAdd(p, v); }
static __device__ __forceinline__ void atomic_add(double *p, double v) { atomicAdd(p, v); }
static __device__ __forceinline__ void atomic_add(__half *p, __half v) { atomicAdd(p, v); }
static __device__ __forceinline__ void atomic_add(__nv_bfloat16 *p, __nv_bfloat16 v) { atomicAdd(p, v); }
static __device__ __forceinline__ void atomic_add(int32_t *p, int32_t v) { atomicAdd((int *)p, (int)v); }
static __device__ __forceinline__ void atomic_add(int64_t *p, int64_t v) {
  atomicAdd((unsigned long long *)p, (unsigned long long)v); /* two's complement: the same bits */
}

/* target[...] += src[walk] */
template <typename T>
__global__ void index_add_kernel(T *gx, const T *gy, const void *index, int is64, index_geom g, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t ow, oi, ot;
    geom_offsets(g, i, ow, oi, ot);
    int64_t k = load_index(index, is64, oi);
    if (k >= 0 && k < g.bound) atomic_add(&gx[ot + k * g.tgt[g.dim]], gy[ow]);
  }
}

/* ---- launchers */

/* W = walk's shape; index 1-D (along dim) when one_d, else of W's shape */
static ct_status make_geom(index_geom *g, ct_tensor *walk, ct_tensor *index, ct_tensor *target, int dim, int one_d,
                           const char *op) {
  if (index->dtype != CT_I64 && index->dtype != CT_I32)
    return ct__error(CT_EDTYPE, "cuda: %s wants an int32 or int64 index, not %s", op, ct_dtype_name(index->dtype));
  if (dim < 0 || dim >= walk->ndim || walk->ndim != target->ndim)
    return ct__error(CT_ESHAPE, "cuda: %s: dim %d does not fit tensors of %d and %d dims", op, dim, walk->ndim, target->ndim);
  memset(g, 0, sizeof *g);
  g->ndim = walk->ndim;
  g->dim = dim;
  g->bound = target->shape[dim];
  for (int d = 0; d < walk->ndim; d++) {
    g->size[d] = walk->shape[d];
    g->walk[d] = walk->stride[d];
    g->tgt[d] = target->stride[d];
    g->idx[d] = one_d ? (d == dim ? index->stride[0] : 0) : index->stride[d];
  }
  return CT_OK;
}

static ct_status launch_copy(ct_tensor *out, ct_tensor *x, ct_tensor *index, const index_geom *g) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(out);
  if (!ctx) return ct_last_status();
  int64_t n = ct__numel(out->ndim, out->shape);
  if (n == 0) return CT_OK;
  unsigned grid = ct__cuda_blocks(ctx, n);
  int is64 = index->dtype == CT_I64;
  switch (ct_dtype_size(out->dtype)) {
#define COPY(T)                                                                                          \
  index_copy_kernel<T><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>((T *)ct__ptr(out), (const T *)ct__ptr(x), \
                                                                   ct__ptr(index), is64, *g, n)
    case 1: COPY(uint8_t); break;
    case 2: COPY(uint16_t); break;
    case 4: COPY(uint32_t); break;
    default: COPY(uint64_t); break;
#undef COPY
  }
  CT_CUDA_LAUNCHED("index_copy_kernel");
  return CT_OK;
}

static ct_status launch_add(ct_tensor *gx, ct_tensor *gy, ct_tensor *index, const index_geom *g, const char *op) {
  ct__cuda_ctx *ctx = ct__cuda_ctx_of(gx);
  if (!ctx) return ct_last_status();
  int64_t n = 1;
  for (int d = 0; d < g->ndim; d++) n *= g->size[d];
  if (n == 0) return CT_OK;
  unsigned grid = ct__cuda_blocks(ctx, n);
  int is64 = index->dtype == CT_I64;
  switch (gx->dtype) {
#define ADD(T)                                                                                          \
  index_add_kernel<T><<<grid, CT_CUDA_THREADS, 0, ctx->compute>>>((T *)ct__ptr(gx), (const T *)ct__ptr(gy), \
                                                                  ct__ptr(index), is64, *g, n)
    case CT_F32: ADD(float); break;
    case CT_F64: ADD(double); break;
    case CT_F16: ADD(__half); break;
    case CT_BF16: ADD(__nv_bfloat16); break;
    case CT_I32: ADD(int32_t); break;
    case CT_I64: ADD(int64_t); break;
    default:
      return ct__error(CT_EDTYPE, "cuda: %s cannot accumulate %s (no atomic add)", op, ct_dtype_name(gx->dtype));
#undef ADD
  }
  CT_CUDA_LAUNCHED("index_add_kernel");
  return CT_OK;
}

/* out: x's shape with out[dim] = len(index); index: (L) */
ct_status ct__cuda_index_select(ct_tensor *out, ct_tensor *x, int dim, ct_tensor *index) {
  index_geom g;
  CT_TRY(make_geom(&g, out, index, x, dim, 1, "index_select"));
  return launch_copy(out, x, index, &g);
}

/* gx: x's shape (zeroed by the caller); gy: out's shape; index: (L) */
ct_status ct__cuda_index_add(ct_tensor *gx, int dim, ct_tensor *index, ct_tensor *gy) {
  if (gy->dtype != gx->dtype) return ct__error(CT_EDTYPE, "cuda: index_add wants gx and gy of one dtype");
  index_geom g;
  CT_TRY(make_geom(&g, gy, index, gx, dim, 1, "index_add"));
  return launch_add(gx, gy, index, &g, "index_add");
}

/* out: index's shape; x: same ndim; index: int64 of out's shape */
ct_status ct__cuda_gather(ct_tensor *out, ct_tensor *x, int dim, ct_tensor *index) {
  index_geom g;
  CT_TRY(make_geom(&g, out, index, x, dim, 0, "gather"));
  return launch_copy(out, x, index, &g);
}

/* gx: x's shape (zeroed by the caller); gy, index: out's shape */
ct_status ct__cuda_scatter_add(ct_tensor *gx, int dim, ct_tensor *index, ct_tensor *gy) {
  if (gy->dtype != gx->dtype) return ct__error(CT_EDTYPE, "cuda: scatter_add wants gx and gy of one dtype");
  index_geom g;
  /* walk index's shape (gy may be larger, as in torch: only index's extent is read) */
  CT_TRY(make_geom(&g, index, index, gx, dim, 0, "scatter_add"));
  for (int d = 0; d < g.ndim; d++) g.walk[d] = gy->stride[d];
  return launch_add(gx, gy, index, &g, "scatter_add");
}
