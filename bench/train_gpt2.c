/* bench/train_gpt2.c: `cuttle bench train --model gpt2`: tokens/s of GPT-2 training steps, cuttle
 * beside PyTorch eager (--pytorch: bench/pytorch_gpt2_train.py, one JSON line) on the same device,
 * threads, configuration, batches and optimizer. The defaults are nanoGPT's CPU recipe (a byte
 * model: vocab 256, 4 layers, 4 heads, 128 wide, 64 positions, dropout 0, batch 12, AdamW lr 1e-3
 * weight decay 0.1, gradients clipped to norm 1.0).
 * One step: logits (B, T, V) = ct_module_forward(ct_gpt2_new's model, ids (B, T)), the mean
 * ct_cross_entropy of logits (B T, V) against the next tokens, gradients dropped (set to none),
 * backward, ct_clip_grad_norm_(m, 1.0, 2), ct_optimizer_step. --warmup-steps untimed steps first,
 * then --steps timed ones; the clock is read (after synchronizing a GPU) before the first timed
 * step and after the last: tokens/s = B T steps / seconds. The loss is read back (ct_item) at the
 * first step (the first warmup step: the untrained model's, about ln V) and at the last only.
 * The batches are the same on both sides: row b of step s (s counting the warmup steps too) is
 * T + 1 tokens, ids[t] = (b 131 + t 17 + s 7) % V for t = 0..T, the inputs its first T and the
 * targets its last T; or, with --text FILE, the file's bytes from ((s B + b) T) % (n - T).
 * cuttle's AdamW (include/cuttle/optim.h) decays every parameter (biases, LayerNorms and the
 * embeddings too; nanoGPT decays the matrices only); the peer's torch.optim.AdamW is given the same
 * set (all parameters), so both do the same work; a line under the table says so. */
#define _GNU_SOURCE
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cblas.h>
#include "bench.h"

#ifndef CUTTLE_SOURCE_DIR
#define CUTTLE_SOURCE_DIR "."
#endif

typedef struct {
  int64_t n_layer, n_head, n_embd, n_positions, batch, vocab;
  int steps, warmup, threads;
  double lr, weight_decay;
  const char *text;
} gpt2_opts;

/* The tokens of step s: inputs (B, T) and targets (B T), as the peer makes them. */
static void make_batch(const gpt2_opts *o, int step, const unsigned char *text, int64_t ntext, int64_t *in, int64_t *tgt) {
  int64_t B = o->batch, T = o->n_positions;
  for (int64_t b = 0; b < B; b++) {
    int64_t start = text ? (((int64_t)step * B + b) * T) % (ntext - T) : 0;
    for (int64_t t = 0; t <= T; t++) {
      int64_t id = text ? (int64_t)text[start + t] : (b * 131 + t * 17 + (int64_t)step * 7) % o->vocab;
      if (t < T) in[b * T + t] = id;
      if (t > 0) tgt[b * T + t - 1] = id;
    }
  }
}

/* One training step; *loss gets the loss when it is not NULL (a read back). 0, or 1 with the error set. */
static int train_step(ct_module *m, ct_optimizer *opt, const gpt2_opts *o, ct_device dev, const int64_t *in,
                      const int64_t *tgt, double *loss_out) {
  int64_t B = o->batch, T = o->n_positions, shape[2] = {B, T}, flat[2] = {B * T, o->vocab}, n = B * T;
  if (ct_scope_begin() != CT_OK) return 1;
  ct_tensor *ids = ct_from_host(in, 2, shape, CT_I64, dev);
  ct_tensor *target = ids ? ct_from_host(tgt, 1, &n, CT_I64, dev) : NULL;
  ct_tensor *logits = target ? ct_module_forward(m, ids) : NULL;
  ct_tensor *l2 = logits ? ct_reshape(logits, 2, flat) : NULL;
  ct_tensor *loss = l2 ? ct_cross_entropy(l2, target, CT_REDUCTION_MEAN, 0) : NULL;
  int bad = !loss;
  if (!bad) {
    ct_optimizer_zero_grad(opt);
    bad = ct_backward(loss) != CT_OK || !ct_clip_grad_norm_(m, 1.0, 2) || ct_optimizer_step(opt) != CT_OK;
  }
  if (!bad && loss_out) {
    *loss_out = ct_item(loss);
    bad = isnan(*loss_out) && ct_last_status() != CT_OK;
  }
  ct_scope_end();
  return bad;
}

typedef struct {
  double tokens_per_s, ms_per_step, first_loss, last_loss;
  int64_t params;
} gpt2_result;

