/* tests/fuzz/fuzz_text.c: fuzz target for the text path (src/data/text.c): any bytes make a text
 * (ct_text_from_bytes), and batches and windows of every split with a window size taken from the
 * input must be drawn or refused (CT_ESHAPE for a split shorter than one window), each batch's
 * targets the inputs shifted by one; never crash, read out of bounds or leak. Built with
 * tests/fuzz/replay_main.c under CTest over tests/fuzz/corpus/fuzz_text/, or with
 * -fsanitize=fuzzer by scripts/fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "cuttle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ct_text *t = ct_text_from_bytes(data, size, "<fuzz>");
  if (!t) abort();
  int64_t T = size ? 1 + data[0] % 64 : 1;
  for (int split = 0; split < 3; split++) {
    ct_tensor *x = NULL, *y = NULL;
    ct_status s = ct_text_batch(t, (ct_text_split)split, 3, T, size, 2, CT_DEVICE_CPU, &x, &y);
    if (s == CT_OK) {
      int64_t a[3 * 64], b[3 * 64];
      if (ct_to_host(x, a, sizeof(int64_t) * 3 * (size_t)T, CT_I64) != CT_OK ||
          ct_to_host(y, b, sizeof(int64_t) * 3 * (size_t)T, CT_I64) != CT_OK)
        abort();
      for (int64_t k = 0; k + 1 < T; k++)
        if (a[k + 1] != b[k]) abort(); /* within a window, y is x shifted by one */
    } else if (s != CT_ESHAPE || x || y) {
      abort();
    }
    ct_tensor_free(x), ct_tensor_free(y);
    int64_t n = ct_text_num_windows(t, (ct_text_split)split, T);
    if (n > 0) {
      if (ct_text_windows(t, (ct_text_split)split, T, n - 1, 1, CT_DEVICE_CPU, &x, &y) != CT_OK) abort();
      ct_tensor_free(x), ct_tensor_free(y);
    }
  }
  ct_text_free(t);
  return 0;
}
