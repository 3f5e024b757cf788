/* tests/cli/test_cli.c: the cuttle CLI as a user runs it: devices, train (metrics, save, resume,
 * Ctrl-C, --weight-decay), eval, every command's --help, and its errors. Runs the built binary
 * ($CUTTLE_BINARY_DIR/cuttle). The training cases need the dataset and are skipped (77) without it. */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>
#include "testutil.h"

static char cuttle[4096];
static char *tmp;

static void devices_lists_the_cpu(void **state) {
  (void)state;
  char out[8192];
  assert_int_equal(ct_test_run(out, sizeof out, "%s devices", cuttle), 0);
  assert_non_null(strstr(out, "try_all_gpus(): [cpu]"));
}

/* `cuttle <command> --help` prints that command's usage on stdout and exits 0, for every command
 * and every benchmark. */
static void every_command_has_help(void **state) {
  (void)state;
  static const char *const cmds[] = {"devices", "train", "eval", "smi", "bench", "bench gemm", "bench overhead",
                                     "bench matmul-sweep", "bench norms", "bench bandwidth", "bench train",
                                     "bench two-devices", "bench data-parallel", "bench amp-memory",
                                     "bench conv-format", "bench allreduce", "bench ddp-overlap", "bench memory",
                                     "bench decode", "bench attention"};
  char out[16384];
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    int rc = ct_test_run(out, sizeof out, "%s %s --help", cuttle, cmds[i]);
    char want[64];
    snprintf(want, sizeof want, "usage: cuttle %s", cmds[i]);
    if (rc != 0 || !strstr(out, want)) fprintf(stderr, "cuttle %s --help: exit %d, said:\n%s\n", cmds[i], rc, out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, want));
    /* -h is the same */
    assert_int_equal(ct_test_run(out, sizeof out, "%s %s -h", cuttle, cmds[i]), 0);
    assert_non_null(strstr(out, want));
  }
  /* an unknown argument to devices is a usage error, no longer ignored */
  assert_int_equal(ct_test_run(out, sizeof out, "%s devices --frobnicate", cuttle), 2);
  assert_non_null(strstr(out, "usage: cuttle devices"));
}

static void bad_options_are_usage_errors(void **state) {
  (void)state;
  char out[8192];
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --device cuda:7", cuttle), 2);
  assert_non_null(strstr(out, "not available"));
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --device tpu", cuttle), 2);
  assert_non_null(strstr(out, "bad device"));
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --optimizer lion", cuttle), 2);
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --max-steps -1", cuttle), 2);
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --weight-decay -0.1", cuttle), 2);
  assert_non_null(strstr(out, "--weight-decay: \"-0.1\" is out of range: it must be >= 0"));
  assert_int_equal(ct_test_run(out, sizeof out, "%s frobnicate", cuttle), 2);
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --data-dir /nonexistent/dir --model mlp", cuttle), 1);
  assert_non_null(strstr(out, "/nonexistent/dir"));
}

/* the bytes of a file (at most n - 1), NUL-terminated; the length, or -1 */
static long slurp(const char *path, char *buf, long n) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  long got = (long)fread(buf, 1, (size_t)(n - 1), f);
  fclose(f);
  buf[got] = 0;
  return got;
}

/* --weight-decay reaches the optimizer: 5 SGD steps of the mlp save the same bytes twice without
 * it (training is deterministic for a seed) and other bytes with it; the setup line names it. */
static void weight_decay_reaches_the_optimizer(void **state) {
  (void)state;
  char out[8192], path[3][4200];
  static char bytes[3][1 << 21];
  const char *wd[3] = {"0", "0", "0.5"};
  long len[3];
  for (int i = 0; i < 3; i++) {
    snprintf(path[i], sizeof path[i], "%s/wd%d.safetensors", tmp, i);
    assert_int_equal(ct_test_run(out, sizeof out,
                                 "%s train --model mlp --optimizer sgd --lr 0.1 --weight-decay %s --max-steps 5 --workers 1 "
                                 "--no-progress --save %s",
                                 cuttle, wd[i], path[i]),
                     0);
    if (i == 2) assert_non_null(strstr(out, "weight_decay 0.5"));
    len[i] = slurp(path[i], bytes[i], sizeof bytes[i]);
    assert_true(len[i] > 0 && len[i] < (long)sizeof bytes[i] - 1);
  }
  assert_int_equal(len[0], len[1]);
  assert_int_equal(memcmp(bytes[0], bytes[1], (size_t)len[0]), 0);
  /* the third file's recipe records the other weight decay, so its header differs; its tensors
   * (model and optimizer state) must too: their checksum */
  char sum[3][64];
  for (int i = 0; i < 3; i += 2) {
    ct_safetensors *f = ct_assert_nonnull(ct_safetensors_open(path[i]));
    snprintf(sum[i], sizeof sum[i], "%s", (const char *)ct_assert_nonnull((void *)ct_safetensors_metadata(f, CT_SAFETENSORS_CHECKSUM_KEY)));
    ct_safetensors_close(f);
  }
  assert_string_not_equal(sum[0], sum[2]);
}

