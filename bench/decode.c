/* bench/decode.c: `cuttle bench decode`: how many images per second the image-folder dataset
 * (ct_imagefolder_load, cuttle/datasets.h) decodes, per reader and per worker thread.
 *
 * It writes image folders into a temporary directory (root/<class>/<i>.png|.jpg, removed after
 * unless --keep), then reads each:
 *   - "fmnist png": the first --fmnist-count Fashion-MNIST test images as 28 x 28 grayscale PNGs
 *     (libpng's defaults), opened in CT_IMAGE_GRAY mode: the data of `cuttle train` as files;
 *   - "synthetic png" and "synthetic jpeg": --count RGB images of --size x --size pixels, a smooth
 *     pattern plus uniform noise of +-12 per channel (so neither coder finds them trivially
 *     compressible; a photo's statistics differ), PNG (libpng's defaults) and baseline JPEG of
 *     quality 90 (libjpeg's defaults, 4:2:0), opened in CT_IMAGE_RGB mode without resize or crop.
 * The files are in the page cache when timed (just written, then read once untimed), so the
 * figures are decode throughput, not disk throughput. Each folder is read by:
 *   - "ct_image_load": the decoder alone, file by file, in the calling thread;
 *   - "ct_dataset_get": a sample as the loader makes it (decode, to float32 CHW, normalize), in the
 *     calling thread;
 *   - "loader": ct_loader over the whole folder, batch --batch-size, in order, with each of
 *     --workers worker threads (0: in the calling thread), an epoch timed from its first
 *     ct_loader_next to the end.
 * Each figure is the median of --repeats passes over the folder after one untimed pass; images/s
 * per worker divides by the workers (by 1 for the calling thread); CPU us/image is the process's CPU
 * time (all its threads, CLOCK_PROCESS_CPUTIME_ID) per image, which other processes on a shared
 * machine disturb less than the wall clock. --pytorch adds the same folders
 * read by torchvision.datasets.ImageFolder (PIL) through torch.utils.data.DataLoader with the same
 * workers (bench/pytorch_decode.py, ToTensor; Grayscale(1) for fmnist). */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <jpeglib.h>
#include <png.h>
#include "bench.h"

#ifndef CUTTLE_SOURCE_DIR
#define CUTTLE_SOURCE_DIR "."
#endif

static int usage(FILE *f) {
  fprintf(f, "usage: cuttle bench decode [--count N] [--size HW] [--fmnist-count N] [--data-dir DIR] [--workers LIST]\n"
             "                           [--batch-size N] [--repeats N] [--dir DIR] [--keep] [--pytorch] [--python PATH]\n"
             "                           [--script FILE] [--quick] [--csv FILE]\n"
             "image-folder decode throughput (images/s, and per worker): Fashion-MNIST test images as 28x28 gray PNGs,\n"
             "synthetic RGB PNGs and JPEGs (quality 90) of HW x HW; read by ct_image_load, ct_dataset_get and ct_loader\n"
             "defaults: --count 1000 --size 224 --fmnist-count 10000 --workers 0,1,2 --batch-size 64 --repeats 3\n"
             "          --dir: a new directory under $TMPDIR or /tmp; --fmnist-count 0 leaves Fashion-MNIST out\n"
             "          --python python3 --script %s/bench/pytorch_decode.py\n"
             "--quick: --count 100 --fmnist-count 1000 --repeats 1\n",
          CUTTLE_SOURCE_DIR);
  return f == stdout ? 0 : 2;
}

/* ---- writing the folders */

static int mkdirs(const char *dir) {
  char p[4096];
  snprintf(p, sizeof p, "%s/", dir);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      if (mkdir(p, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "cuttle bench decode: mkdir %s: %s\n", p, strerror(errno));
        return 1;
      }
      *s = '/';
    }
  return 0;
}

