/* tests/fuzz/fuzz_safetensors.c: fuzz target for the safetensors reader (src/io/safetensors.c).
 * Any input must parse into a validated file or fail with CT_EFORMAT/CT_ENOMEM, never crash, leak or
 * read out of bounds; a file that parses must yield every tensor cuttle has a dtype for. Built with
 * tests/fuzz/replay_main.c under CTest over tests/fuzz/corpus/fuzz_safetensors/, or with
 * -fsanitize=fuzzer for real fuzzing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "cuttle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ct_safetensors *f = ct_safetensors_parse(data, size, "<fuzz>");
  if (!f) {
    ct_status s = ct_last_status();
    if (s != CT_EFORMAT && s != CT_ENOMEM) {
      fprintf(stderr, "fuzz_safetensors: unexpected status %d: %s\n", s, ct_last_error());
      abort();
    }
    return 0;
  }
  for (int i = 0; i < ct_safetensors_count(f); i++) {
    ct_safetensors_info in;
    if (ct_safetensors_info_at(f, i, &in) != CT_OK) abort();
    if (ct_safetensors_find(f, in.name) != i) abort();
    if (in.dtype == CT_DTYPE_COUNT || in.ndim > CT_MAX_DIMS || in.nbytes > (1u << 24)) continue;
    ct_tensor *t = ct_safetensors_get(f, in.name, CT_DEVICE_CPU);
    if (!t && ct_last_status() == CT_EUNSUPPORTED) continue; /* zero-size with dims past int64 */
    if (!t) {
      fprintf(stderr, "fuzz_safetensors: valid tensor \"%s\" did not load: %s\n", in.name, ct_last_error());
      abort();
    }
    ct_tensor_free(t);
  }
  for (int i = 0; i < ct_safetensors_metadata_count(f); i++) {
    const char *k, *v;
    if (ct_safetensors_metadata_at(f, i, &k, &v) != CT_OK || !k || !v) abort();
  }
  ct_safetensors_close(f);
  return 0;
}