/* issue 19's memory and decoding benchmarks run and print their tables: a step's allocator peak
 * (nonzero: the step allocates), and the decode table's readers; a bad --workers is a usage error. */
static void bench_memory_and_decode(void **state) {
  (void)state;
  static char out[1 << 15];
  assert_int_equal(ct_test_run(out, sizeof out, "%s bench memory --model mlp --batch-size 8 --threads 1", cuttle), 0);
  const char *row = strstr(out, "\ncuttle ");
  assert_non_null(row);
  long long held = -1, peak = -1;
  assert_int_equal(sscanf(row, "\ncuttle %lld (%*[^)]) %lld", &held, &peak), 2);
  assert_true(held > 0 && peak > 0);
  assert_int_equal(ct_test_run(out, sizeof out, "%s bench decode --quick --workers 0,1", cuttle), 0);
  assert_non_null(strstr(out, "ct_image_load"));
  assert_non_null(strstr(out, "synthetic jpeg q90"));
  assert_int_equal(ct_test_run(out, sizeof out, "%s bench decode --workers x", cuttle), 2);
}

/* bench train --channels-last trains both sides in channels_last: cuttle's row and the PyTorch
 * peer's (which gets the flag), on a few steps of the cnn */
static void bench_train_channels_last(void **state) {
  (void)state;
  static char out[1 << 16];
  assert_int_equal(ct_test_run(out, sizeof out,
                               "%s bench train --model cnn --device cpu --limit 512 --max-steps 2 --test-limit 200 --threads 1 "
                               "--workers 0 --no-progress --channels-last --pytorch --python '%s'",
                               cuttle, ct_test_python()),
                   0);
  assert_non_null(strstr(out, "loader workers, channels_last"));
  assert_non_null(strstr(out, " --channels-last"));   /* the peer's command line */
  assert_null(strstr(out, "failed"));                  /* both sides ran */
  const char *row = strstr(out, "\ncnn ");
  assert_non_null(row);
  assert_int_equal(ct_test_run(out, sizeof out, "%s bench train --model cnn --channels-last --frobnicate", cuttle), 2);
}

/* The first step's loss of bench train --losses: "step 1 loss L" on stderr (merged into out). */
static double first_loss(const char *out) {
  const char *l = strstr(out, "step 1 loss ");
  assert_non_null(l);
  return strtod(l + strlen("step 1 loss "), NULL);
}

/* bench train --amp: cuttle's forward runs in autocast (its first loss moves off float32's by
 * rounding, not more), f16 with a GradScaler on both sides, and the peer gets the flag */
static void bench_train_amp(void **state) {
  (void)state;
  static char out[1 << 16];
  /* progress on: with a GradScaler its line shows the scale (train_loop.c) */
  const char *common = "bench train --model cnn --device cpu --limit 256 --max-steps 1 --test-limit 100 --threads 1 "
                       "--workers 0 --losses";
  assert_int_equal(ct_test_run(out, sizeof out, "%s %s", cuttle, common), 0);
  double f32 = first_loss(out);
  assert_int_equal(ct_test_run(out, sizeof out, "%s %s --amp bf16", cuttle, common), 0);
  assert_non_null(strstr(out, "loader workers, autocast bf16"));
  double bf16 = first_loss(out);
  assert_true(bf16 != f32);                /* the forward ran in bfloat16 */
  assert_true(fabs(bf16 - f32) < 0.05 * f32); /* and only its rounding differs */
  assert_null(strstr(out, "scale ")); /* bf16 has no GradScaler, so its progress line shows none */
  /* f16: the forward in float16, and the steps through a GradScaler (its scale on the progress line) */
  assert_int_equal(ct_test_run(out, sizeof out, "%s %s --amp f16 --max-steps 2", cuttle, common), 0);
  assert_non_null(strstr(out, "loader workers, autocast f16"));
  double f16 = first_loss(out);
  assert_true(f16 != f32 && f16 != bf16);
  assert_true(fabs(f16 - f32) < 0.05 * f32);
  assert_non_null(strstr(out, "scale 65536"));
  /* the peer gets the flag and runs (bf16: CI's PyTorch may be Debian's 1.13, whose CPU autocast
   * has no float16 and which has no torch.amp.GradScaler) */
  assert_int_equal(ct_test_run(out, sizeof out,
                               "%s bench train --model cnn --device cpu --limit 512 --max-steps 2 --test-limit 200 --threads 1 "
                               "--workers 0 --no-progress --amp bf16 --pytorch --python '%s'",
                               cuttle, ct_test_python()),
                   0);
  assert_non_null(strstr(out, " --amp bf16")); /* the peer's command line */
  assert_null(strstr(out, "failed"));         /* both sides ran */
  assert_int_equal(ct_test_run(out, sizeof out, "%s bench train --model cnn --amp f8", cuttle), 2);
  assert_non_null(strstr(out, "--amp bf16 or f16"));
  assert_int_equal(ct_test_run(out, sizeof out, "%s bench train --model cnn --amp f16 --cuda-graph", cuttle), 2);
}

