/* tests/fuzz/fuzz_image.c: fuzz target for the image decoding path of the image-folder dataset:
 * the PNG (libpng) and JPEG (libjpeg) decoders behind ct_image_decode, in both modes, then the
 * resize and the center crop that bring a sample to its size. Any input must either decode, into
 * an image whose every byte is readable and whose sizes are sane, or fail with CT_EFORMAT (or
 * CT_ENOMEM) and a message naming the input, leaving nothing allocated; never crash, hang or read
 * out of bounds. Images are capped at 2^20 pixels here so the fuzzer stays fast (the library's cap
 * is CT_IMAGE_MAX_PIXELS). Built with a replay main under CTest (corpus:
 * tests/fuzz/corpus/fuzz_image/) and with libFuzzer by scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "data/data_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  for (int mode = 0; mode < 2; mode++) {
    ct_image im;
    char msg[1024] = "";
    ct_status s = ct__image_decode(data, size, "fuzz", (ct_image_mode)mode, (int64_t)1 << 20, &im, msg, sizeof msg);
    if (s != CT_OK) {
      if ((s != CT_EFORMAT && s != CT_ENOMEM) || im.data || !strstr(msg, "fuzz")) abort();
      continue;
    }
    if (!im.data || im.h < 1 || im.w < 1 || im.h * im.w > ((int64_t)1 << 20) || im.c != (mode ? 1 : 3)) abort();
    volatile uint8_t sum = 0;
    for (int64_t i = 0; i < im.h * im.w * im.c; i++) sum += im.data[i];
    (void)sum;
    /* the sample path: Resize to a few sizes (up and down), CenterCrop with padding */
    ct_image r;
    int64_t sizes[3][2] = {{1, 1}, {im.h / 2 + 1, im.w * 2 > 64 ? 64 : im.w * 2}, {7, 5}};
    for (int k = 0; k < 3; k++) {
      if (ct__image_resize(&im, sizes[k][0], sizes[k][1], &r, msg, sizeof msg) != CT_OK) continue;
      uint8_t crop[3 * 9 * 6];
      ct__image_center_crop_chw(&r, 9, 6, crop);
      ct_image_free(&r);
    }
    ct_image_free(&im);
  }
  return 0;
}
