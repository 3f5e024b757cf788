/* tests/cli/test_cli_sample.c: `cuttle sample` on a byte GPT-2 (vocab 256) that the test builds
 * and saves with ct_gpt2_save_pretrained, driven as a user drives the binary:
 *  - --greedy continues the prompt with exactly the bytes of a greedy loop over ct_module_forward
 *    (no cache), so the KV cache's decoding is the uncached forward's, past the window too (the
 *    cache restarting on its last half gives what the full forward over those tokens gives);
 *  - a seed gives the same text twice, another seed another text;
 *  - with vocab.json and merges.txt beside it, the prompt and the tokens go through GPT-2's BPE;
 *  - usage errors exit 2 naming the option; a missing checkpoint says so. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"

static char cuttle[4096], dir[4200];
static char *tmp;
static ct_module *model;

static int setup(void **state) {
  (void)state;
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", getenv("CUTTLE_BINARY_DIR") ? getenv("CUTTLE_BINARY_DIR") : ".");
  tmp = ct_test_tmpdir();
  snprintf(dir, sizeof dir, "%s/byte-gpt2", tmp);
  ct_gpt2_config c;
  ct_gpt2_config_default(&c);
  c.vocab_size = 256, c.n_positions = 16, c.n_embd = 32, c.n_layer = 2, c.n_head = 4;
  c.initializer_range = 0.3; /* logits far from uniform: a continuation that varies */
  ct_generator g = ct_generator_new(4);
  model = ct_gpt2_new(&c, CT_DEVICE_CPU, &g);
  if (!model || ct_gpt2_save_pretrained(model, dir) != CT_OK) return -1;
  ct_module_train(model, 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ct_module_free(model);
  ct_test_rmdir(tmp);
  return 0;
}

/* prompt + n greedy bytes, each from the forward (no cache) over the tokens the sampler's window
 * holds: the last 16 of a longer prompt; when a 17th would be needed, the last 8 (the cache's
 * restart on its last half) */
static void greedy_reference(const char *prompt, int n, char *out) {
  int64_t ids[256];
  size_t L = strlen(prompt);
  for (size_t i = 0; i < L; i++) ids[i] = (unsigned char)prompt[i];
  int64_t len = (int64_t)L, start = len > 16 ? len - 16 : 0;
  for (int s = 0; s < n; s++) {
    if (len - start > 16) start = len - 8;
    ct_scope_begin();
    ct_tensor *x = ct_assert_nonnull(ct_from_host(ids + start, 2, (int64_t[]){1, len - start}, CT_I64, CT_DEVICE_CPU));
    ct_tensor *lg = ct_assert_nonnull(ct_module_forward(model, x));
    ct_tensor *last = ct_assert_nonnull(ct_narrow(lg, 1, len - start - 1, 1));
    ids[len] = (int64_t)ct_item(ct_assert_nonnull(ct_argmax(last, 2, 0)));
    ct_scope_end();
    len++;
  }
  for (int64_t i = 0; i < len; i++) out[i] = (char)ids[i];
  out[len] = 0;
}

static void greedy_equals_the_uncached_forward(void **state) {
  (void)state;
  char out[4096], want[512];
  /* 30 new bytes after a 5-byte prompt: the 16-position window fills and restarts twice */
  assert_int_equal(ct_test_run(out, sizeof out, "%s sample --checkpoint %s --prompt 'Hello' --max-new-tokens 30 --greedy", cuttle,
                               dir), 0);
  greedy_reference("Hello", 30, want);
  /* stdout then the newline; the bytes may be anything, so compare them raw */
  assert_memory_equal(out, want, 35);
  assert_int_equal(out[35], '\n');
}