static void train_save_eval_resume(void **state) {
  (void)state;
  char out[16384], ck[4200], metrics[4200];
  snprintf(ck, sizeof ck, "%s/mlp.safetensors", tmp);
  snprintf(metrics, sizeof metrics, "%s/m.jsonl", tmp);
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --model mlp --epochs 1 --no-progress --save %s --metrics %s", cuttle, ck,
                       metrics), 0);
  FILE *f = fopen(metrics, "r");
  assert_non_null(f);
  char line[1024];
  assert_non_null(fgets(line, sizeof line, f));
  fclose(f);
  const char *keys[] = {"\"epoch\": 1", "\"train_loss\"", "\"test_acc\"", "\"images_per_s\"", "\"seconds\"", "\"device\": \"cpu\""};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    if (!strstr(line, keys[i])) fprintf(stderr, "metrics line lacks %s: %s\n", keys[i], line);
    assert_non_null(strstr(line, keys[i]));
  }
  double acc = atof(strstr(line, "\"test_acc\": ") + 12);
  assert_true(acc > 0.8);
  /* eval reports the same accuracy from the checkpoint */
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --model mlp --device cpu --checkpoint %s", cuttle, ck), 0);
  char want[64];
  snprintf(want, sizeof want, "test_acc %.2f%%", 100 * acc);
  if (!strstr(out, want)) fprintf(stderr, "eval said: %s (wanted %s)\n", out, want);
  assert_non_null(strstr(out, want));
  /* and so does eval on an OpenCL device (PoCL in CI) from the checkpoint the CPU wrote */
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --model mlp --device opencl:0 --checkpoint %s", cuttle, ck), 0);
  if (!strstr(out, want)) fprintf(stderr, "eval on opencl:0 said: %s (wanted %s)\n", out, want);
  assert_non_null(strstr(out, want));
  /* resume continues with epoch 2 */
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --model mlp --epochs 2 --no-progress --resume %s --metrics %s", cuttle, ck,
                       metrics), 0);
  assert_non_null(strstr(out, "resumed"));
  assert_non_null(strstr(out, "epoch 2:"));
  assert_null(strstr(out, "epoch 1:"));
  /* the wrong model for a checkpoint is a clear error */
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --model cnn --device cpu --checkpoint %s", cuttle, ck), 1);
  assert_non_null(strstr(out, "cuttle eval:"));
}

/* Ctrl-C finishes the step, saves, and exits 130 (128 + SIGINT), as documented in `cuttle train
 * --help`; tests/cli/test_signals.c covers SIGTERM, a second signal and SIGKILL. */
static void ctrl_c_saves_and_exits_cleanly(void **state) {
  (void)state;
  char ck[4200];
  snprintf(ck, sizeof ck, "%s/interrupted.safetensors", tmp);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int devnull = open("/dev/null", 1);
    dup2(devnull, 1), dup2(devnull, 2);
    execl(cuttle, cuttle, "train", "--model", "cnn", "--epochs", "1", "--no-progress", "--save", ck, (char *)NULL);
    _exit(127);
  }
  sleep(3);
  kill(pid, SIGINT);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 128 + SIGINT);
  /* the checkpoint is complete and loads into the same model */
  ct_module *m = ct_model_new("cnn", CT_DEVICE_CPU, NULL);
  ct_checkpoint_meta meta = {0};
  ct_assert_ok(ct_checkpoint_load(ck, m, NULL, &meta));
  assert_int_equal(meta.epoch, 0); /* the interrupted epoch is not counted */
  ct_module_free(m);
}

static int setup(void **state) {
  (void)state;
  const char *bin = getenv("CUTTLE_BINARY_DIR");
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", bin ? bin : ".");
  tmp = ct_test_tmpdir();
  return tmp ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  ct_test_rmdir(tmp);
  return 0;
}

int main(void) {
  const struct CMUnitTest basic[] = {cmocka_unit_test(devices_lists_the_cpu), cmocka_unit_test(every_command_has_help),
                                     cmocka_unit_test(bad_options_are_usage_errors)};
  int fails = cmocka_run_group_tests_name("cli", basic, setup, teardown);
  if (!ct_test_data_dir()) {
    printf("SKIP: the training cases need Fashion-MNIST (apt-get install dataset-fashion-mnist)\n");
    return fails ? fails : CT_TEST_SKIP;
  }
  const struct CMUnitTest training[] = {cmocka_unit_test(train_save_eval_resume), cmocka_unit_test(ctrl_c_saves_and_exits_cleanly),
                                        cmocka_unit_test(weight_decay_reaches_the_optimizer),
                                        cmocka_unit_test(bench_train_channels_last), cmocka_unit_test(bench_train_amp),
      cmocka_unit_test(bench_memory_and_decode)};
  return fails + cmocka_run_group_tests_name("cli training", training, setup, teardown);
}
