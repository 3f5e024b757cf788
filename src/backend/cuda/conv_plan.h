/* src/backend/cuda/conv_plan.h: a convolution through cuDNN's graph API with an execution plan
 * built once per problem (conv_plan.cu), the path conv.cu tries before cuDNN's legacy calls. */
#ifndef CUTTLE_BACKEND_CUDA_CONV_PLAN_H
#define CUTTLE_BACKEND_CUDA_CONV_PLAN_H

#include <array>

#include "backend/cuda/common.cuh"

/* A dtype's cuDNN data type and the compute type of its convolutions (float for float16 and
 * bfloat16, as PyTorch asks of cuDNN); 0 for a dtype cuDNN's convolutions do not take. */
static inline int ct__cudnn_types(ct_dtype dt, cudnnDataType_t *data, cudnnDataType_t *compute) {
  switch (dt) {
    case CT_F32: *data = CUDNN_DATA_FLOAT, *compute = CUDNN_DATA_FLOAT; return 1;
    case CT_F64: *data = CUDNN_DATA_DOUBLE, *compute = CUDNN_DATA_DOUBLE; return 1;
    case CT_F16: *data = CUDNN_DATA_HALF, *compute = CUDNN_DATA_FLOAT; return 1;
    case CT_BF16: *data = CUDNN_DATA_BFLOAT16, *compute = CUDNN_DATA_FLOAT; return 1;
    default: return 0;
  }
}

/* The key of a convolution problem in the caches of both cuDNN paths (conv.cu's algorithm cache,
 * conv_plan.cu's plans): 19 words, each path choosing which, hashed FNV-1a over the words. A fixed
 * array: no allocation per lookup. */
typedef std::array<int64_t, 19> ct__cuda_conv_key;
struct ct__cuda_conv_key_hash {
  size_t operator()(const ct__cuda_conv_key &k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : k) h = (h ^ (uint64_t)v) * 1099511628211ull;
    return (size_t)h;
  }
};

/* One direction of one convolution. The shapes are the logical (N, C, H, W) ones (w: (Cout,
 * Cin / groups, kH, kW); cuDNN's graph API reads the groups from x's and w's C); the data are
 * dense NCHW, or dense channels_last when nhwc. */
typedef struct {
  int dir;       /* 0: y = conv(x, w); 1: x = the gradient of the input from y and w; 2: w = the
                    gradient of the filter from x and y (the gradient of y as y) */
  ct_dtype dtype; /* float32, float64, float16 or bfloat16 */
  bool nhwc;
  bool fma_only;  /* float32 without TF32: no engine that uses tensor cores or converts inputs down */
  int64_t x[4], w[4], y[4];
  int64_t pad[2], stride[2], dilation[2];
} ct__cuda_conv_problem;

/* Runs problem p on ctx's compute stream with the device pointers x, w and y (the roles of dir),
 * through a plan made on its first call (cuDNN's heuristics, mode A then the fallback engines, in
 * their order; the first engine config whose plan builds, whose workspace the allocator gives and
 * whose execution succeeds is kept for the problem and for the pointers' alignment). Returns 1
 * when it ran; 0 when the graph API has no plan for it, has been turned off
 * (CUTTLE_CUDNN_GRAPH=0), or its kept plan failed (the problem then stays on the legacy path): the
 * caller runs cuDNN's legacy API, and no error is left set. CUTTLE_CUDNN_GRAPH=log prints one line
 * per problem on stderr: whether it got a plan. Engines that convert inputs down are never used,
 * nor, for float32 without TF32, tensor-core ones (the legacy path's rules). Semantics as PyTorch's
 * aten/src/ATen/native/cudnn/Conv_v8.cpp: heuristics, engine filtering by numerical notes, a
 * plan cache keyed by the problem. */
int ct__cuda_conv_graph(ct__cuda_ctx *ctx, const ct__cuda_conv_problem *p, const void *x, const void *w, const void *y);

#endif
