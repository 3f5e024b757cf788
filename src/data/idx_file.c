/* src/data/idx_file.c: reading an IDX file from disk, gzipped or raw, then parsing it in place.
 *
 * zlib's gzopen/gzread read both: a file that does not start with the gzip magic is passed through
 * unchanged, so "train-images-idx3-ubyte.gz" and "train-images-idx3-ubyte" take the same path. The
 * whole file is read into one growing buffer; the data is then moved to the start of that buffer
 * and byte-swapped in place, so a 47 MB image file costs 47 MB, not twice that. */
#include <errno.h>
#include <string.h>
#include <zlib.h>
#include "data/data_internal.h"

/* Read all of path into a malloc'd buffer (*buf, *n). */
static ct_status read_all(const char *path, uint8_t **buf, size_t *n) {
  *buf = NULL;
  *n = 0;
  errno = 0;
  gzFile f = gzopen(path, "rb");
  if (!f)
    return ct__error(CT_EIO, "%s: cannot open: %s", path, errno ? strerror(errno) : "out of memory in zlib");
  gzbuffer(f, 1 << 17);
  size_t cap = 1 << 20, len = 0;
  uint8_t *b = malloc(cap);
  if (!b) {
    gzclose_r(f);
    return ct__error(CT_ENOMEM, "%s: out of memory reading the file", path);
  }
  for (;;) {
    if (len == cap) {
      if (cap > SIZE_MAX / 2) {
        free(b);
        gzclose_r(f);
        return ct__error(CT_ENOMEM, "%s: file too large", path);
      }
      uint8_t *nb = realloc(b, cap * 2);
      if (!nb) {
        free(b);
        gzclose_r(f);
        return ct__error(CT_ENOMEM, "%s: out of memory reading the file (%zu bytes so far)", path, len);
      }
      b = nb, cap *= 2;
    }
    size_t want = cap - len;
    if (want > (1u << 30)) want = 1u << 30; /* gzread takes an unsigned and returns an int */
    int got = gzread(f, b + len, (unsigned)want);
    if (got < 0) {
      int zerr = 0;
      const char *msg = gzerror(f, &zerr);
      ct_status s = zerr == Z_ERRNO ? ct__error(CT_EIO, "%s: read error: %s", path, strerror(errno))
                                    : ct__error(CT_EFORMAT, "%s: corrupt gzip stream: %s", path, msg);
      free(b);
      gzclose_r(f);
      return s;
    }
    if (got == 0) break;
    len += (size_t)got;
  }
  /* A gzip stream cut short reads as a clean end of file with Z_BUF_ERROR left behind. */
  int zerr = 0;
  const char *msg = gzerror(f, &zerr);
  if (zerr != Z_OK) {
    ct_status s = ct__error(CT_EFORMAT, "%s: truncated or corrupt gzip stream: %s", path, msg);
    free(b);
    gzclose_r(f);
    return s;
  }
  int rc = gzclose_r(f);
  if (rc != Z_OK) {
    free(b);
    return ct__error(rc == Z_BUF_ERROR ? CT_EFORMAT : CT_EIO, "%s: truncated gzip stream (gzclose: %d)", path, rc);
  }
  *buf = b;
  *n = len;
  return CT_OK;
}

ct_status ct_idx_load(const char *path, ct_idx *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!path || !out) return ct__error(CT_EINVAL, "ct_idx_load: %s is NULL", path ? "out" : "path");
  uint8_t *buf;
  size_t n;
  ct_status s = read_all(path, &buf, &n);
  if (s != CT_OK) return s;
  ct_idx h;
  size_t off = 0;
  s = ct__idx_parse_header(buf, n, path, &h, &off);
  if (s != CT_OK) {
    free(buf);
    return s;
  }
  ct__idx_to_host(buf, buf + off, (size_t)h.numel, h.elem_size);
  uint8_t *shrunk = realloc(buf, h.nbytes ? h.nbytes : 1);
  h.data = shrunk ? shrunk : buf;
  *out = h;
  return CT_OK;
}

ct_tensor *ct_idx_to_tensor(const ct_idx *idx, ct_device dev) {
  if (!idx || !idx->data || idx->ndim < 1) CT_FAIL_NULL(CT_EINVAL, "ct_idx_to_tensor: %s", idx ? "the ct_idx is empty (freed or never parsed)" : "idx is NULL");
  /* A ct_idx the caller filled in by hand must still describe its data: a known type, a valid
   * shape whose element count is numel, and nbytes for them, so nothing is read past data. */
  int64_t numel;
  size_t es = ct_idx_type_size(idx->type);
  if (!es) CT_FAIL_NULL(CT_EINVAL, "ct_idx_to_tensor: unknown IDX type code 0x%02x", (unsigned)idx->type);
  if (!ct__checked_numel("ct_idx_to_tensor", idx->ndim, idx->shape, &numel)) return NULL;
  if (numel != idx->numel || (uint64_t)numel > SIZE_MAX / es || (size_t)numel * es != idx->nbytes)
    CT_FAIL_NULL(CT_EINVAL, "ct_idx_to_tensor: the shape holds %lld elements but the ct_idx says numel %lld and nbytes %zu "
                 "(pass a ct_idx from ct_idx_parse or ct_idx_load)", (long long)numel, (long long)idx->numel, idx->nbytes);
  if (!ct__check_device("ct_idx_to_tensor", dev)) return NULL;
  if (idx->type == CT_IDX_U8) return ct_from_host(idx->data, idx->ndim, idx->shape, CT_U8, dev);
  if (idx->type == CT_IDX_I32) return ct_from_host(idx->data, idx->ndim, idx->shape, CT_I32, dev);
  if (idx->type == CT_IDX_F32) return ct_from_host(idx->data, idx->ndim, idx->shape, CT_F32, dev);
  if (idx->type == CT_IDX_F64) return ct_from_host(idx->data, idx->ndim, idx->shape, CT_F64, dev);
  /* i8 and i16: widen to int32 (cuttle has no int8/int16 dtype). */
  int32_t *wide = malloc((size_t)(idx->numel > 0 ? idx->numel : 1) * sizeof(int32_t));
  if (!wide) CT_FAIL_NULL(CT_ENOMEM, "ct_idx_to_tensor: out of memory for %lld int32 values", (long long)idx->numel);
  for (int64_t i = 0; i < idx->numel; i++) {
    if (idx->type == CT_IDX_I8) {
      wide[i] = ((const int8_t *)idx->data)[i];
    } else {
      wide[i] = ((const int16_t *)idx->data)[i];
    }
  }
  ct_tensor *t = ct_from_host(wide, idx->ndim, idx->shape, CT_I32, dev);
  free(wide);
  return t;
}