static int write_png(const char *path, const uint8_t *data, int h, int w, int c) {
  png_image im;
  memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  im.width = (png_uint_32)w, im.height = (png_uint_32)h;
  im.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  int ok = png_image_write_to_file(&im, path, 0, data, 0, NULL);
  if (!ok) fprintf(stderr, "cuttle bench decode: writing %s: %s\n", path, im.message);
  png_image_free(&im);
  return !ok;
}

static int write_jpeg(const char *path, const uint8_t *data, int h, int w, int c, int quality) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cuttle bench decode: %s: %s\n", path, strerror(errno));
    return 1;
  }
  struct jpeg_compress_struct ci;
  struct jpeg_error_mgr err;
  ci.err = jpeg_std_error(&err);
  jpeg_create_compress(&ci);
  jpeg_stdio_dest(&ci, f);
  ci.image_width = (JDIMENSION)w, ci.image_height = (JDIMENSION)h;
  ci.input_components = c;
  ci.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&ci);
  jpeg_set_quality(&ci, quality, TRUE);
  jpeg_start_compress(&ci, TRUE);
  while (ci.next_scanline < ci.image_height) {
    JSAMPROW row = (JSAMPROW)(data + (size_t)ci.next_scanline * (size_t)w * (size_t)c);
    jpeg_write_scanlines(&ci, &row, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  return fclose(f) != 0;
}

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Synthetic image i: (n, n, 3) HWC, a smooth pattern plus noise in [-12, 12]. */
static void synth(uint8_t *p, int n, int i, uint64_t *rng) {
  double fx = 0.02 + 0.01 * (i % 7), fy = 0.015 + 0.01 * (i % 5);
  for (int r = 0; r < n; r++)
    for (int x = 0; x < n; x++)
      for (int k = 0; k < 3; k++) {
        double v = 128 + 60 * sin(fx * x + 1.3 * k + i) + 50 * cos(fy * r + 0.7 * k) + 20 * sin(0.003 * (x * r));
        int q = (int)v + (int)(rng_next(rng) % 25) - 12;
        p[((size_t)r * (size_t)n + (size_t)x) * 3 + (size_t)k] = (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q);
      }
}

typedef struct {
  char name[48], root[4096];
  int gray, n, h, w;
  int64_t bytes; /* of the files */
} folder;

static int64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* The first n Fashion-MNIST test images as PNGs under f->root. */
static int make_fmnist(folder *f, const char *data_dir, int n) {
  ct_dataset *ds = ct_fashion_mnist_load(data_dir, CT_SPLIT_TEST);
  if (!ds) {
    fprintf(stderr, "cuttle bench decode: %s (the Fashion-MNIST folder is left out)\n", ct_last_error());
    return 1;
  }
  if (n > ct_dataset_len(ds)) n = (int)ct_dataset_len(ds);
  const uint8_t *px = ct_dataset_pixels(ds);
  const int64_t *lab = ct_dataset_labels(ds);
  int rc = 0;
  for (int c = 0; c < 10 && !rc; c++) {
    char d[4200];
    snprintf(d, sizeof d, "%s/%d", f->root, c);
    rc = mkdirs(d);
  }
  for (int i = 0; i < n && !rc; i++) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%lld/%05d.png", f->root, (long long)lab[i], i);
    rc = write_png(p, px + (size_t)i * 784, 28, 28, 1);
    f->bytes += file_size(p);
  }
  ct_dataset_free(ds);
  snprintf(f->name, sizeof f->name, "fmnist png");
  f->gray = 1, f->n = n, f->h = f->w = 28;
  return rc;
}

