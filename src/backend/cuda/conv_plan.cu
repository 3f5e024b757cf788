/* src/backend/cuda/conv_plan.cu: convolutions through cuDNN's graph API (the backend descriptors
 * of cudnn_graph.h), with one execution plan per problem, built on its first call and kept.
 *
 * Why: on an H100 (2026-11-27, docs/perf-history.md "GPU: NVIDIA H100") cuDNN 9's legacy entry points
 * (cudnnConvolutionForward and the two backward ones) took about 100 us of host time a call for
 * the cnn's small convolutions, more than their kernels, and the cnn's step is bound by the host.
 * A kept plan leaves a call one variant pack and cudnnBackendExecute, as cuDNN's own guide to
 * framework integration asks ("build and plan once per shape; cache by shape") and as PyTorch does
 * (aten/src/ATen/native/cudnn/Conv_v8.cpp).
 *
 * Every failure here is an answer "no plan", never an error: conv.cu then runs the legacy path,
 * which has run on two GPUs. The plans and the cache live until exit, as the handles. */
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cuda/conv_plan.h"

namespace {

/* A backend descriptor that destroys itself. */
struct bdesc {
  cudnnBackendDescriptor_t d = NULL;
  bdesc() = default;
  bdesc(const bdesc &) = delete;
  bdesc &operator=(const bdesc &) = delete;
  bdesc(bdesc &&o) noexcept : d(o.d) { o.d = NULL; }
  ~bdesc() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
  cudnnStatus_t create(cudnnBackendDescriptorType_t t) { return cudnnBackendCreateDescriptor(t, &d); }
};

#define G_TRY(call)                                  \
  do {                                               \
    cudnnStatus_t g__e = (call);                     \
    if (g__e != CUDNN_STATUS_SUCCESS) return g__e;   \
  } while (0)

static cudnnStatus_t set(bdesc &b, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t n,
                         const void *v) {
  return cudnnBackendSetAttribute(b.d, name, type, n, v);
}

enum { UID_X = 1, UID_W = 2, UID_Y = 3 };

struct plan_entry {
  cudnnBackendDescriptor_t plan; /* NULL: no plan for this problem (the legacy path runs it) */
  cudnnBackendDescriptor_t config; /* the engine config the plan was made from, kept as long (as
                                      cudnn-frontend's ExecutionPlan keeps its engine config) */
  size_t workspace;
};

}  // namespace

struct ct__cuda_conv_plans {
  std::mutex lock;
  std::unordered_map<ct__cuda_conv_key, plan_entry, ct__cuda_conv_key_hash> map;
};

/* CUTTLE_CUDNN_GRAPH: unset or 1, the graph path; 0, the legacy API only; log, the graph path,
 * and one line on stderr per problem saying whether it got a plan (the GPU kit counts them). */
static int graph_mode() {
  static const int mode = [] {
    const char *e = getenv("CUTTLE_CUDNN_GRAPH");
    return e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "log") == 0 ? 2 : 1;
  }();
  return mode;
}

