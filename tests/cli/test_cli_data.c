/* tests/cli/test_cli_data.c: `cuttle train --data` and `cuttle eval --data` (issue 19) on data
 * written here (no package ships CIFAR; the image folders are small PNGs):
 *  - CIFAR-10 and CIFAR-100 files in the binary format train one epoch with the mlp and the cnn,
 *    with and without --augment, and `cuttle eval` on the saved checkpoint with the same --data
 *    reports the accuracy the last epoch reported;
 *  - an image folder with train/ and val/, RGB and --image-size; one without, --gray and
 *    --val-split with --seed, trains and evaluates the same way;
 *  - an image that does not decode: an error naming it, or skipped and counted (--skip-bad-images);
 *  - --normalize MEAN/STD (torchvision's Normalize) on both commands;
 *  - resnet34 and resnet18-small train and evaluate, and resnet18 stopped mid-epoch and resumed
 *    saves exactly the checkpoint of an uninterrupted run;
 *  - bad --data values and data options: usage errors (2) or failures (1) that say why.
 * Needs no data set: nothing here is skipped. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "testutil.h"
#include "../data/image_fixture.h"
#include "cifar_fixture.h"

static char cuttle[4096];
static char *tmp;

static char *path_in(const char *rel) {
  static char p[4][4200];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof p[k], "%s/%s", tmp, rel);
  return p[k];
}

/* The "test_acc X%" of the last epoch line of `cuttle train`'s output, "" when none. */
static void last_acc(const char *out, char *acc, size_t n) {
  acc[0] = 0;
  const char *p = out, *q;
  while ((q = strstr(p, "test_acc "))) {
    p = q + 9;
    size_t k = strcspn(p, "%");
    if (k < n) memcpy(acc, p, k), acc[k] = 0;
  }
}

/* Train with `data` (and extra options), save, then eval with `data` (and eval_extra): exit 0,
 * one epoch line, and eval's accuracy is the epoch's. */
static void train_then_eval(const char *model, const char *data, const char *extra, const char *eval_extra) {
  char out[16384], ck[4200], acc[32], want[64];
  snprintf(ck, sizeof ck, "%s/%s.safetensors", tmp, model);
  remove(ck);
  int rc = ct_test_run(out, sizeof out, "%s train --model %s --data %s %s --epochs 1 --batch-size 8 --workers 2 "
                       "--device cpu --no-progress --save %s", cuttle, model, data, extra, ck);
  if (rc != 0 || !strstr(out, "epoch 1:")) fprintf(stderr, "train --data %s %s: exit %d, said:\n%s\n", data, extra, rc, out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "epoch 1:"));
  last_acc(out, acc, sizeof acc);
  assert_true(acc[0]);
  rc = ct_test_run(out, sizeof out, "%s eval --model %s --data %s %s --device cpu --checkpoint %s", cuttle, model, data,
                   eval_extra, ck);
  snprintf(want, sizeof want, "test_acc %s%%", acc);
  if (rc != 0 || !strstr(out, want)) fprintf(stderr, "eval --data %s: exit %d, said:\n%s(wanted %s)\n", data, rc, out, want);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, want));
}

