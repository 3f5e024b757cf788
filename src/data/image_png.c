/* src/data/image_png.c: PNG decoding with libpng's classic API, to 8-bit gray or RGB pixels.
 *
 * The conversions follow what PIL does when torchvision's ImageFolder loader opens a PNG and calls
 * convert("RGB") (or "L"): a palette is expanded to its colours and low bit depths to 8 bits
 * (png_set_expand), 16-bit samples keep their high byte (png_set_strip_16, as PIL's "RGB;16B"
 * unpacker), alpha and tRNS transparency are dropped, not composited (png_set_strip_alpha), and no
 * gamma is applied (PIL applies none). Gray stays one channel and colour three; image.c converts
 * between them. Errors (a corrupt or truncated stream, a CRC error in a critical chunk) come back
 * through png_error's longjmp with libpng's message; nothing is printed. */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include "data/data_internal.h"

typedef struct {
  const uint8_t *buf;
  size_t n, pos;
  char reason[256]; /* libpng's message */
} reader;

static void on_error(png_structp p, png_const_charp msg) {
  reader *r = png_get_error_ptr(p);
  snprintf(r->reason, sizeof r->reason, "%s", msg);
  png_longjmp(p, 1);
}

static void on_warning(png_structp p, png_const_charp msg) { (void)p, (void)msg; }

static void read_mem(png_structp p, png_bytep out, png_size_t len) {
  reader *r = png_get_io_ptr(p);
  if (len > r->n - r->pos) png_error(p, "truncated file (the stream ends inside a chunk)");
  memcpy(out, r->buf + r->pos, len);
  r->pos += len;
}

/* What setjmp's return must find intact lives here, not in registers. */
typedef struct {
  png_structp png;
  png_infop info;
  uint8_t *pixels;
  png_bytep *rows;
} state;

ct_status ct__png_decode(const uint8_t *buf, size_t n, const char *name, int64_t max_pixels, ct_image *out, char *msg,
                         size_t msgn) {
  memset(out, 0, sizeof *out);
  reader r = {buf, n, 0, ""};
  state *st = calloc(1, sizeof *st);
  if (!st) return snprintf(msg, msgn, "%s: out of memory decoding the PNG", name), CT_ENOMEM;
  st->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, on_error, on_warning);
  st->info = st->png ? png_create_info_struct(st->png) : NULL;
  if (!st->info) {
    png_destroy_read_struct(st->png ? &st->png : NULL, NULL, NULL);
    free(st);
    return snprintf(msg, msgn, "%s: out of memory decoding the PNG", name), CT_ENOMEM;
  }
  volatile ct_status status = CT_EFORMAT; /* volatile: read after the longjmp */
  if (setjmp(png_jmpbuf(st->png))) {
    snprintf(msg, msgn, "%s: not a valid PNG: %s", name, r.reason[0] ? r.reason : "libpng error");
    goto done;
  }
  png_set_read_fn(st->png, &r, read_mem);
  png_set_user_limits(st->png, 1u << 24, 1u << 24);
  png_read_info(st->png, st->info);
  png_uint_32 w = 0, h = 0;
  int depth = 0, color = 0, interlace = 0;
  png_get_IHDR(st->png, st->info, &w, &h, &depth, &color, &interlace, NULL, NULL);
  if ((int64_t)w * h > max_pixels) {
    snprintf(msg, msgn, "%s: the PNG is %ux%u, more than the %lld pixels an image may have", name, (unsigned)w,
             (unsigned)h, (long long)max_pixels);
    goto done;
  }
  png_set_expand(st->png);
  png_set_strip_16(st->png);
  png_set_strip_alpha(st->png);
  png_set_interlace_handling(st->png);
  png_read_update_info(st->png, st->info);
  int c = png_get_channels(st->png, st->info);
  size_t rowbytes = png_get_rowbytes(st->png, st->info);
  if ((c != 1 && c != 3) || rowbytes != (size_t)w * c) {
    snprintf(msg, msgn, "%s: unexpected PNG layout after conversion (%d channels, %zu bytes a row)", name, c, rowbytes);
    goto done;
  }
  st->pixels = malloc((size_t)h * rowbytes > 0 ? (size_t)h * rowbytes : 1);
  st->rows = malloc((size_t)(h > 0 ? h : 1) * sizeof(png_bytep));
  if (!st->pixels || !st->rows) {
    status = CT_ENOMEM;
    snprintf(msg, msgn, "%s: out of memory for a %ux%u image", name, (unsigned)w, (unsigned)h);
    goto done;
  }
  for (png_uint_32 y = 0; y < h; y++) st->rows[y] = st->pixels + (size_t)y * rowbytes;
  png_read_image(st->png, st->rows);
  out->h = h, out->w = w, out->c = c, out->data = st->pixels;
  st->pixels = NULL;
  status = CT_OK;
done:
  png_destroy_read_struct(&st->png, &st->info, NULL);
  free(st->pixels);
  free(st->rows);
  free(st);
  return status;
}
