/* tests/fuzz/fuzz_cifar.c: fuzz target for the CIFAR binary-format check (ct_cifar_check, which
 * ct_cifar10_load and ct_cifar100_load run on every file before copying a byte of it). Each input
 * is checked as a CIFAR-10 file (1 label byte a record) and as a CIFAR-100 file (2). It must either
 * pass, with a record count that covers the input exactly and every label in range (verified here
 * independently), or fail with CT_EFORMAT and a message; never crash or read out of bounds. Built
 * with a replay main under CTest (corpus: tests/fuzz/corpus/fuzz_cifar/) and with libFuzzer by
 * scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include "cuttle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int lb = 1; lb <= 2; lb++) {
    int64_t records = -1;
    ct_status s = ct_cifar_check(data, size, "fuzz", lb, &records);
    size_t rec = (size_t)lb + CT_CIFAR_RECORD_PIXELS;
    if (s == CT_OK) {
      if (records < 1 || (size_t)records * rec != size) abort();
      for (int64_t r = 0; r < records; r++) {
        const uint8_t *p = data + (size_t)r * rec;
        if (lb == 1 ? p[0] >= CT_CIFAR10_CLASSES : (p[0] >= CT_CIFAR100_COARSE_CLASSES || p[1] >= CT_CIFAR100_CLASSES))
          abort();
      }
    } else if (s != CT_EFORMAT || records != 0 || ct_last_error()[0] == 0) {
      abort();
    }
  }
  return 0;
}
