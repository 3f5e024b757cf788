/* tests/cli/test_cli_exercise.c: the mixed-precision exercise of issue 19 as one command
 * (issue 19, section 5): torchvision's resnet50 on CIFAR-10 with Adam at 3e-4, autocast float16
 * and a GradScaler, for 10 epochs:
 *
 *   cuttle train --model resnet50 --data cifar10:DIR --optimizer adam --lr 3e-4 --amp f16 --epochs 10
 *
 * run word for word on CIFAR-10 files written here in the binary format (no package ships CIFAR;
 * 2 records a file keep the CPU run short: 10 training and 4 test images, one step an epoch).
 * Asserts exit status 0, the model, optimizer and precision it reports, ten epoch lines with a
 * finite loss, and that the GradScaler's skipped steps (the first steps overflow at the initial
 * scale 65536, as in PyTorch) left some steps that trained: the last loss differs from the first.
 * Then `cuttle eval` reads what `--save` wrote with the same --model and --data. Needs no data set;
 * the sanitizer run leaves it out (scripts/test.sh), as the end-to-end training test. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "../data/image_fixture.h"
#include "cifar_fixture.h"

static void exercise(void **state) {
  (void)state;
  char *tmp = ct_assert_nonnull(ct_test_tmpdir()), dir[4200], name[64], cuttle[4200], ck[4300];
  static char out[65536];
  const char *bin = getenv("CUTTLE_BINARY_DIR");
  snprintf(cuttle, sizeof cuttle, "%s/cuttle", bin ? bin : ".");
  snprintf(dir, sizeof dir, "%s/cifar-10-batches-bin", tmp);
  for (int b = 1; b <= 5; b++) {
    snprintf(name, sizeof name, "data_batch_%d.bin", b);
    write_cifar(dir, name, 2 * b, 2, 1, 10);
  }
  write_cifar(dir, "test_batch.bin", 0, 4, 1, 10);
  snprintf(ck, sizeof ck, "%s/resnet50.safetensors", tmp);
  int rc = ct_test_run(out, sizeof out,
                       "%s train --model resnet50 --data cifar10:%s --optimizer adam --lr 3e-4 --amp f16 --epochs 10 --save %s",
                       cuttle, dir, ck);
  printf("%s", out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "training resnet50 on "));
  assert_non_null(strstr(out, "adam lr 0.0003"));
  assert_non_null(strstr(out, "autocast float16 with a GradScaler"));
  assert_non_null(strstr(out, "10 training and 4 test images of (3, 32, 32), 10 classes"));
  double first = NAN, last = NAN;
  for (int e = 1; e <= 10; e++) {
    char tag[32];
    snprintf(tag, sizeof tag, "epoch %d: train_loss ", e);
    const char *p = strstr(out, tag);
    assert_non_null(p);
    double v = strtod(p + strlen(tag), NULL);
    assert_true(isfinite(v));
    if (e == 1) first = v;
    last = v;
  }
  assert_true(last != first);
  rc = ct_test_run(out, sizeof out, "%s eval --model resnet50 --data cifar10:%s --checkpoint %s", cuttle, dir, ck);
  printf("%s", out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "test_acc "));
  ct_test_rmdir(tmp);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(exercise)};
  return cmocka_run_group_tests_name("cli exercise", tests, NULL, NULL);
}
