/* src/data/image_jpeg.c: JPEG decoding with libjpeg-turbo's libjpeg API (Debian's
 * libjpeg62-turbo, the library PIL links), to 8-bit gray or RGB pixels.
 *
 * The decoder keeps libjpeg's defaults (the accurate integer IDCT, fancy upsampling), which are
 * PIL's, so a file decodes to the bytes PIL gives. Grayscale files stay one channel; YCbCr and RGB
 * files become RGB; CMYK and YCCK files (Adobe's, stored inverted: PIL reads every 4-channel JPEG
 * as "CMYK;I") become RGB by PIL's cmyk2rgb (Convert.c): with c = 255 - stored and
 * nk = 255 - k, r = nk - c * nk / 255 (PIL's rounded MULDIV255). libjpeg's errors come back
 * through a longjmp with its message; its warnings are silent, except that a stream cut short
 * ("Premature end of JPEG file" before the last scanline, which libjpeg pads with gray) is an
 * error, as in PIL ("image file is truncated"); a file that lacks only its end marker decodes, as in
 * PIL. */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>
#include "data/data_internal.h"

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  int truncated;
  char reason[JMSG_LENGTH_MAX];
} errors;

static void on_error(j_common_ptr ci) {
  errors *e = (errors *)ci->err;
  ci->err->format_message(ci, e->reason);
  longjmp(e->jump, 1);
}

static void on_message(j_common_ptr ci, int level) {
  errors *e = (errors *)ci->err;
  if (level < 0 && ci->err->msg_code == JWRN_JPEG_EOF) e->truncated = 1;
}

/* PIL's MULDIV255: a * b / 255, rounded. */
static int muldiv255(int a, int b) {
  int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

static uint8_t clip8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

/* What setjmp's return must find intact lives here, not in registers. */
typedef struct {
  struct jpeg_decompress_struct ci;
  errors err;
  uint8_t *pixels, *row;
} state;

ct_status ct__jpeg_decode(const uint8_t *buf, size_t n, const char *name, int64_t max_pixels, ct_image *out, char *msg,
                          size_t msgn) {
  memset(out, 0, sizeof *out);
  state *st = calloc(1, sizeof *st);
  if (!st) return snprintf(msg, msgn, "%s: out of memory decoding the JPEG", name), CT_ENOMEM;
  volatile ct_status status = CT_EFORMAT; /* volatile: read after the longjmp */
  st->ci.err = jpeg_std_error(&st->err.pub);
  st->err.pub.error_exit = on_error;
  st->err.pub.emit_message = on_message;
  if (setjmp(st->err.jump)) {
    snprintf(msg, msgn, "%s: not a valid JPEG: %s", name, st->err.reason);
    goto done;
  }
  jpeg_create_decompress(&st->ci);
  jpeg_mem_src(&st->ci, buf, (unsigned long)n);
  jpeg_read_header(&st->ci, TRUE);
  struct jpeg_decompress_struct *ci = &st->ci;
  if ((int64_t)ci->image_width * ci->image_height > max_pixels) {
    snprintf(msg, msgn, "%s: the JPEG is %ux%u, more than the %lld pixels an image may have", name,
             (unsigned)ci->image_width, (unsigned)ci->image_height, (long long)max_pixels);
    goto done;
  }
  int cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
  ci->out_color_space = ci->jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(ci);
  int64_t w = ci->output_width, h = ci->output_height;
  int comps = ci->output_components, c = cmyk ? 3 : comps;
  if (comps != (cmyk ? 4 : ci->out_color_space == JCS_GRAYSCALE ? 1 : 3)) {
    snprintf(msg, msgn, "%s: unexpected JPEG layout (%d components)", name, comps);
    goto done;
  }
  st->pixels = malloc((size_t)(h * w * c > 0 ? h * w * c : 1));
  st->row = malloc((size_t)(w * comps > 0 ? w * comps : 1));
  if (!st->pixels || !st->row) {
    status = CT_ENOMEM;
    snprintf(msg, msgn, "%s: out of memory for a %lldx%lld image", name, (long long)w, (long long)h);
    goto done;
  }
  while (ci->output_scanline < ci->output_height) {
    int64_t y = ci->output_scanline;
    JSAMPROW row = cmyk ? st->row : st->pixels + y * w * c;
    if (jpeg_read_scanlines(ci, &row, 1) != 1) break;
    for (int64_t x = 0; cmyk && x < w; x++) {
      const uint8_t *s = st->row + x * 4;
      uint8_t *d = st->pixels + (y * w + x) * 3;
      int nk = s[3]; /* 255 - k, k = 255 - stored */
      for (int k = 0; k < 3; k++) d[k] = clip8(nk - muldiv255(255 - s[k], nk));
    }
  }
  if (st->err.truncated || ci->output_scanline < ci->output_height) {
    snprintf(msg, msgn, "%s: not a valid JPEG: the file is truncated (premature end of the JPEG data)", name);
    goto done;
  }
  jpeg_finish_decompress(ci); /* a missing end marker after the last scanline is tolerated, as PIL does */
  out->h = h, out->w = w, out->c = c, out->data = st->pixels;
  st->pixels = NULL;
  status = CT_OK;
done:
  jpeg_destroy_decompress(&st->ci);
  free(st->pixels);
  free(st->row);
  free(st);
  return status;
}