/* A 4-D tensor (n, c, h, w) dense in NCHW or in channels_last (NHWC) order. */
static cudnnStatus_t make_tensor(bdesc &t, int64_t uid, cudnnDataType_t dt, const int64_t d[4], bool nhwc, int64_t align) {
  int64_t st[4];
  if (nhwc) st[0] = d[2] * d[3] * d[1], st[1] = 1, st[2] = d[3] * d[1], st[3] = d[1];
  else st[0] = d[1] * d[2] * d[3], st[1] = d[2] * d[3], st[2] = d[3], st[3] = 1;
  G_TRY(t.create(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  G_TRY(set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
  G_TRY(set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, d));
  G_TRY(set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, st));
  G_TRY(set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  G_TRY(set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
  return cudnnBackendFinalize(t.d);
}

/* The operation graph of p: one convolution node over the tensors x, w and y. */
static cudnnStatus_t make_graph(bdesc &graph, cudnnHandle_t h, const ct__cuda_conv_problem *p, int64_t align) {
  cudnnDataType_t data, compute;
  if (!ct__cudnn_types(p->dtype, &data, &compute)) return CUDNN_STATUS_NOT_SUPPORTED;
  bdesc x, w, y, conv, op;
  G_TRY(make_tensor(x, UID_X, data, p->x, p->nhwc, align));
  G_TRY(make_tensor(w, UID_W, data, p->w, p->nhwc, align));
  G_TRY(make_tensor(y, UID_Y, data, p->y, p->nhwc, align));

  int64_t dims = 2;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  G_TRY(conv.create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  G_TRY(set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute));
  G_TRY(set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  G_TRY(set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims));
  G_TRY(set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, p->dilation));
  G_TRY(set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, p->stride));
  G_TRY(set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, p->pad));
  G_TRY(set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, p->pad));
  G_TRY(cudnnBackendFinalize(conv.d));

  /* the node's attributes per direction: {x, w, y, conv, alpha, beta} */
  static const cudnnBackendDescriptorType_t kinds[3] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                                        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                                        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
  static const cudnnBackendAttributeName_t names[3][6] = {
      {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
  const cudnnBackendAttributeName_t *n = names[p->dir];
  G_TRY(op.create(kinds[p->dir]));
  G_TRY(set(op, n[0], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.d));
  G_TRY(set(op, n[1], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w.d));
  G_TRY(set(op, n[2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.d));
  G_TRY(set(op, n[3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv.d));
  double one_d = 1.0, zero_d = 0.0;
  float one_f = 1.0f, zero_f = 0.0f;
  bool dbl = compute == CUDNN_DATA_DOUBLE;
  G_TRY(set(op, n[4], dbl ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT, 1, dbl ? (const void *)&one_d : (const void *)&one_f));
  G_TRY(set(op, n[5], dbl ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT, 1, dbl ? (const void *)&zero_d : (const void *)&zero_f));
  G_TRY(cudnnBackendFinalize(op.d));

  G_TRY(graph.create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  G_TRY(set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op.d));
  /* the handle is deprecated here in cuDNN 9.19 (optional since 9.8): a cuDNN that refuses it
   * still builds the graph */
  (void)set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  return cudnnBackendFinalize(graph.d);
}

/* 1 when the engine config is passed over: its engine converts its inputs to a narrower type
 * (never, as the legacy path never allows conversion), or, for float32 without TF32 (fma_only),
 * uses tensor cores (the legacy path's CUDNN_FMA_MATH). As PyTorch's filterEngineConfigs
 * (aten/src/ATen/native/cudnn/Conv_v8.cpp). An engine whose notes cannot be read is passed over. */
static bool passed_over(cudnnBackendDescriptor_t cfg, bool fma_only) {
  bdesc engine;
  int64_t n = 0;
  if (engine.create(CUDNN_BACKEND_ENGINE_DESCRIPTOR) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine.d) !=
          CUDNN_STATUS_SUCCESS)
    return true;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  if (cudnnBackendGetAttribute(engine.d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) != CUDNN_STATUS_SUCCESS)
    return true;
  for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
    if (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS || (fma_only && notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE))
      return true;
  return false;
}

/* One call of plan with the three pointers (by the uids) and the workspace. */
static cudnnStatus_t execute(cudnnHandle_t h, cudnnBackendDescriptor_t plan, const void *x, const void *w,
                             const void *y, void *ws) {
  static const int64_t uids[3] = {UID_X, UID_W, UID_Y};
  void *ptrs[3] = {(void *)x, (void *)w, (void *)y};
  bdesc pack;
  G_TRY(pack.create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
  G_TRY(set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs));
  G_TRY(set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids));
  G_TRY(set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws));
  G_TRY(cudnnBackendFinalize(pack.d));
  cudnnStatus_t e = cudnnBackendExecute(h, plan, pack.d);
  if (e != CUDNN_STATUS_SUCCESS) (void)cudaGetLastError(); /* no launch error of its own left for the next kernel's check */
  return e;
}

/* Build the plan for p and run it once with (x, w, y): the heuristics' engine configs in order,
 * mode A, then the fallback list. The entry's plan stays NULL when none ran; *transient is set
 * when a candidate was passed over only for want of workspace (then no answer is kept: memory may
 * be free on a later call). */
