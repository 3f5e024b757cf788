/* src/io/tfrecord.h: TFRecord framing with masked CRC-32C, the container of TensorBoard's event
 * files (src/io/tfrecord.c). Internal: the summary writer, its tests and the fuzz target use it. */
#ifndef CUTTLE_IO_TFRECORD_H
#define CUTTLE_IO_TFRECORD_H

#include <stddef.h>
#include <stdint.h>
#include "core/internal.h"

/* CRC-32C (Castagnoli) of n bytes at buf, continuing crc: ct__crc32c(0, buf, n) is the CRC of buf,
 * and ct__crc32c(ct__crc32c(0, a, na), b, nb) the CRC of a followed by b. */
uint32_t ct__crc32c(uint32_t crc, const void *buf, size_t n);
/* TFRecord's masked CRC of buf: rotate the CRC-32C right by 15 bits and add 0xa282ead8. */
uint32_t ct__crc32c_masked(const void *buf, size_t n);

/* The 12 bytes before a record of len bytes (its length, little-endian u64, and the length's
 * masked CRC) into head, and the 4 bytes after it (the data's masked CRC) into tail. */
void ct__tfrecord_frame(const void *data, size_t len, uint8_t head[12], uint8_t tail[4]);

/* The record at *pos of the n bytes at buf: 1 with *rec and *len set and *pos moved past it; 0 at
 * the end (*pos == n); CT_EFORMAT with the error set (naming what, of which record at which byte)
 * for a truncated record, a length that does not fit, or a CRC that does not match. */
int ct__tfrecord_next(const uint8_t *buf, size_t n, size_t *pos, const uint8_t **rec, size_t *len);

#endif
