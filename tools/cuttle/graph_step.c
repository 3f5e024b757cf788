/* tools/cuttle/graph_step.c: `--cuda-graph` (graph_step.h). */
#include "graph_step.h"
#include <stdlib.h>
#include <string.h>

struct ct_cli_graph_step {
  ct_device dev;
  int warmup, rehearse;
  ct_tensor *x, *y;       /* the static batch, made at the first capture */
  ct_tensor *loss_sum;    /* float64 0-dim on dev */
  ct_device_graph *graph; /* NULL before the first capture (and while rehearsing) */
  double lr;              /* the learning rate the graph holds */
  int64_t eager, captures, replays;
};

ct_cli_graph_step *ct_cli_graph_step_new(ct_device dev, int warmup) {
  const char *e = getenv("CUTTLE_GRAPH_REHEARSAL");
  int rehearse = !ct_device_can_capture(dev) && e && strcmp(e, "1") == 0;
  if (!rehearse && !ct_device_can_capture(dev)) {
    /* ct_device_graph_capture_begin says why (no such device, a backend without graphs) */
    if (ct_device_graph_capture_begin(dev) == CT_OK) ct_device_graph_free(ct_device_graph_capture_end(dev));
    return NULL;
  }
  ct_cli_graph_step *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->dev = dev, g->warmup = warmup > 0 ? warmup : 3, g->rehearse = rehearse;
  g->loss_sum = ct_zeros(0, NULL, CT_F64, dev);
  if (!g->loss_sum) {
    free(g);
    return NULL;
  }
  return g;
}

void ct_cli_graph_step_free(ct_cli_graph_step *g) {
  if (!g) return;
  ct_device_graph_free(g->graph);
  ct_tensor_free(g->x), ct_tensor_free(g->y), ct_tensor_free(g->loss_sum);
  free(g);
}

ct_tensor *ct_cli_graph_step_loss_sum(ct_cli_graph_step *g) { return g->loss_sum; }

static int same_shape(const ct_tensor *a, const ct_tensor *b) {
  if (ct_tensor_ndim(a) != ct_tensor_ndim(b) || ct_tensor_dtype(a) != ct_tensor_dtype(b)) return 0;
  for (int d = 0; d < ct_tensor_ndim(a); d++)
    if (ct_tensor_size(a, d) != ct_tensor_size(b, d)) return 0;
  return 1;
}

/* A contiguous tensor of t's shape and dtype on t's device: a static input (made with no scope
 * open: ct_cli_graph_step_run runs outside the loop's scopes). */
static ct_tensor *static_like(ct_tensor *t) {
  int64_t shape[8];
  int n = ct_tensor_ndim(t);
  for (int d = 0; d < n && d < 8; d++) shape[d] = ct_tensor_size(t, d);
  return n <= 8 ? ct_empty(n, shape, ct_tensor_dtype(t), ct_tensor_device(t)) : NULL;
}

/* Rehearsing: step on the static batch, eagerly, under sync-debug's error mode, which fails every
 * synchronization as a capture would. */
static ct_status rehearse(ct_cli_graph_step *g, ct_cli_step_fn step, void *ctx) {
  int mode = ct_get_sync_debug_mode();
  ct_set_sync_debug_mode(CT_SYNC_DEBUG_ERROR);
  ct_status s = step(g->x, g->y, ctx);
  ct_set_sync_debug_mode(mode);
  return s;
}

/* Capture step on the static batch (the capture runs nothing), then replay it once. */
static ct_status capture(ct_cli_graph_step *g, ct_cli_step_fn step, void *ctx) {
  ct_device_graph_free(g->graph);
  g->graph = NULL;
  ct_status s = ct_device_graph_capture_begin(g->dev);
  if (s != CT_OK) return s;
  s = step(g->x, g->y, ctx);
  if (s != CT_OK) /* the step's own message, before capture_end sets the capture's */
    fprintf(stderr, "\ncuttle: --cuda-graph: the training step failed inside the capture: %s\n", ct_last_error());
  g->graph = ct_device_graph_capture_end(g->dev); /* always ends the capture */
  if (s != CT_OK) {
    ct_device_graph_free(g->graph), g->graph = NULL;
    return s;
  }
  if (!g->graph) return ct_last_status();
  return ct_device_graph_replay(g->graph); /* the capture ran nothing: this trains the batch */
}

ct_status ct_cli_graph_step_run(ct_cli_graph_step *g, ct_tensor *x, ct_tensor *y, double lr, ct_cli_step_fn step,
                                void *ctx) {
  if (g->x && ct_tensor_ndim(x) > 0 && ct_tensor_size(x, 0) > ct_tensor_size(g->x, 0)) {
    /* a larger batch than the static one (which an epoch's short last batch became, right after the
     * warm-up): it becomes the static shape, captured anew */
    ct_device_graph_free(g->graph), g->graph = NULL;
    ct_tensor_free(g->x), ct_tensor_free(g->y), g->x = g->y = NULL;
  }
  int fits = g->x ? same_shape(g->x, x) && same_shape(g->y, y) : 1;
  if (g->eager < g->warmup || !fits) {
    g->eager++;
    return step(x, y, ctx);
  }
  if (!g->x) {
    g->x = static_like(x);
    g->y = g->x ? static_like(y) : NULL;
    if (!g->y) return ct_last_status();
  }
  ct_status s = ct_copy_(g->x, x); /* device to device, queued before the replay */
  if (s == CT_OK) s = ct_copy_(g->y, y);
  if (s != CT_OK) return s;
  /* a (re)capture for the first static step and for a new learning rate, which the graph holds */
  int fresh = g->captures == 0 || g->lr != lr || (!g->rehearse && !g->graph);
  if (fresh) g->captures++, g->lr = lr;
  s = g->rehearse ? rehearse(g, step, ctx) : fresh ? capture(g, step, ctx) : ct_device_graph_replay(g->graph);
  if (s == CT_OK) g->replays++;
  return s;
}

void ct_cli_graph_step_report(const ct_cli_graph_step *g, FILE *f) {
  char name[32];
  ct_device_str(g->dev, name, sizeof name);
  fprintf(f, "cuda graph on %s: %lld eager steps, captured %lld time(s), %lld replays%s\n", name, (long long)g->eager,
          (long long)g->captures, (long long)g->replays,
          g->rehearse ? " (rehearsed: the static step ran eagerly under sync-debug's error mode, no capture)" : "");
}
