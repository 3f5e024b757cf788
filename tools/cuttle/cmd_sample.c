/* tools/cuttle/cmd_sample.c: `cuttle sample --checkpoint DIR --prompt TEXT`: a GPT-2 directory
 * (ct_gpt2_from_pretrained: what `cuttle train --model gpt2 --save DIR` or save_pretrained wrote)
 * continues a prompt, written to stdout as it goes: the prompt, then each new token. Decoding runs
 * with the KV cache (ct_gpt2_forward_cached: the prompt once, then one position per token), as
 * nanoGPT's sample.py and transformers' generate do: the last position's logits divided by
 * --temperature, cut to the --top-k largest, and drawn by ct_multinomial from a generator seeded
 * with --seed; --greedy takes the argmax instead (generate(do_sample=False)). Tokens are GPT-2's BPE
 * (cuttle/tokenizer.h) when the directory holds vocab.json and merges.txt, as the hub's GPT-2 does,
 * else the text's bytes (a byte model, vocab_size 256). When the window of n_positions fills, the cache restarts
 * on its last half (the sliding window of nanoGPT's crop, without a forward per token). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "commands.h"
#include "options.h"

typedef struct {
  const char *checkpoint, *prompt, *device;
  int64_t max_new_tokens, top_k;
  double temperature;
  uint64_t seed;
  int greedy;
} sample_cfg;

enum { CT_OPT_SAMPLE = 1 << 10 };

#define O(field) offsetof(sample_cfg, field)
static const ct_cli_opt sample_options[] = {
    {"checkpoint", CT_OPT_STR, O(checkpoint), "DIR", 0, 0, CT_OPT_SAMPLE,
     "the GPT-2 to sample: a directory with config.json and model.safetensors (Hugging Face's layout), or that safetensors "
     "file",
     NULL},
    {"prompt", CT_OPT_STR, O(prompt), "TEXT", 0, 0, CT_OPT_SAMPLE, "the text to continue (at least one token; default: a newline)",
     NULL},
    {"max-new-tokens", CT_OPT_I64, O(max_new_tokens), "N", 1, 1e9, CT_OPT_SAMPLE, "how many tokens to add", NULL},
    {"temperature", CT_OPT_F64, O(temperature), "T", 0, 1e6, CT_OPT_SAMPLE | CT_OPT_GT,
     "divide the logits by T before drawing: below 1 sharper, above 1 flatter", NULL},
    {"top-k", CT_OPT_I64, O(top_k), "K", 0, 1e9, CT_OPT_SAMPLE, "draw among the K most likely tokens only (0: all)", NULL},
    {"seed", CT_OPT_U64, O(seed), "N", 0, 0, CT_OPT_SAMPLE, "the draws' generator seed: the same seed, the same text", NULL},
    {"greedy", CT_OPT_FLAG, O(greedy), NULL, 0, 0, CT_OPT_SAMPLE,
     "take the most likely token each time (no draw; --temperature, --top-k and --seed do not matter)", NULL},
    {"device", CT_OPT_STR, O(device), "DEV", 0, 0, CT_OPT_SAMPLE, "cpu, cuda:N, opencl:N or auto (the best present)", NULL},
};
#undef O
static const int n_sample_options = (int)(sizeof sample_options / sizeof sample_options[0]);

static sample_cfg defaults(void) {
  return (sample_cfg){.device = "cpu", .max_new_tokens = 200, .top_k = 200, .temperature = 0.8, .seed = 1337};
}

static void usage(FILE *f) {
  sample_cfg d = defaults();
  fprintf(f, "usage: cuttle sample --checkpoint DIR [--prompt TEXT] [options]\n\n"
             "Continue a prompt with a GPT-2 (cuttle train --model gpt2, or a Hugging Face save_pretrained directory).\n\n"
             "options:\n");
  ct_cli_print_options(f, sample_options, n_sample_options, CT_OPT_SAMPLE, &d, 0);
}

/* The next token after logits (1, t, V): the last position's, greedy or drawn. */
static int64_t next_token(ct_tensor *logits, const sample_cfg *c, ct_generator *gen, ct_status *s) {
  int64_t t = ct_tensor_shape(logits)[1], V = ct_tensor_shape(logits)[2], id = -1;
  ct_scope_begin();
  ct_tensor *last = ct_narrow(logits, 1, t - 1, 1), *row = last ? ct_reshape(last, 1, &V) : NULL;
  ct_tensor *rf = row ? ct_cast(row, CT_F32) : NULL;
  if (rf && c->greedy) {
    ct_tensor *a = ct_argmax(rf, 0, 0);
    if (a) id = (int64_t)ct_item(a);
  } else if (rf) {
    ct_tensor *scaled = ct_mul_scalar(rf, 1.0 / c->temperature), *keep = NULL;
    if (scaled && c->top_k > 0 && c->top_k < V) {
      /* logits below the k-th largest get -inf, as nanoGPT's sample does */
      ct_tensor *vals = ct_topk(scaled, c->top_k, 0, 1, NULL);
      ct_tensor *kth = vals ? ct_narrow(vals, 0, c->top_k - 1, 1) : NULL;
      ct_tensor *below = kth ? ct_lt(scaled, kth) : NULL, *ninf = ct_scalar(-INFINITY, CT_F32, ct_tensor_device(rf));
      keep = below && ninf ? ct_where(below, ninf, scaled) : NULL;
    } else {
      keep = scaled;
    }
    ct_tensor *p = keep ? ct_softmax(keep, 0) : NULL, *d = p ? ct_multinomial(p, 1, 1, gen) : NULL;
    if (d) id = (int64_t)ct_item(d);
  }
  *s = id < 0 ? ct_last_status() : CT_OK;
  ct_scope_end();
  return id;
}