/* n synthetic RGB images of size x size under f->root, in 10 classes, as PNG or JPEG q90. */
static int make_synth(folder *f, int n, int size, int jpeg) {
  uint8_t *p = malloc((size_t)size * (size_t)size * 3);
  if (!p) return 1;
  uint64_t rng = 12345;
  int rc = 0;
  for (int c = 0; c < 10 && !rc; c++) {
    char d[4200];
    snprintf(d, sizeof d, "%s/%d", f->root, c);
    rc = mkdirs(d);
  }
  for (int i = 0; i < n && !rc; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%d/%05d.%s", f->root, i % 10, i, jpeg ? "jpg" : "png");
    synth(p, size, i, &rng);
    rc = jpeg ? write_jpeg(path, p, size, size, 3, 90) : write_png(path, p, size, size, 3);
    f->bytes += file_size(path);
  }
  free(p);
  snprintf(f->name, sizeof f->name, "synthetic %s", jpeg ? "jpeg q90" : "png");
  f->gray = 0, f->n = n, f->h = f->w = size;
  return rc;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

/* ---- reading them */

typedef struct {
  ct_dataset *ds;
  ct_image_mode mode;
  int workers, batch;
  float *x;
} read_ctx;

static int pass_image_load(void *p) {
  read_ctx *c = p;
  for (int64_t i = 0; i < ct_dataset_len(c->ds); i++) {
    ct_image im;
    if (ct_image_load(ct_dataset_sample_path(c->ds, i), c->mode, &im) != CT_OK) return 1;
    ct_image_free(&im);
  }
  return 0;
}

static int pass_get(void *p) {
  read_ctx *c = p;
  for (int64_t i = 0; i < ct_dataset_len(c->ds); i++) {
    int64_t y;
    if (ct_dataset_get(c->ds, i, c->x, &y) != CT_OK) return 1;
  }
  return 0;
}

static int pass_loader(void *p) {
  read_ctx *c = p;
  ct_loader_opts lo = {.batch_size = c->batch, .num_workers = c->workers};
  ct_loader *l = ct_loader_new(c->ds, &lo);
  if (!l) return 1;
  ct_tensor *x, *y;
  int r;
  while ((r = ct_loader_next(l, &x, &y)) == 1) ct_tensor_free(x), ct_tensor_free(y);
  ct_loader_free(l);
  return r != 0;
}

/* CPU seconds of the whole process (every thread), for a figure the other processes of a shared
 * machine disturb less than the wall clock. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One untimed pass, then `repeats` timed ones: the median wall seconds and CPU seconds of a pass.
 * 0, or 1 when a pass failed. */
static int time_passes(ct_bench_fn fn, void *ctx, int repeats, double *wall, double *cpu) {
  if (fn(ctx)) return 1;
  double w[64], c[64];
  if (repeats > 64) repeats = 64;
  for (int i = 0; i < repeats; i++) {
    double t0 = ct_bench_now(), c0 = cpu_now();
    if (fn(ctx)) return 1;
    c[i] = cpu_now() - c0, w[i] = ct_bench_now() - t0;
  }
  qsort(w, (size_t)repeats, sizeof *w, cmp_double), qsort(c, (size_t)repeats, sizeof *c, cmp_double);
  *wall = repeats % 2 ? w[repeats / 2] : 0.5 * (w[repeats / 2 - 1] + w[repeats / 2]);
  *cpu = repeats % 2 ? c[repeats / 2] : 0.5 * (c[repeats / 2 - 1] + c[repeats / 2]);
  return 0;
}

/* PyTorch's images/s for folder f with `workers` (ct_bench_peer_run), or NAN after saying why (the
 * reason also in *peer); version gets "torchvision X". */
static double pytorch_ips(const ct_bench_pytorch *py, const folder *f, int workers, int batch, int repeats,
                          char *version, size_t cap, ct_bench_peer *peer) {
  char args[4400], tv[32];
  snprintf(args, sizeof args, "--root '%s' --workers %d --batch-size %d --repeats %d%s", f->root, workers, batch, repeats,
           f->gray ? " --gray" : "");
  if (ct_bench_peer_run("cuttle bench decode", "OMP_NUM_THREADS=1", py, args, "images_per_s", peer) != CT_BENCH_PEER_OK)
    return NAN;
  if (ct_bench_json_string(peer->line, "torchvision", tv, sizeof tv)) snprintf(version, cap, "torchvision %s", tv);
  return ct_bench_json_number(peer->line, "images_per_s");
}

static int parse_list(const char *s, int *out, int cap) {
  int n = 0;
  while (*s && n < cap) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 0 || v > 64) return -1;
    out[n++] = (int)v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return n;
}