static int run_cuttle(const gpt2_opts *o, ct_device dev, const unsigned char *text, int64_t ntext, gpt2_result *r) {
  ct_gpt2_config c;
  ct_gpt2_config_default(&c);
  c.vocab_size = o->vocab, c.n_positions = o->n_positions, c.n_embd = o->n_embd, c.n_layer = o->n_layer;
  c.n_head = o->n_head, c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = 0;
  ct_generator gen = ct_generator_new(0);
  ct_module *m = ct_gpt2_new(&c, dev, &gen);
  ct_optim_opts oo = {.kind = CT_OPTIM_ADAMW, .lr = o->lr, .weight_decay = o->weight_decay};
  ct_optimizer *opt = m ? ct_optimizer_new(m, &oo) : NULL;
  size_t n = (size_t)(o->batch * o->n_positions);
  int64_t *in = malloc(n * sizeof *in), *tgt = malloc(n * sizeof *tgt);
  int status = !opt || !in || !tgt;
  if (!status) {
    ct_module_train(m, 1);
    r->params = ct_module_num_params(m);
  }
  int total = o->warmup + o->steps;
  double t0 = 0;
  for (int s = 0; s < total && !status; s++) {
    if (s == o->warmup) {
      if (ct_synchronize(dev) != CT_OK) status = 1;
      t0 = ct_bench_now();
    }
    make_batch(o, s, text, ntext, in, tgt);
    double *want = s == 0 ? &r->first_loss : s == total - 1 ? &r->last_loss : NULL;
    status = status || train_step(m, opt, o, dev, in, tgt, want);
  }
  if (!status && ct_synchronize(dev) != CT_OK) status = 1;
  double secs = ct_bench_now() - t0;
  if (status) {
    fprintf(stderr, "cuttle bench train: gpt2: %s\n", ct_last_error());
  } else {
    r->tokens_per_s = (double)(o->batch * o->n_positions) * o->steps / secs;
    r->ms_per_step = 1e3 * secs / o->steps;
  }
  free(in), free(tgt);
  ct_optimizer_free(opt);
  ct_module_free(m);
  return status;
}

static int usage(FILE *f) {
  fprintf(f,
          "usage: cuttle bench train --model gpt2 [--device cpu|cuda:N|opencl:N|auto] [--n-layer N] [--n-head N]\n"
          "                          [--n-embd N] [--n-positions T] [--batch-size B] [--lr X] [--weight-decay X]\n"
          "                          [--steps N] [--warmup-steps N] [--threads N] [--text FILE] [--quick] [--csv FILE]\n"
          "                          [--pytorch] [--python PATH] [--script FILE]\n"
          "tokens/s of GPT-2 training steps (forward, cross-entropy on the next bytes, backward, gradients clipped\n"
          "to norm 1.0, AdamW) of a byte model (vocab 256), float32, dropout 0; --pytorch: the same in PyTorch eager\n"
          "defaults (nanoGPT's CPU recipe): --device cpu --n-layer 4 --n-head 4 --n-embd 128 --n-positions 64\n"
          "          --batch-size 12 --lr 1e-3 --weight-decay 0.1 --steps 20 --warmup-steps 3 --threads <online cores>\n"
          "          (--quick: --n-layer 2 --n-head 2 --n-embd 32 --n-positions 16 --batch-size 4 --steps 3\n"
          "          --warmup-steps 1) --python python3 --script %s/bench/pytorch_gpt2_train.py\n"
          "batches: token t of row b at step s is (131 b + 17 t + 7 s) %% 256, or the bytes of --text FILE\n",
          CUTTLE_SOURCE_DIR);
  return f == stdout ? 0 : 2;
}

