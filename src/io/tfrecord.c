/* src/io/tfrecord.c: TFRecord framing and CRC-32C.
 *
 * A TFRecord file is a sequence of records, each (TensorFlow's tensorflow/core/lib/io/
 * record_writer.h, which TensorBoard's reader tensorboard/compat/tensorflow_stub/pywrap_tensorflow.py
 * follows):
 *   uint64 length (little-endian) | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)
 * masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 with c = crc32c(x) (tensorflow/tsl/lib/
 * hash/crc32c.h: Mask, kMaskDelta); the rotation keeps a CRC of data that holds CRCs from being
 * a CRC of itself.
 *
 * CRC-32C is the CRC with the Castagnoli polynomial 0x1EDC6F41, here in its reflected form
 * 0x82F63B78, initial value and final XOR 0xFFFFFFFF, as in iSCSI (RFC 3720, section 12.1 and the
 * test vectors of appendix B.4, which tests/io/test_tensorboard.c checks). zlib's crc32 uses another
 * polynomial (0xEDB88320) and Debian 12 packages no C library of CRC-32C, so this is the classic
 * byte-at-a-time table algorithm (Sarwate, "Computation of cyclic redundancy checks via table
 * look-up", CACM 31(8), 1988). Event files are small; speed does not matter here. */
#include <pthread.h>
#include <string.h>

#include "io/tfrecord.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "src/io/tfrecord.c assumes a little-endian host (TFRecord lengths and CRCs are little-endian)"
#endif

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
}

uint32_t ct__crc32c(uint32_t crc, const void *buf, size_t n) {
  pthread_once(&table_once, table_init);
  const uint8_t *p = buf;
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t ct__crc32c_masked(const void *buf, size_t n) {
  uint32_t c = ct__crc32c(0, buf, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

void ct__tfrecord_frame(const void *data, size_t len, uint8_t head[12], uint8_t tail[4]) {
  uint64_t l = len;
  memcpy(head, &l, 8);
  uint32_t c = ct__crc32c_masked(head, 8);
  memcpy(head + 8, &c, 4);
  c = ct__crc32c_masked(data, len);
  memcpy(tail, &c, 4);
}

int ct__tfrecord_next(const uint8_t *buf, size_t n, size_t *pos, const uint8_t **rec, size_t *len) {
  size_t at = *pos;
  if (at >= n) return 0;
  if (n - at < 12)
    return ct__error(CT_EFORMAT, "TFRecord: a record at byte %zu is cut short: %zu bytes where its 12-byte header belongs", at,
                     n - at);
  uint64_t l;
  uint32_t c;
  memcpy(&l, buf + at, 8);
  memcpy(&c, buf + at + 8, 4);
  if (c != ct__crc32c_masked(buf + at, 8))
    return ct__error(CT_EFORMAT, "TFRecord: the length CRC of the record at byte %zu does not match (corrupt file)", at);
  if (l > n - at - 12 || n - at - 12 - l < 4)
    return ct__error(CT_EFORMAT, "TFRecord: the record at byte %zu says %llu bytes; only %zu follow (a truncated file)", at,
                     (unsigned long long)l, n - at - 12);
  memcpy(&c, buf + at + 12 + l, 4);
  if (c != ct__crc32c_masked(buf + at + 12, (size_t)l))
    return ct__error(CT_EFORMAT, "TFRecord: the data CRC of the record at byte %zu does not match (corrupt file)", at);
  *rec = buf + at + 12;
  *len = (size_t)l;
  *pos = at + 12 + (size_t)l + 4;
  return 1;
}