static plan_entry build_and_run(ct__cuda_ctx *ctx, cudnnHandle_t h, const ct__cuda_conv_problem *p, int64_t align,
                                const void *x, const void *w, const void *y, bool *transient) {
  plan_entry none = {NULL, NULL, 0};
  *transient = false;
  bdesc graph;
  if (make_graph(graph, h, p, align) != CUDNN_STATUS_SUCCESS) return none;
  const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
  for (cudnnBackendHeurMode_t mode : modes) {
    bdesc heur;
    int64_t count = 0;
    if (heur.create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR) != CUDNN_STATUS_SUCCESS ||
        set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph.d) != CUDNN_STATUS_SUCCESS ||
        set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendFinalize(heur.d) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL) !=
            CUDNN_STATUS_SUCCESS ||
        count <= 0)
      continue;
    std::vector<bdesc> cfgs((size_t)count);
    std::vector<cudnnBackendDescriptor_t> raw((size_t)count);
    bool made = true;
    for (int64_t i = 0; i < count && made; i++) {
      made = cfgs[(size_t)i].create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR) == CUDNN_STATUS_SUCCESS;
      raw[(size_t)i] = cfgs[(size_t)i].d;
    }
    int64_t got = 0;
    if (!made || cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                          raw.data()) != CUDNN_STATUS_SUCCESS)
      continue;
    for (int64_t i = 0; i < got && i < count; i++) {
      if (passed_over(raw[(size_t)i], p->fma_only)) continue;
      bdesc plan;
      if (plan.create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) != CUDNN_STATUS_SUCCESS) continue;
      (void)set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h); /* deprecated, as the graph's */
      if (set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[(size_t)i]) !=
              CUDNN_STATUS_SUCCESS ||
          cudnnBackendFinalize(plan.d) != CUDNN_STATUS_SUCCESS)
        continue;
      int64_t bytes = 0, n = 0;
      if (cudnnBackendGetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &bytes) !=
              CUDNN_STATUS_SUCCESS ||
          bytes < 0)
        continue;
      void *ws = NULL;
      if (ct__cuda_workspace(ctx, (size_t)bytes, &ws) != CT_OK) {
        ct_clear_error();
        *transient = true;
        continue;
      }
      if (execute(h, plan.d, x, w, y, ws) != CUDNN_STATUS_SUCCESS) continue;
      plan_entry e = {plan.d, cfgs[(size_t)i].d, (size_t)bytes};
      plan.d = NULL, cfgs[(size_t)i].d = NULL; /* kept by the cache */
      *transient = false;
      return e;
    }
  }
  return none;
}

int ct__cuda_conv_graph(ct__cuda_ctx *ctx, const ct__cuda_conv_problem *p, const void *x, const void *w, const void *y) {
  int mode = graph_mode();
  if (!mode || p->dir < 0 || p->dir > 2) return 0;
  cudnnHandle_t h = ct__cuda_cudnn(ctx);
  if (!h) {
    ct_clear_error(); /* the legacy path asks again and reports it */
    return 0;
  }
  ct__cuda_conv_plans *cache;
  {
    std::lock_guard<std::mutex> g(ctx->lock);
    if (!ctx->conv_plans) ctx->conv_plans = new (std::nothrow) ct__cuda_conv_plans();
    cache = ctx->conv_plans;
  }
  if (!cache) return 0;
  /* the largest power of two up to 16 that divides all three addresses: a plan made for 16-byte
   * aligned data may use vector loads that smaller alignment does not allow */
  uintptr_t bits = (uintptr_t)x | (uintptr_t)w | (uintptr_t)y;
  int64_t align = bits ? (int64_t)(bits & (~bits + 1)) : 16;
  if (align > 16) align = 16;
  /* dir, dtype, nhwc, fma_only, the alignment, x's and w's shapes, padding, stride, dilation (y's
   * shape follows from them) */
  ct__cuda_conv_key key = {{p->dir, p->dtype, p->nhwc, p->fma_only, align, p->x[0], p->x[1], p->x[2], p->x[3], p->w[0],
                            p->w[1], p->w[2], p->w[3], p->pad[0], p->pad[1], p->stride[0], p->stride[1], p->dilation[0],
                            p->dilation[1]}};
  /* The lock keeps the map whole and builds a problem's plan once. Like the legacy path, the graph
   * path shares the device's cuDNN handle and workspace, so a device's convolutions come from one
   * thread at a time (cuttle's data parallelism runs one thread per device). */
  std::lock_guard<std::mutex> g(cache->lock);
  auto it = cache->map.find(key);
  if (it == cache->map.end()) {
    bool transient;
    plan_entry e = build_and_run(ctx, h, p, align, x, w, y, &transient);
    if (!transient) cache->map[key] = e;
    if (mode == 2) {
      static const char *dirs[3] = {"forward", "backward data", "backward filter"};
      fprintf(stderr, "cuttle: cuDNN graph %s for conv2d %s %s x (%lld, %lld, %lld, %lld) w (%lld, %lld, %lld, %lld)%s\n",
              e.plan ? "plan" : "no plan", dirs[p->dir], ct_dtype_name(p->dtype), (long long)p->x[0], (long long)p->x[1],
              (long long)p->x[2], (long long)p->x[3], (long long)p->w[0], (long long)p->w[1], (long long)p->w[2],
              (long long)p->w[3], transient ? " (workspace short: asked again next call)" : "");
    }
    return e.plan ? 1 : 0;
  }
  if (!it->second.plan) return 0;
  void *ws = NULL;
  if (ct__cuda_workspace(ctx, it->second.workspace, &ws) != CT_OK) {
    ct_clear_error(); /* the legacy path picks a candidate that fits */
    return 0;
  }
  if (execute(h, it->second.plan, x, w, y, ws) == CUDNN_STATUS_SUCCESS) return 1;
  /* a kept plan that fails: the problem goes to the legacy path from now on (the plan stays
   * allocated until exit, as every plan) */
  it->second.plan = NULL;
  return 0;
}
