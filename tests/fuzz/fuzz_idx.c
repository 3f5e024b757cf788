/* tests/fuzz/fuzz_idx.c: fuzz target for the IDX parser (ct_idx_parse over a memory buffer).
 * Any input must either parse, with a shape whose byte count matches the input exactly, or fail
 * with CT_EFORMAT and leave nothing allocated; never crash, read out of bounds or leak. Built with a
 * replay main under CTest (corpus: tests/fuzz/corpus/fuzz_idx/) and with libFuzzer by
 * scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include "cuttle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ct_idx idx;
  ct_status s = ct_idx_parse(data, size, "fuzz", &idx);
  if (s == CT_OK) {
    size_t header = 4 + 4 * (size_t)idx.ndim;
    if (idx.ndim < 1 || idx.ndim > CT_IDX_MAX_DIMS || header + idx.nbytes != size || !idx.data ||
        idx.nbytes != (size_t)idx.numel * idx.elem_size)
      abort();
    /* touch every byte so ASan checks the allocation's extent */
    volatile uint8_t sum = 0;
    for (size_t i = 0; i < idx.nbytes; i++) sum += ((const uint8_t *)idx.data)[i];
    (void)sum;
    ct_idx_free(&idx);
  } else if (s != CT_EFORMAT || idx.data || ct_last_error()[0] == 0) {
    abort();
  }
  return 0;
}
