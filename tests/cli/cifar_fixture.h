/* tests/cli/cifar_fixture.h: CIFAR files in the binary format (the data set's own page: per record
 * the label byte(s), then 3072 pixel bytes, the red, green and blue planes of 32 x 32), written by
 * the CLI tests, since no package ships CIFAR. Include after image_fixture.h (img_mkdirs). */
#ifndef CUTTLE_TESTS_CIFAR_FIXTURE_H
#define CUTTLE_TESTS_CIFAR_FIXTURE_H

#include <stdio.h>

/* dir/name: `records` records of label_bytes label bytes (2: CIFAR-100's coarse, then fine), the
 * label of record r being (salt + r) % classes, with pixels seeded by salt and r and a class-dependent
 * red plane, so a model can learn something. Folders are made. */
static inline void write_cifar(const char *dir, const char *name, int salt, int records, int label_bytes, int classes) {
  char path[8192];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  img_mkdirs(path);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  for (int r = 0; r < records; r++) {
    int label = (salt + r) % classes;
    if (label_bytes == 2) fputc(label % 20, f);
    fputc(label, f);
    for (int k = 0; k < 3072; k++) fputc((salt * 101 + r * 31 + k * 7 + label * 50 * (k < 1024)) % 256, f);
  }
  fclose(f);
}

#endif