/* The bytes of path (at least need of them), or NULL after saying why. */
static unsigned char *read_text(const char *path, int64_t need, int64_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cuttle bench train: cannot read --text %s\n", path);
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  unsigned char *buf = malloc(cap);
  size_t k;
  while (buf && (k = fread(buf + len, 1, cap - len, f)) > 0) {
    len += k;
    if (len == cap) {
      unsigned char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (buf && (int64_t)len < need) {
    fprintf(stderr, "cuttle bench train: --text %s holds %zu bytes; --n-positions %lld needs at least %lld\n", path, len,
            (long long)(need - 1), (long long)need);
    free(buf);
    return NULL;
  }
  *n = (int64_t)len;
  return buf;
}

int ct_bench_train_gpt2(int argc, char **argv) {
  ct_bench_common common = {.device = "cpu"};
  gpt2_opts o = {.vocab = 256, .lr = 1e-3, .weight_decay = 0.1, .steps = -1, .warmup = -1};
  const char *model = "gpt2";
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  o.threads = online > 0 ? (int)online : 1;
  ct_bench_pytorch py = {.python = "python3", .script = CUTTLE_SOURCE_DIR "/bench/pytorch_gpt2_train.py"};
  const ct_bench_opt opts[] = {{.name = "model", .dst = &model},
                               {.name = "n-layer", .kind = CT_BENCH_I64, .dst = &o.n_layer},
                               {.name = "n-head", .kind = CT_BENCH_I64, .dst = &o.n_head},
                               {.name = "n-embd", .kind = CT_BENCH_I64, .dst = &o.n_embd},
                               {.name = "n-positions", .kind = CT_BENCH_I64, .dst = &o.n_positions},
                               {.name = "batch-size", .kind = CT_BENCH_I64, .dst = &o.batch},
                               {.name = "lr", .kind = CT_BENCH_DOUBLE, .dst = &o.lr},
                               {.name = "weight-decay", .kind = CT_BENCH_DOUBLE, .dst = &o.weight_decay},
                               {.name = "steps", .kind = CT_BENCH_INT, .dst = &o.steps},
                               {.name = "warmup-steps", .kind = CT_BENCH_INT, .dst = &o.warmup},
                               {.name = "threads", .kind = CT_BENCH_INT, .dst = &o.threads},
                               {.name = "text", .dst = &o.text},
                               CT_BENCH_PYTORCH_OPTS(py),
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_COMMON, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  /* the defaults of what was not given: nanoGPT's CPU recipe, or a tiny one with --quick */
  int q = common.quick;
  if (!o.n_layer) o.n_layer = q ? 2 : 4;
  if (!o.n_head) o.n_head = q ? 2 : 4;
  if (!o.n_embd) o.n_embd = q ? 32 : 128;
  if (!o.n_positions) o.n_positions = q ? 16 : 64;
  if (!o.batch) o.batch = q ? 4 : 12;
  if (o.steps < 0) o.steps = q ? 3 : 20;
  if (o.warmup < 0) o.warmup = q ? 1 : 3;
  if (strcmp(model, "gpt2") != 0 || o.n_layer < 1 || o.n_head < 1 || o.n_embd < 1 || o.n_embd % o.n_head ||
      o.n_positions < 1 || o.batch < 1 || o.n_layer > 4096 || o.n_embd > 65536 || o.n_positions > 65536 ||
      o.batch > 65536 || o.steps < 1 || o.warmup < 0 || o.threads < 1 || !(o.lr > 0) || !(o.weight_decay >= 0)) {
    fprintf(stderr, "cuttle bench train: --model gpt2 wants --n-layer, --n-head, --n-embd, --n-positions, --batch-size "
                    ">= 1 (--n-embd divisible by --n-head), --steps >= 1, --warmup-steps >= 0, --threads >= 1, --lr > 0, "
                    "--weight-decay >= 0\n");
    return 2;
  }
  ct_device dev;
  if (ct_bench_device(common.device, &dev)) return 2;
  int64_t ntext = 0;
  unsigned char *text = o.text ? read_text(o.text, o.n_positions + 1, &ntext) : NULL;
  if (o.text && !text) return 1;
  /* cuttle's OpenMP pool (which OpenBLAS's OpenMP build shares) gets the threads PyTorch gets */
  omp_set_num_threads(o.threads);
  openblas_set_num_threads(o.threads);
  char devname[32];
  ct_device_str(dev, devname, sizeof devname);
  fprintf(stderr, "cuttle: gpt2 training on %s\n", devname);
  gpt2_result cu = {0};
  int status = run_cuttle(&o, dev, text, ntext, &cu);

  static ct_bench_peer peer;
  if (py.on && !status) {
    char env[48], args[2048];
    snprintf(env, sizeof env, "OMP_NUM_THREADS=%d", o.threads);
    snprintf(args, sizeof args,
             "--device %s --n-layer %lld --n-head %lld --n-embd %lld --n-positions %lld --vocab-size %lld "
             "--batch-size %lld --lr %.17g --weight-decay %.17g --steps %d --warmup-steps %d --threads %d%s%s%s",
             devname, (long long)o.n_layer, (long long)o.n_head, (long long)o.n_embd, (long long)o.n_positions,
             (long long)o.vocab, (long long)o.batch, o.lr, o.weight_decay, o.steps, o.warmup, o.threads,
             o.text ? " --text '" : "", o.text ? o.text : "", o.text ? "'" : "");
    if (ct_bench_peer_run("cuttle bench train", env, &py, args, "peer", &peer) == CT_BENCH_PEER_FAILED) status = 1;
  } else if (py.on) {
    peer = (ct_bench_peer){.status = CT_BENCH_PEER_FAILED};
    snprintf(peer.why, sizeof peer.why, "not run: cuttle's side failed");
  }

  char title[512];
  snprintf(title, sizeof title,
           "train gpt2: %lld layers, %lld heads, %lld wide, T = %lld, vocab %lld, batch %lld, AdamW lr %g wd %g, "
           "clip 1.0, %d timed steps after %d warmup, float32, on %s, %d threads%s",
           (long long)o.n_layer, (long long)o.n_head, (long long)o.n_embd, (long long)o.n_positions, (long long)o.vocab,
           (long long)o.batch, o.lr, o.weight_decay, o.steps, o.warmup, devname, o.threads,
           o.text ? ", bytes of --text" : "");
  const char *heads[] = {"model", "cuttle tokens/s", "cuttle ms/step", "cuttle first loss", "cuttle last loss",
                         "PyTorch tokens/s", "PyTorch ms/step", "PyTorch first loss", "PyTorch last loss",
                         "cuttle / PyTorch (tokens/s)"};
  ct_bench_table *t = ct_bench_table_new(title, py.on ? 10 : 5, heads);
  if (!t) {
    free(text);
    return 1;
  }
  char cfg[64];
  snprintf(cfg, sizeof cfg, "gpt2 L%lld H%lld E%lld T%lld", (long long)o.n_layer, (long long)o.n_head, (long long)o.n_embd,
           (long long)o.n_positions);
  char c[4][48] = {"failed", "failed", "failed", "failed"};
  if (!status || cu.tokens_per_s > 0) {
    snprintf(c[0], sizeof c[0], "%.0f", cu.tokens_per_s), snprintf(c[1], sizeof c[1], "%.2f", cu.ms_per_step);
    snprintf(c[2], sizeof c[2], "%.4f", cu.first_loss), snprintf(c[3], sizeof c[3], "%.4f", cu.last_loss);
  }
  if (py.on) {
    char p[5][64], cell[64];
    if (ct_bench_peer_cell(&peer, cell, sizeof cell)) {
      for (int k = 0; k < 4; k++) snprintf(p[k], sizeof p[k], "%s", cell);
      snprintf(p[4], sizeof p[4], "-");
    } else {
      double tps = ct_bench_json_number(peer.line, "tokens_per_s");
      snprintf(p[0], sizeof p[0], "%.0f", tps);
      snprintf(p[1], sizeof p[1], "%.2f", ct_bench_json_number(peer.line, "ms_per_step"));
      snprintf(p[2], sizeof p[2], "%.4f", ct_bench_json_number(peer.line, "first_loss"));
      snprintf(p[3], sizeof p[3], "%.4f", ct_bench_json_number(peer.line, "last_loss"));
      if (tps > 0 && cu.tokens_per_s > 0) snprintf(p[4], sizeof p[4], "%.2f", cu.tokens_per_s / tps);
      else snprintf(p[4], sizeof p[4], "-");
    }
    ct_bench_table_rowf(t, "%s|%s|%s|%s|%s|%s|%s|%s|%s|%s", cfg, c[0], c[1], c[2], c[3], p[0], p[1], p[2], p[3], p[4]);
  } else {
    ct_bench_table_rowf(t, "%s|%s|%s|%s|%s", cfg, c[0], c[1], c[2], c[3]);
  }
  ct_bench_table_print(t, stdout);
  printf("tokens/s: batch x positions x timed steps / their seconds; first loss: the first (warmup) step's, last: the "
         "last step's\n");
  printf("cuttle's AdamW decays every parameter (%lld elements: biases, LayerNorms and embeddings too; nanoGPT decays the "
         "matrices only); PyTorch's AdamW is given all parameters too, the same work\n",
         (long long)cu.params);
  if (py.on) {
    ct_bench_peer_note(&peer, stdout);
    char kern[160];
    if (peer.status == CT_BENCH_PEER_OK) {
      double pp = ct_bench_json_number(peer.line, "params");
      if (ct_bench_json_string(peer.line, "kernel", kern, sizeof kern)) printf("PyTorch's attention: %s\n", kern);
      if (!isnan(pp) && (int64_t)pp != cu.params)
        printf("note: PyTorch's model has %.0f parameter elements, cuttle's %lld\n", pp, (long long)cu.params);
    }
  }
  fflush(stdout);
  if (ct_bench_table_csv(t, common.csv)) status = 1;
  ct_bench_table_free(t);
  free(text);
  return status;
}