static void cifar10_trains_and_evaluates(void **state) {
  (void)state;
  char name[32];
  for (int b = 1; b <= 5; b++) {
    snprintf(name, sizeof name, "data_batch_%d.bin", b);
    write_cifar(path_in("c10"), name, b, 8, 1, 10);
  }
  write_cifar(path_in("c10"), "test_batch.bin", 0, 10, 1, 10);
  char data[4300];
  snprintf(data, sizeof data, "cifar10:%s", path_in("c10"));
  train_then_eval("mlp", data, "", "");
  train_then_eval("cnn", data, "", "");
  train_then_eval("cnn", data, "--augment", "");
  train_then_eval("mlp", data, "--augment --batch-size 4", "");
  /* torchvision's Normalize over the set's own: one value for every channel, or one per channel */
  train_then_eval("mlp", data, "--normalize 0.5/0.25", "--normalize 0.5/0.25");
  train_then_eval("cnn", data, "--normalize 0.4,0.5,0.6/0.2,0.25,0.3", "--normalize 0.4,0.5,0.6/0.2,0.25,0.3");
  train_then_eval("mlp", data, "--normalize 0.5/0.2,0.25,0.3", "--normalize 0.5/0.2,0.25,0.3");
  /* and it is applied: the same run with other inputs has another loss */
  char out[16384], loss_own[32] = "", loss_norm[32] = "";
  const char *run = "%s train --model mlp --data %s --epochs 1 --batch-size 8 --workers 2 --device cpu --no-progress %s";
  assert_int_equal(ct_test_run(out, sizeof out, run, cuttle, data, ""), 0);
  assert_non_null(strstr(out, "train_loss "));
  sscanf(strstr(out, "train_loss "), "train_loss %31s", loss_own);
  assert_int_equal(ct_test_run(out, sizeof out, run, cuttle, data, "--normalize 0.5/0.25"), 0);
  assert_non_null(strstr(out, "train_loss "));
  sscanf(strstr(out, "train_loss "), "train_loss %31s", loss_norm);
  assert_true(loss_own[0] && loss_norm[0]);
  assert_string_not_equal(loss_own, loss_norm);
  /* the checkpoint records the sample options: eval takes them from it; eval given others notes the
   * override, naming both; --resume without them warns, naming both */
  char ck[4200];
  snprintf(ck, sizeof ck, "%s", path_in("norm.safetensors"));
  char extra[8600];
  snprintf(extra, sizeof extra, "--normalize 0.5/0.25 --save %s", ck);
  assert_int_equal(ct_test_run(out, sizeof out, run, cuttle, data, extra), 0);
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --model mlp --data %s --device cpu --checkpoint %s", cuttle, data, ck), 0);
  assert_null(strstr(out, "warning"));
  assert_null(strstr(out, "overrides"));
  char acc_recorded[64];
  last_acc(out, acc_recorded, sizeof acc_recorded);
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --model mlp --data %s --device cpu --checkpoint %s --normalize "
                               "0.25/0.5", cuttle, data, ck), 0);
  assert_non_null(strstr(out, "--normalize 0.25/0.5 overrides the checkpoint's 0.5/0.25"));
  snprintf(extra, sizeof extra, "--epochs 2 --resume %s --save %s", ck, ck);
  assert_int_equal(ct_test_run(out, sizeof out, run, cuttle, data, extra), 0);
  assert_non_null(strstr(out, "\"--normalize 0.5/0.25\", this run uses \"(none)\""));
}

/* The bytes of a file into a malloc'd buffer (*n its size). */
static char *slurp(const char *path, long *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *n = ftell(f);
  rewind(f);
  char *b = malloc((size_t)*n + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)*n, f), (size_t)*n);
  fclose(f);
  return b;
}

/* torchvision's ResNets through the CLI on CIFAR-format files: resnet34 and resnet18-small train
 * and evaluate; resnet18 stopped mid-epoch (--max-steps) and resumed saves the checkpoint an
 * uninterrupted run saves, byte for byte (parameters, BatchNorm buffers, Adam state, position). */
static void resnets_train_resume_and_evaluate(void **state) {
  (void)state;
  char name[32], data[4300], out[16384];
  for (int b = 1; b <= 5; b++) {
    snprintf(name, sizeof name, "data_batch_%d.bin", b);
    write_cifar(path_in("r10"), name, b, 8, 1, 10);
  }
  write_cifar(path_in("r10"), "test_batch.bin", 0, 10, 1, 10);
  snprintf(data, sizeof data, "cifar10:%s", path_in("r10"));
  train_then_eval("resnet34", data, "", "");
  train_then_eval("resnet18-small", data, "--augment", "");
  const char *run = "%s train --model resnet18 --data %s --epochs 2 --batch-size 8 --workers 2 --device cpu --no-progress "
                    "--save %s %s";
  char full[4200], part[4200];
  snprintf(full, sizeof full, "%s", path_in("r18_full.safetensors"));
  snprintf(part, sizeof part, "%s", path_in("r18_part.safetensors"));
  assert_int_equal(ct_test_run(out, sizeof out, run, cuttle, data, full, ""), 0);
  assert_int_equal(ct_test_run(out, sizeof out, run, cuttle, data, part, "--max-steps 7"), 0); /* 5 steps an epoch */
  assert_non_null(strstr(out, "batch 2 of epoch 2"));
  char resume[4300];
  snprintf(resume, sizeof resume, "--resume %s", part);
  assert_int_equal(ct_test_run(out, sizeof out, run, cuttle, data, part, resume), 0);
  assert_non_null(strstr(out, "resumed from"));
  assert_non_null(strstr(out, "epoch 2:"));
  long nf, np;
  char *a = slurp(full, &nf), *b = slurp(part, &np);
  assert_int_equal(nf, np);
  assert_true(memcmp(a, b, (size_t)nf) == 0);
  free(a), free(b);
}