int ct_cmd_sample(int argc, char **argv) {
  const char *prog = "cuttle sample";
  sample_cfg c = defaults();
  int r = ct_cli_parse(prog, sample_options, n_sample_options, CT_OPT_SAMPLE, argc, argv, &c, NULL);
  if (r == 0) usage(stdout); /* --help */
  if (r >= 0) return r;
  if (!c.checkpoint) {
    fprintf(stderr, "%s: --checkpoint DIR is required (a GPT-2 directory: cuttle train --model gpt2 --save DIR)\n", prog);
    return 2;
  }
  if (!c.prompt) c.prompt = "\n";
  size_t plen = strlen(c.prompt);
  if (plen == 0) {
    fprintf(stderr, "%s: --prompt is empty; give at least one character to continue\n", prog);
    return 2;
  }
  ct_device dev;
  if (ct_cli_device(prog, c.device, &dev) != CT_OK) {
    if (ct_last_status() != CT_EDEVICE) fprintf(stderr, "%s: --device: %s\n", prog, ct_last_error());
    return 2;
  }
  struct stat sb;
  if (stat(c.checkpoint, &sb) != 0) {
    fprintf(stderr, "%s: --checkpoint %s does not exist\n", prog, c.checkpoint);
    return 2;
  }
  ct_module *m = NULL;
  if (ct_gpt2_from_pretrained(c.checkpoint, dev, &m) != CT_OK) {
    fprintf(stderr, "%s: %s\n", prog, ct_last_error());
    return 1;
  }
  const ct_gpt2_config *cfg = ct_gpt2_config_of(m);
  /* GPT-2's BPE when the directory holds vocab.json and merges.txt (the hub's layout), else bytes */
  ct_bpe *bpe = NULL;
  char vocab[4200], merges[4200], dir[4096];
  snprintf(dir, sizeof dir, "%s", c.checkpoint);
  if (!S_ISDIR(sb.st_mode)) {
    char *slash = strrchr(dir, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - c.checkpoint) : 1, slash ? c.checkpoint : ".");
  }
  snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
  snprintf(merges, sizeof merges, "%s/merges.txt", dir);
  struct stat vb, mb;
  if (stat(vocab, &vb) == 0 && stat(merges, &mb) == 0) {
    bpe = ct_bpe_load(vocab, merges);
    if (!bpe || ct_bpe_vocab_size(bpe) > cfg->vocab_size) {
      fprintf(stderr, "%s: %s\n", prog,
              bpe ? "the tokenizer's vocabulary is larger than the model's vocab_size" : ct_last_error());
      ct_bpe_free(bpe), ct_module_free(m);
      return 1;
    }
  } else if (cfg->vocab_size != 256) {
    fprintf(stderr, "%s: %s has a vocabulary of %lld tokens but no vocab.json and merges.txt beside it; without a "
            "tokenizer cuttle samples byte models (vocab_size 256)\n", prog, c.checkpoint, (long long)cfg->vocab_size);
    ct_module_free(m);
    return 1;
  }
  int64_t *prompt_ids = NULL, nprompt = (int64_t)plen;
  if (bpe && ct_bpe_encode(bpe, c.prompt, plen, &prompt_ids, &nprompt) != CT_OK) {
    fprintf(stderr, "%s: --prompt: %s\n", prog, ct_last_error());
    ct_bpe_free(bpe), ct_module_free(m);
    return 1;
  }
  int64_t P = cfg->n_positions, total = nprompt + c.max_new_tokens;
  int64_t *ids = malloc(sizeof(int64_t) * (size_t)(total > 0 ? total : 1));
  ct_gpt2_cache *kc = ids && nprompt > 0 ? ct_gpt2_cache_new(m, 1) : NULL;
  int status = kc ? 0 : 1;
  if (!kc) fprintf(stderr, "%s: %s\n", prog, nprompt == 0 ? "--prompt makes no token" : ids ? ct_last_error() : "out of memory");
  for (int64_t i = 0; i < nprompt && kc; i++) ids[i] = bpe ? prompt_ids[i] : (unsigned char)c.prompt[i];
  free(prompt_ids);
  ct_generator gen = ct_generator_new(c.seed);
  fwrite(c.prompt, 1, plen, stdout);
  fflush(stdout);
  int64_t n = nprompt, fed = 0; /* ids[0 .. n) known; ids[fed0 .. fed) in the cache */
  int64_t start = n > P ? n - P : 0;  /* a prompt past the window: its last n_positions tokens */
  fed = start;
  for (int64_t step = 0; step < c.max_new_tokens && !status; step++) {
    if (ct_gpt2_cache_length(kc) + (n - fed) > P) { /* the window is full: restart on its last half */
      ct_gpt2_cache_free(kc);
      kc = ct_gpt2_cache_new(m, 1);
      fed = n - P / 2;
      if (!kc) break;
    }
    ct_scope_begin();
    ct_tensor *x = ct_from_host(ids + fed, 2, (int64_t[]){1, n - fed}, CT_I64, CT_DEVICE_CPU);
    ct_tensor *xd = x ? ct_to(x, dev, 0) : NULL;
    ct_tensor *logits = xd ? ct_gpt2_forward_cached(m, xd, kc) : NULL;
    ct_status s = logits ? CT_OK : ct_last_status();
    int64_t id = logits ? next_token(logits, &c, &gen, &s) : -1;
    ct_scope_end();
    if (s != CT_OK || id < 0) {
      fprintf(stderr, "\n%s: %s\n", prog, ct_last_error());
      status = 1;
      break;
    }
    fed = n;
    ids[n++] = id;
    if (bpe) { /* a token's bytes (a character may span tokens: the bytes join up on stdout) */
      size_t nb = 0;
      char *text = ct_bpe_decode(bpe, &id, 1, &nb);
      if (text) fwrite(text, 1, nb, stdout);
      free(text);
    } else {
      unsigned char byte = (unsigned char)id;
      fwrite(&byte, 1, 1, stdout);
    }
    fflush(stdout);
  }
  if (!status) putchar('\n');
  ct_gpt2_cache_free(kc);
  free(ids);
  ct_bpe_free(bpe);
  ct_module_free(m);
  return status;
}