static void seeds(void **state) {
  (void)state;
  char a[4096], b[4096], c[4096];
  assert_int_equal(ct_test_run(a, sizeof a, "%s sample --checkpoint %s --prompt 'ab' --max-new-tokens 12 --seed 7", cuttle, dir), 0);
  assert_int_equal(ct_test_run(b, sizeof b, "%s sample --checkpoint %s/model.safetensors --prompt 'ab' --max-new-tokens 12 --seed 7",
                               cuttle, dir), 0);
  assert_int_equal(ct_test_run(c, sizeof c, "%s sample --checkpoint %s --prompt 'ab' --max-new-tokens 12 --seed 8 --top-k 0 "
                               "--temperature 2", cuttle, dir), 0);
  assert_memory_equal(a, b, 15);
  assert_true(memcmp(a, c, 14) != 0);
  assert_true(a[0] == 'a' && a[1] == 'b');
}

/* GPT-2's byte-to-unicode table (transformers' bytes_to_unicode): byte b's character, as UTF-8 */
static void byte_char(int b, char *out) {
  int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int cp = b;
  if (!printable) {
    int k = 0;
    for (int c = 0; c < b; c++)
      if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) k++;
    cp = 256 + k;
  }
  if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
  else out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

/* With vocab.json and merges.txt beside the model, sample goes through GPT-2's BPE: a vocabulary of
 * the 256 byte tokens, byte b's at id b, and no merges encodes a text as its bytes, so the greedy
 * text must be the byte model's; a vocabulary larger than the model's is refused. */
static void bpe_directory(void **state) {
  (void)state;
  char path[4300], out[4096], plain[4096];
  snprintf(path, sizeof path, "%s/vocab.json", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputc('{', f);
  for (int b = 0; b < 256; b++) {
    char ch[4];
    byte_char(b, ch);
    fprintf(f, "%s\"%s%s\": %d", b ? ", " : "", ch[0] == '"' || ch[0] == '\\' ? "\\" : "", ch, b);
  }
  fputs("}", f);
  fclose(f);
  snprintf(path, sizeof path, "%s/merges.txt", dir);
  f = fopen(path, "w");
  fputs("#version: 0.2\n", f);
  fclose(f);
  assert_int_equal(ct_test_run(out, sizeof out, "%s sample --checkpoint %s --prompt 'Hello' --max-new-tokens 30 --greedy", cuttle, dir), 0);
  greedy_reference("Hello", 30, plain);
  assert_memory_equal(out, plain, 35);
  /* 257 tokens for a model of 256 */
  snprintf(path, sizeof path, "%s/vocab.json", dir);
  f = fopen(path, "r+");
  fseek(f, -1, SEEK_END);
  fputs(", \"<|endoftext|>\": 256}", f);
  fclose(f);
  assert_int_equal(ct_test_run(out, sizeof out, "%s sample --checkpoint %s --max-new-tokens 3", cuttle, dir), 1);
  assert_non_null(strstr(out, "larger than the model's vocab_size"));
  snprintf(path, sizeof path, "%s/vocab.json", dir), unlink(path);
  snprintf(path, sizeof path, "%s/merges.txt", dir), unlink(path);
}

static void usage_errors(void **state) {
  (void)state;
  char out[4096];
  struct {
    const char *args, *needle;
    int rc;
  } cases[] = {
      {"sample --prompt hi", "--checkpoint DIR is required", 2},
      {"sample --checkpoint /nonexistent/gpt2", "does not exist", 2},
      {"sample --checkpoint . --max-new-tokens 0", "--max-new-tokens", 2},
      {"sample --checkpoint . --temperature 0", "--temperature", 2},
      {"sample --checkpoint . --top-k -1", "--top-k", 2},
      {"sample --checkpoint . --prompt ''", "--prompt is empty", 2},
      {"sample --checkpoint . --tokens 3", "unknown option", 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = ct_test_run(out, sizeof out, "%s %s", cuttle, cases[i].args);
    if (rc != cases[i].rc || !strstr(out, cases[i].needle))
      fail_msg("cuttle %s: exit %d (want %d), output \"%s\" lacks \"%s\"", cases[i].args, rc, cases[i].rc, out, cases[i].needle);
  }
  /* a directory that is no GPT-2 */
  int rc = ct_test_run(out, sizeof out, "%s sample --checkpoint %s", cuttle, tmp);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "config.json"));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(greedy_equals_the_uncached_forward), cmocka_unit_test(seeds),
                                     cmocka_unit_test(bpe_directory), cmocka_unit_test(usage_errors)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