static void cifar100_trains_and_evaluates(void **state) {
  (void)state;
  write_cifar(path_in("c100"), "train.bin", 1, 24, 2, 100);
  write_cifar(path_in("c100"), "test.bin", 2, 6, 2, 100);
  char data[4300], out[16384];
  snprintf(data, sizeof data, "cifar100:%s", path_in("c100"));
  train_then_eval("cnn", data, "--augment", "");
  /* the model has 100 outputs: the cnn of CIFAR-10 does not load into it */
  char ck[4200];
  snprintf(ck, sizeof ck, "%s/cnn.safetensors", tmp);
  snprintf(data, sizeof data, "cifar10:%s", path_in("c10"));
  write_cifar(path_in("c10"), "test_batch.bin", 0, 10, 1, 10);
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --model cnn --data %s --device cpu --checkpoint %s", cuttle, data, ck), 2);
  assert_non_null(strstr(out, "holds a cnn for (3, 32, 32) images and 100 classes, but --data cifar10:"));
  assert_non_null(strstr(out, "leave out the data options to use the recorded ones (--data cifar100:"));
}

/* PNGs of two classes under root/<split>/<class>/, h x w x c, the classes told apart by their
 * brightness. */
static void write_folder(const char *root, const char *split, int n, int h, int w, int c) {
  char rel[4400];
  for (int i = 0; i < n; i++) {
    uint8_t *px = img_make(i, h, w, c);
    if (i % 2)
      for (int k = 0; k < h * w * c; k++) px[k] = (uint8_t)(px[k] / 2 + 128);
    snprintf(rel, sizeof rel, "%s/%s%s%s/%02d.png", root, split, *split ? "/" : "", i % 2 ? "light" : "dark", i);
    assert_true(img_write_png(rel, px, h, w, c));
    free(px);
  }
}

static void imagefolder_trains_and_evaluates(void **state) {
  (void)state;
  write_folder(path_in("imf"), "train", 16, 10, 12, 3);
  write_folder(path_in("imf"), "val", 6, 10, 12, 3);
  char data[4300], out[16384];
  snprintf(data, sizeof data, "imagefolder:%s", path_in("imf"));
  train_then_eval("cnn", data, "--image-size 8", "--image-size 8");
  train_then_eval("mlp", data, "--image-size 8,8 --augment", "--image-size 8,8");
  /* without --image-size every image has the first one's size (10 x 12) */
  train_then_eval("cnn", data, "", "");
  /* a folder without train/ and val/: --val-split with --seed, grayscale, 1-channel models */
  write_folder(path_in("flat"), "", 20, 8, 8, 1);
  snprintf(data, sizeof data, "imagefolder:%s", path_in("flat"));
  train_then_eval("cnn", data, "--gray --val-split 0.25 --seed 3", "--gray --val-split 0.25 --seed 3");
  /* eval of the gray model without --gray and --seed: the checkpoint's recipe gives both */
  char ck[4200];
  snprintf(ck, sizeof ck, "%s/cnn.safetensors", tmp);
  assert_int_equal(ct_test_run(out, sizeof out, "%s eval --model cnn --data %s --val-split 0.25 --device cpu --checkpoint %s",
                               cuttle, data, ck), 0);
  assert_non_null(strstr(out, "test_acc"));
  /* and without --val-split there is no test split: the message says what to pass */
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --model cnn --data %s --gray --device cpu", cuttle, data), 1);
  assert_non_null(strstr(out, "--val-split"));
}

/* A file that does not decode: an error naming it, or with --skip-bad-images left out and counted. */
static void imagefolder_bad_image(void **state) {
  (void)state;
  write_folder(path_in("skip"), "train", 8, 8, 8, 3);
  write_folder(path_in("skip"), "val", 4, 8, 8, 3);
  FILE *f = fopen(path_in("skip/train/dark/zz.png"), "wb");
  assert_non_null(f);
  fputs("not a PNG at all", f);
  fclose(f);
  char out[16384];
  int rc = ct_test_run(out, sizeof out, "%s train --model mlp --data imagefolder:%s --epochs 1 --batch-size 4 --device cpu "
                       "--no-progress", cuttle, path_in("skip"));
  if (rc != 1 || !strstr(out, "zz.png")) fprintf(stderr, "exit %d, said:\n%s\n", rc, out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "zz.png"));
  rc = ct_test_run(out, sizeof out, "%s train --model mlp --data imagefolder:%s --skip-bad-images --epochs 1 --batch-size 4 "
                   "--device cpu --no-progress", cuttle, path_in("skip"));
  if (rc != 0 || !strstr(out, "1 image(s) did not decode")) fprintf(stderr, "exit %d, said:\n%s\n", rc, out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "1 image(s) did not decode and were skipped"));
}

