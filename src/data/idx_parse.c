/* src/data/idx_parse.c: the IDX parser over a memory buffer (no I/O, so the fuzz target calls it).
 *
 * Format (http://yann.lecun.com/exdb/mnist/, "FILE FORMATS FOR THE MNIST DATABASE"):
 *   bytes 0-1  zero
 *   byte  2    type code: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64
 *   byte  3    number of dimensions d
 *   then d big-endian uint32 sizes, then prod(sizes) elements, row-major, big-endian.
 * The file must end exactly where the data ends. */
#include <string.h>
#include "data/data_internal.h"

size_t ct_idx_type_size(int type) {
  switch (type) {
    case CT_IDX_U8:
    case CT_IDX_I8:
      return 1;
    case CT_IDX_I16:
      return 2;
    case CT_IDX_I32:
    case CT_IDX_F32:
      return 4;
    case CT_IDX_F64:
      return 8;
  }
  return 0;
}

static uint32_t be32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

ct_status ct__idx_parse_header(const uint8_t *buf, size_t n, const char *name, ct_idx *out, size_t *data_offset) {
  if (!name) name = "<buffer>";
  memset(out, 0, sizeof *out);
  if (n < 4)
    return ct__error(CT_EFORMAT, "%s: not an IDX file: truncated header: %zu bytes, shorter than the 4-byte magic", name, n);
  uint32_t magic = be32(buf);
  if (buf[0] != 0 || buf[1] != 0)
    return ct__error(CT_EFORMAT,
                     "%s: not an IDX file: wrong magic 0x%08x (an IDX magic is two zero bytes, a type code and "
                     "the number of dimensions, e.g. 0x00000803 for u8 images, 0x00000801 for u8 labels); "
                     "a gzip file that was not decompressed starts with 0x1f8b",
                     name, (unsigned)magic);
  size_t es = ct_idx_type_size(buf[2]);
  if (es == 0)
    return ct__error(CT_EFORMAT,
                     "%s: IDX magic 0x%08x has an unknown type code 0x%02x (known: 0x08 u8, 0x09 i8, 0x0B i16, "
                     "0x0C i32, 0x0D f32, 0x0E f64)",
                     name, (unsigned)magic, buf[2]);
  int ndim = buf[3];
  if (ndim == 0)
    return ct__error(CT_EFORMAT, "%s: IDX magic 0x%08x declares 0 dimensions (at least 1 is needed)", name,
                     (unsigned)magic);
  if (ndim > CT_IDX_MAX_DIMS)
    return ct__error(CT_EFORMAT, "%s: IDX magic 0x%08x declares %d dimensions, more than %d dimensions are not supported",
                     name, (unsigned)magic, ndim, CT_IDX_MAX_DIMS);
  size_t header = 4 + 4 * (size_t)ndim;
  if (n < header)
    return ct__error(CT_EFORMAT, "%s: truncated header: %d dimensions need %zu header bytes, the file has %zu", name,
                     ndim, header, n);
  uint64_t numel = 1;
  int overflow = 0;
  for (int d = 0; d < ndim; d++) {
    out->shape[d] = be32(buf + 4 + 4 * d);
    overflow |= __builtin_mul_overflow(numel, (uint64_t)out->shape[d], &numel);
  }
  uint64_t nbytes = 0;
  overflow |= __builtin_mul_overflow(numel, (uint64_t)es, &nbytes);
  char shape[160];
  ct__shape_str(ndim, out->shape, shape, sizeof shape);
  size_t avail = n - header;
  if (overflow || nbytes > avail)
    return ct__error(CT_EFORMAT, "%s: truncated data: the header says shape %s of %zu-byte elements (%s%llu bytes), the file has %zu bytes after the header",
                     name, shape, es, overflow ? "more than " : "", overflow ? 18446744073709551615ull : (unsigned long long)nbytes, avail);
  if (nbytes < avail)
    return ct__error(CT_EFORMAT, "%s: size disagrees with the header: %zu trailing bytes after the data (shape %s of %zu-byte elements is %llu bytes, the file has %zu after the header)",
                     name, avail - (size_t)nbytes, shape, es, (unsigned long long)nbytes, avail);
  out->magic = magic;
  out->type = (ct_idx_type)buf[2];
  out->ndim = ndim;
  out->elem_size = es;
  out->numel = (int64_t)numel;
  out->nbytes = (size_t)nbytes;
  *data_offset = header;
  return CT_OK;
}

void ct__idx_to_host(void *dst, const void *src, size_t count, size_t elem_size) {
  if (dst != src) memmove(dst, src, count * elem_size);
  if (elem_size == 1) return;
  uint8_t *p = dst;
  for (size_t i = 0; i < count; i++, p += elem_size)
    for (size_t a = 0, b = elem_size - 1; a < b; a++, b--) {
      uint8_t t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

ct_status ct_idx_parse(const uint8_t *buf, size_t n, const char *name, ct_idx *out) {
  if (!out) return ct__error(CT_EINVAL, "ct_idx_parse: out is NULL");
  memset(out, 0, sizeof *out);
  if (!buf && n > 0) return ct__error(CT_EINVAL, "ct_idx_parse: buf is NULL with n = %zu", n);
  static const uint8_t empty[1];
  if (!buf) buf = empty;
  size_t off = 0;
  ct_idx h;
  ct_status s = ct__idx_parse_header(buf, n, name, &h, &off);
  if (s != CT_OK) return s;
  h.data = malloc(h.nbytes ? h.nbytes : 1);
  if (!h.data) return ct__error(CT_ENOMEM, "%s: out of memory for %zu bytes of IDX data", name ? name : "<buffer>", h.nbytes);
  ct__idx_to_host(h.data, buf + off, (size_t)h.numel, h.elem_size);
  *out = h;
  return CT_OK;
}

void ct_idx_free(ct_idx *idx) {
  if (!idx) return;
  free(idx->data);
  memset(idx, 0, sizeof *idx);
}