int ct_bench_decode(int argc, char **argv) {
  ct_bench_common common = {0};
  int count = 1000, size = 224, fmnist_count = 10000, batch = 64, repeats = 3, keep = 0;
  const char *workers_arg = "0,1,2", *dir = NULL, *data_dir = NULL;
  ct_bench_pytorch py = {.python = "python3", .script = CUTTLE_SOURCE_DIR "/bench/pytorch_decode.py"};
  const ct_bench_opt opts[] = {{.name = "count", .kind = CT_BENCH_INT, .dst = &count},
                               {.name = "size", .kind = CT_BENCH_INT, .dst = &size},
                               {.name = "fmnist-count", .kind = CT_BENCH_INT, .dst = &fmnist_count},
                               {.name = "data-dir", .dst = &data_dir},
                               {.name = "workers", .dst = &workers_arg},
                               {.name = "batch-size", .kind = CT_BENCH_INT, .dst = &batch},
                               {.name = "repeats", .kind = CT_BENCH_INT, .dst = &repeats},
                               {.name = "dir", .dst = &dir},
                               {.name = "keep", .kind = CT_BENCH_FLAG, .dst = &keep, .value = 1},
                               CT_BENCH_PYTORCH_OPTS(py),
                               {0}};
  int parsed = ct_bench_parse(argc, argv, CT_BENCH_CSV | CT_BENCH_QUICK, &common, opts, usage);
  if (parsed != CT_BENCH_GO_ON) return parsed;
  int pytorch = py.on;
  static ct_bench_peer peer; /* the last run of the peer: its failure's reason goes below the table */
  int py_failed = 0;
  if (common.quick) count = 100, fmnist_count = fmnist_count ? 1000 : 0, repeats = 1;
  int workers[16];
  int nw = parse_list(workers_arg, workers, 16);
  if (nw < 1 || count < 0 || size < 1 || size > 8192 || fmnist_count < 0 || batch < 1 || repeats < 1) {
    fprintf(stderr, "cuttle bench decode: --workers is a list of counts in 0..64 (\"0,1,2\"); --count, --fmnist-count "
                    ">= 0, --size in 1..8192, --batch-size, --repeats >= 1\n");
    return 2;
  }
  char base[2048];
  if (dir) {
    snprintf(base, sizeof base, "%s", dir);
    if (mkdirs(base)) return 1;
  } else {
    const char *tmp = getenv("TMPDIR");
    snprintf(base, sizeof base, "%s/cuttle-decode-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(base)) {
      fprintf(stderr, "cuttle bench decode: mkdtemp %s: %s\n", base, strerror(errno));
      return 1;
    }
  }
  folder folders[3];
  int nf = 0, rc = 0;
  memset(folders, 0, sizeof folders);
  fprintf(stderr, "writing the image folders under %s\n", base);
  if (fmnist_count > 0) {
    snprintf(folders[nf].root, sizeof folders[nf].root, "%s/fmnist_png", base);
    if (make_fmnist(&folders[nf], data_dir, fmnist_count) == 0) nf++;
  }
  for (int jpeg = 0; jpeg < 2 && count > 0 && !rc; jpeg++) {
    snprintf(folders[nf].root, sizeof folders[nf].root, "%s/synthetic_%s", base, jpeg ? "jpeg" : "png");
    rc = make_synth(&folders[nf], count, size, jpeg);
    if (!rc) nf++;
  }
  static const char *heads[] = {"folder", "images", "size", "file KiB/image", "reader", "workers", "images/s",
                                "images/s per worker", "CPU us/image", "pytorch images/s", "cuttle/pytorch"};
  char title[256], version[48] = "";
  snprintf(title, sizeof title, "image-folder decode throughput, files in the page cache; loader batch %d, median of %d passes",
           batch, repeats);
  ct_bench_table *t = ct_bench_table_new(title, pytorch ? 11 : 9, heads);
  for (int i = 0; i < nf && !rc; i++) {
    folder *f = &folders[i];
    ct_imagefolder_opts io = {.mode = f->gray ? CT_IMAGE_GRAY : CT_IMAGE_RGB};
    read_ctx c = {.ds = ct_imagefolder_load(f->root, CT_SPLIT_TRAIN, &io), .mode = io.mode, .batch = batch};
    c.x = malloc(sizeof(float) * (size_t)f->h * (size_t)f->w * (size_t)(f->gray ? 1 : 3));
    if (!c.ds || !c.x) {
      fprintf(stderr, "cuttle bench decode: %s: %s\n", f->root, ct_last_error());
      free(c.x), ct_dataset_free(c.ds);
      rc = 1;
      break;
    }
    fprintf(stderr, "%s: %d images of %dx%d, %.1f KiB each\n", f->name, f->n, f->h, f->w,
            (double)f->bytes / 1024.0 / f->n);
    char sz[32], kib[32];
    snprintf(sz, sizeof sz, "%dx%dx%d", f->h, f->w, f->gray ? 1 : 3);
    snprintf(kib, sizeof kib, "%.2f", (double)f->bytes / 1024.0 / f->n);
    struct {
      const char *name;
      ct_bench_fn fn;
      int workers;
    } readers[2 + 16] = {{"ct_image_load", pass_image_load, 0}, {"ct_dataset_get", pass_get, 0}};
    int nr = 2;
    for (int k = 0; k < nw; k++) readers[nr].name = "loader", readers[nr].fn = pass_loader, readers[nr++].workers = workers[k];
    for (int k = 0; k < nr && !rc; k++) {
      c.workers = readers[k].workers;
      double wall, cpu;
      if (time_passes(readers[k].fn, &c, repeats, &wall, &cpu)) {
        fprintf(stderr, "cuttle bench decode: %s of %s failed: %s\n", readers[k].name, f->name, ct_last_error());
        rc = 1;
        break;
      }
      double ips = f->n / wall;
      int per = readers[k].workers > 0 ? readers[k].workers : 1;
      char extra[96] = "";
      if (pytorch && readers[k].fn == pass_loader) {
        double p = pytorch_ips(&py, f, readers[k].workers, batch, repeats, version, sizeof version, &peer);
        if (isnan(p)) snprintf(extra, sizeof extra, "|failed|-"), py_failed = 1;
        else snprintf(extra, sizeof extra, "|%.0f|%.2f", p, ips / p);
      } else if (pytorch) {
        snprintf(extra, sizeof extra, "|-|-");
      }
      ct_bench_table_rowf(t, "%s|%d|%s|%s|%s|%d|%.0f|%.0f|%.1f%s", f->name, f->n, sz, kib, readers[k].name,
                          readers[k].workers, ips, ips / per, 1e6 * cpu / f->n, extra);
    }
    free(c.x);
    ct_dataset_free(c.ds);
  }
  ct_bench_table_print(t, stdout);
  if (pytorch && *version) printf("PyTorch side: %s, PIL, torch.utils.data.DataLoader (worker processes)\n", version);
  if (py_failed) ct_bench_peer_note(&peer, stdout);
  fflush(stdout);
  if (ct_bench_table_csv(t, common.csv)) rc = 1;
  ct_bench_table_free(t);
  if (!keep && !dir) nftw(base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  else fprintf(stderr, "the image folders are kept in %s\n", base);
  return rc;
}