static void bad_data_options(void **state) {
  (void)state;
  char out[16384];
  static const struct {
    const char *args, *said;
    int rc;
  } cases[] = {
      {"train --data mnist:/x", "unknown --data \"mnist:/x\"", 2},
      {"train --data cifar10", "--data cifar10:DIR", 2},
      {"train --data cifar10:", "--data cifar10:DIR", 2},
      {"train --data imagefolder", "--data imagefolder:DIR", 2},
      {"train --data fashion-mnist:/x", "--data-dir", 2},
      {"train --data cifar10:/x --data-dir /y", "--data-dir", 2},
      {"train --gray", "--data imagefolder:DIR", 2},
      {"train --data imagefolder:/x --image-size 0", "--image-size", 2},
      {"train --data imagefolder:/x --image-size 8,", "--image-size", 2},
      {"train --data imagefolder:/x --val-split 1", "--val-split", 2},
      {"eval --checkpoint x --data cifar10:/x --augment", "unknown option \"--augment\"", 2},
      {"eval --checkpoint x --data frob:/x", "unknown --data", 2},
      {"train --normalize 0.5", "bad --normalize", 2},
      {"train --normalize 0.5/0", "bad --normalize", 2},
      {"train --normalize 0.5,0.5/0.2", "bad --normalize", 2},
      {"train --normalize 0.5,0.5/0.2,0.2", "this data has 1", 2},
      {"train --data imagefolder:/x --normalize 0.5,0.5/0.2", "this data has 3", 2},
      {"train --normalize 0.5/nan", "bad --normalize", 2},
      {"train --normalize 0.5,/0.2", "bad --normalize", 2},
      {"train --device cpu --normalize 0.5/1e-45", "not finite", 1},
      {"eval --checkpoint x --normalize a/b", "bad --normalize", 2},
      {"train --device cpu --data cifar10:/nonexistent/c10", "/nonexistent/c10", 1},
      {"train --device cpu --data cifar100:/nonexistent/c100", "cifar-100", 1},
      {"train --device cpu --data imagefolder:/nonexistent/imf", "/nonexistent/imf", 1},
      {"eval --checkpoint x --device cpu --data cifar10:/nonexistent/c10", "x: cannot open", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = ct_test_run(out, sizeof out, "%s %s", cuttle, cases[i].args);
    if (rc != cases[i].rc || !strstr(out, cases[i].said))
      fprintf(stderr, "cuttle %s: exit %d (wanted %d), said:\n%s(wanted \"%s\")\n", cases[i].args, rc, cases[i].rc, out,
              cases[i].said);
    assert_int_equal(rc, cases[i].rc);
    assert_non_null(strstr(out, cases[i].said));
  }
  /* a malformed file: a test batch that is not a whole number of records, named with the problem */
  char name[32];
  for (int b = 1; b <= 5; b++) {
    snprintf(name, sizeof name, "data_batch_%d.bin", b);
    write_cifar(path_in("bad"), name, b, 2, 1, 10);
  }
  FILE *f = fopen(path_in("bad/test_batch.bin"), "wb");
  assert_non_null(f);
  for (int k = 0; k < 3000; k++) fputc(1, f);
  fclose(f);
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --device cpu --data cifar10:%s", cuttle, path_in("bad")), 1);
  assert_non_null(strstr(out, "test_batch.bin"));
  /* a label out of range */
  write_cifar(path_in("bad"), "test_batch.bin", 0, 2, 1, 10);
  f = fopen(path_in("bad/data_batch_3.bin"), "r+b");
  assert_non_null(f);
  fputc(10, f);
  fclose(f);
  assert_int_equal(ct_test_run(out, sizeof out, "%s train --device cpu --data cifar10:%s", cuttle, path_in("bad")), 1);
  assert_non_null(strstr(out, "data_batch_3.bin"));
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
  const struct CMUnitTest tests[] = {cmocka_unit_test(bad_data_options), cmocka_unit_test(cifar10_trains_and_evaluates),
                                     cmocka_unit_test(cifar100_trains_and_evaluates),
                                     cmocka_unit_test(resnets_train_resume_and_evaluate),
                                     cmocka_unit_test(imagefolder_trains_and_evaluates),
                                     cmocka_unit_test(imagefolder_bad_image)};
  return cmocka_run_group_tests_name("cli data", tests, setup, teardown);
}
