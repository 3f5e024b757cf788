/* tests/fuzz/fuzz_tfevents.c: fuzz target for the event-file reader path: TFRecord framing with
 * masked CRC-32C (src/io/tfrecord.c) and protobuf-c's unpacking of TensorBoard's Event messages
 * (src/io/tensorboard.proto, as tests/io/test_tensorboard.c reads the writer's files back).
 * The first byte picks the mode, so that mutations reach the message parser past the CRCs:
 *  - even: the rest is a TFRecord stream; every record must be framed inside the input, and each
 *    intact record is unpacked as an Event;
 *  - odd: the rest is one Event message, unpacked directly, and when it unpacks, packed again and
 *    framed, and the frame must read back as exactly those bytes.
 * Never a crash, a leak or a read out of bounds; a refusal is CT_EFORMAT only. Built with
 * tests/fuzz/replay_main.c under CTest over tests/fuzz/corpus/fuzz_tfevents/, or with
 * -fsanitize=fuzzer by scripts/fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/tfrecord.h"
#include "tensorboard.pb-c.h"

static void unpack(const uint8_t *p, size_t n) {
  Tensorboard__Event *e = tensorboard__event__unpack(NULL, n, p);
  if (!e) return;
  size_t len = tensorboard__event__get_packed_size(e);
  uint8_t *buf = malloc(12 + len + 4);
  if (!buf) abort();
  if (tensorboard__event__pack(e, buf + 12) != len) abort();
  ct__tfrecord_frame(buf + 12, len, buf, buf + 12 + len);
  size_t pos = 0, rlen;
  const uint8_t *rec;
  if (ct__tfrecord_next(buf, 12 + len + 4, &pos, &rec, &rlen) != 1 || rlen != len || rec != buf + 12 || pos != 12 + len + 4)
    abort();
  free(buf);
  tensorboard__event__free_unpacked(e, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const uint8_t *p = data + 1;
  size_t n = size - 1;
  if (data[0] & 1) {
    unpack(p, n);
    return 0;
  }
  size_t pos = 0, len;
  const uint8_t *rec;
  int r;
  while ((r = ct__tfrecord_next(p, n, &pos, &rec, &len)) == 1) {
    if (rec < p || rec + len > p + n || pos > n) abort();
    unpack(rec, len);
  }
  if (r != 0 && ct_last_status() != CT_EFORMAT) {
    fprintf(stderr, "fuzz_tfevents: unexpected status %d: %s\n", r, ct_last_error());
    abort();
  }
  return 0;
}
