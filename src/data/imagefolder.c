/* src/data/imagefolder.c: a dataset of image files in class folders, decoded when read.
 *
 * The listing follows torchvision.datasets.ImageFolder (0.14: folder.py, find_classes and
 * make_dataset): classes are the sorted names of the root's subdirectories (os.scandir's is_dir,
 * which follows symbolic links); the samples of class i are the files under its folder, found by
 * os.walk(followlinks=True), taken as sorted(os.walk(...)) (so directories in the order of their
 * path strings) and each directory's files sorted by name, kept when the name ends, in any case,
 * with one of the extensions decoded here (.png, .jpg, .jpeg). A class folder without such files
 * is an error, as torchvision's "Found no valid file for the classes ...".
 *
 * The dataset holds only the paths and labels. A sample is made in the loader's worker thread by
 * load(): read the file, decode it (image_png.c, image_jpeg.c), convert it to the mode (RGB or
 * gray), Resize, CenterCrop (image.c) and write it CHW into the sample buffer. Splits: see
 * ct_imagefolder_load in cuttle/datasets.h. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include "data/data_internal.h"

#define MAX_DEPTH 32 /* folders below a class folder that are walked */

typedef struct {
  char **items;
  int64_t n, cap;
} strlist;

static int push(strlist *l, char *s) {
  if (!s) return 0;
  if (l->n == l->cap) {
    int64_t cap = l->cap ? l->cap * 2 : 16;
    char **ni = realloc(l->items, (size_t)cap * sizeof(char *));
    if (!ni) return free(s), 0;
    l->items = ni, l->cap = cap;
  }
  l->items[l->n++] = s;
  return 1;
}

static void strlist_free(strlist *l) {
  for (int64_t i = 0; i < l->n; i++) free(l->items[i]);
  free(l->items);
  memset(l, 0, sizeof *l);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int has_image_ext(const char *name) {
  size_t n = strlen(name);
  return (n >= 4 && (strcasecmp(name + n - 4, ".png") == 0 || strcasecmp(name + n - 4, ".jpg") == 0)) ||
         (n >= 5 && strcasecmp(name + n - 5, ".jpeg") == 0);
}

/* The entries of dir (not . and ..) that are directories (dirs = 1) or are not (dirs = 0), names
 * only, sorted. CT_EIO naming dir when it cannot be read. */
static ct_status entries(const char *op, const char *dir, int dirs, strlist *out) {
  DIR *d = opendir(dir);
  if (!d) return ct__error(CT_EIO, "%s: cannot read the folder %s: %s", op, dir, strerror(errno));
  struct dirent *e;
  ct_status s = CT_OK;
  while (s == CT_OK && (e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char *p = join(dir, e->d_name);
    if (!p) {
      s = ct__error(CT_ENOMEM, "%s: out of memory listing %s", op, dir);
      break;
    }
    int want = is_dir(p) == dirs && (dirs || has_image_ext(e->d_name));
    free(p);
    if (want && !push(out, strdup(e->d_name))) s = ct__error(CT_ENOMEM, "%s: out of memory listing %s", op, dir);
  }
  closedir(d);
  if (s == CT_OK && out->n > 1) qsort(out->items, (size_t)out->n, sizeof(char *), by_name);
  return s;
}

/* dir and every directory below it (links followed), as paths, into out. A directory that is
 * one of its own ancestors (a link back up, on which os.walk(followlinks=True) would loop until
 * Python's recursion limit) is left out, and the walk stops MAX_DEPTH folders down. */
static ct_status walk(const char *op, const char *dir, int depth, struct stat *up, strlist *out) {
  struct stat st;
  if (stat(dir, &st) != 0) return ct__error(CT_EIO, "%s: cannot read the folder %s: %s", op, dir, strerror(errno));
  for (int i = 0; i < depth; i++)
    if (up[i].st_dev == st.st_dev && up[i].st_ino == st.st_ino) return CT_OK;
  if (!push(out, strdup(dir))) return ct__error(CT_ENOMEM, "%s: out of memory listing %s", op, dir);
  if (depth >= MAX_DEPTH) return CT_OK;
  up[depth] = st;
  strlist subs = {0};
  ct_status s = entries(op, dir, 1, &subs);
  for (int64_t i = 0; s == CT_OK && i < subs.n; i++) {
    char *p = join(dir, subs.items[i]);
    s = p ? walk(op, p, depth + 1, up, out) : ct__error(CT_ENOMEM, "%s: out of memory listing %s", op, dir);
    free(p);
  }
  strlist_free(&subs);
  return s;
}

/* The image files under class folder `dir`, in ImageFolder's order, appended to paths with their
 * label appended to labels (n entries, grown with paths). */
static ct_status class_files(const char *op, const char *dir, int64_t label, strlist *paths, int64_t **labels,
                             int64_t *lcap) {
  strlist dirs = {0};
  struct stat up[MAX_DEPTH];
  ct_status s = walk(op, dir, 0, up, &dirs);
  if (s == CT_OK) qsort(dirs.items, (size_t)dirs.n, sizeof(char *), by_name); /* sorted(os.walk(...)): by path */
  for (int64_t d = 0; s == CT_OK && d < dirs.n; d++) {
    strlist files = {0};
    s = entries(op, dirs.items[d], 0, &files);
    for (int64_t f = 0; s == CT_OK && f < files.n; f++) {
      if (paths->n == *lcap) {
        int64_t cap = *lcap ? *lcap * 2 : 64;
        int64_t *nl = realloc(*labels, (size_t)cap * sizeof(int64_t));
        if (!nl) {
          s = ct__error(CT_ENOMEM, "%s: out of memory listing %s", op, dir);
          break;
        }
        *labels = nl, *lcap = cap;
      }
      (*labels)[paths->n] = label;
      if (!push(paths, join(dirs.items[d], files.items[f]))) s = ct__error(CT_ENOMEM, "%s: out of memory listing %s", op, dir);
    }
    strlist_free(&files);
  }
  strlist_free(&dirs);
  return s;
}

/* ---- the source: a sample from its file */

typedef struct {
  char **paths; /* (n), owned */
  int64_t n;
  ct_image_mode mode;
  int resize, resize_h, resize_w, crop_h, crop_w;
  int c, h, w; /* the samples' shape */
} folder;

static void folder_free(void *ctx) {
  folder *f = ctx;
  if (!f) return;
  for (int64_t i = 0; i < f->n; i++) free(f->paths[i]);
  free(f->paths);
  free(f);
}

static const char *folder_path(const void *ctx, int64_t i) { return ((const folder *)ctx)->paths[i]; }

/* torchvision's Resize(int) size: the shorter side becomes s, the longer int(s * long / short). */
static void short_side(int64_t h, int64_t w, int64_t s, int64_t *oh, int64_t *ow) {
  if (w <= h) *ow = s, *oh = (int64_t)((double)(s * h) / (double)w);
  else *oh = s, *ow = (int64_t)((double)(s * w) / (double)h);
}

/* Decode sample i's file and bring it to the mode and the Resize step: *img (HWC). */
static ct_status decode_resized(const folder *f, int64_t i, ct_image *img, char *msg, size_t msgn) {
  uint8_t *buf;
  size_t n;
  ct_status s = ct__read_file(f->paths[i], &buf, &n, msg, msgn);
  if (s != CT_OK) return s;
  s = ct__image_decode(buf, n, f->paths[i], f->mode, CT_IMAGE_MAX_PIXELS, img, msg, msgn);
  free(buf);
  if (s != CT_OK) return s;
  int64_t rh = img->h, rw = img->w;
  if (f->resize_h) rh = f->resize_h, rw = f->resize_w;
  else if (f->resize) short_side(img->h, img->w, f->resize, &rh, &rw);
  if (rh < 1 || rw < 1 || rh * rw > CT_IMAGE_MAX_PIXELS) {
    snprintf(msg, msgn, "%s: a %lldx%lld image resized to %lldx%lld: not a size an image may have", f->paths[i],
             (long long)img->h, (long long)img->w, (long long)rh, (long long)rw);
    ct_image_free(img);
    return CT_ESHAPE;
  }
  if (rh != img->h || rw != img->w) {
    ct_image r;
    char why[256];
    s = ct__image_resize(img, rh, rw, &r, why, sizeof why);
    ct_image_free(img);
    if (s != CT_OK) return snprintf(msg, msgn, "%s: %s", f->paths[i], why), s;
    *img = r;
  }
  return CT_OK;
}

static ct_status folder_load(const void *ctx, int64_t i, uint8_t *px, char *msg, size_t msgn) {
  const folder *f = ctx;
  ct_image img;
  ct_status s = decode_resized(f, i, &img, msg, msgn);
  if (s != CT_OK) return s;
  if (!f->crop_h && (img.h != f->h || img.w != f->w)) {
    snprintf(msg, msgn, "%s is %lldx%lld (after the resize), the split's images %dx%d: give the folder a fixed size "
             "(resize_h and resize_w, or a center crop)", f->paths[i], (long long)img.h, (long long)img.w, f->h, f->w);
    ct_image_free(&img);
    return CT_ESHAPE;
  }
  ct__image_center_crop_chw(&img, f->h, f->w, px); /* a crop of the whole image is the HWC -> CHW copy */
  ct_image_free(&img);
  return CT_OK;
}

static const ct__dataset_source folder_source = {folder_load, folder_path, folder_free};

/* ---- opening */

static ct_status check_opts(const ct_imagefolder_opts *o) {
  const char *op = "ct_imagefolder_load";
  const int most = 1 << 16;
  if (o->mode != CT_IMAGE_RGB && o->mode != CT_IMAGE_GRAY)
    return ct__error(CT_EINVAL, "%s: mode %d is neither CT_IMAGE_RGB (0) nor CT_IMAGE_GRAY (1)", op, (int)o->mode);
  if (o->on_error != CT_DECODE_ERROR && o->on_error != CT_DECODE_SKIP)
    return ct__error(CT_EINVAL, "%s: on_error %d is neither CT_DECODE_ERROR (0) nor CT_DECODE_SKIP (1)", op, (int)o->on_error);
  int sizes[5] = {o->resize, o->resize_h, o->resize_w, o->crop_h, o->crop_w};
  for (int i = 0; i < 5; i++)
    if (sizes[i] < 0 || sizes[i] > most)
      return ct__error(CT_EINVAL, "%s: resize=%d, resize_h=%d, resize_w=%d, crop_h=%d, crop_w=%d: sizes are in [0, %d] (0: not given)",
                       op, o->resize, o->resize_h, o->resize_w, o->crop_h, o->crop_w, most);
  if ((o->resize_h > 0) != (o->resize_w > 0) || (o->crop_h > 0) != (o->crop_w > 0) || (o->resize && o->resize_h))
    return ct__error(CT_EINVAL, "%s: resize=%d, resize_h=%d, resize_w=%d, crop_h=%d, crop_w=%d: give resize_h with resize_w, "
                     "crop_h with crop_w, and resize (the shorter side) or resize_h/resize_w, not both",
                     op, o->resize, o->resize_h, o->resize_w, o->crop_h, o->crop_w);
  if ((int64_t)o->crop_h * o->crop_w > CT_IMAGE_MAX_PIXELS || (int64_t)o->resize_h * o->resize_w > CT_IMAGE_MAX_PIXELS)
    return ct__error(CT_EINVAL, "%s: the size has more than %lld pixels", op, (long long)CT_IMAGE_MAX_PIXELS);
  if (!(o->val_fraction >= 0.0 && o->val_fraction < 1.0))
    return ct__error(CT_EINVAL, "%s: val_fraction = %g must be in [0, 1)", op, o->val_fraction);
  return CT_OK;
}

/* The samples of `dir` for the classes `classes` (whose folders need not all exist when
 * require_all is 0), appended to paths and labels. */
static ct_status scan(const char *op, const char *dir, const strlist *classes, int require_all, strlist *paths,
                      int64_t **labels) {
  int64_t lcap = 0;
  ct_status s = CT_OK;
  for (int64_t c = 0; s == CT_OK && c < classes->n; c++) {
    char *cdir = join(dir, classes->items[c]);
    if (!cdir) return ct__error(CT_ENOMEM, "%s: out of memory", op);
    int64_t before = paths->n;
    if (require_all || is_dir(cdir)) s = class_files(op, cdir, c, paths, labels, &lcap);
    if (s == CT_OK && require_all && paths->n == before)
      s = ct__error(CT_EFORMAT, "%s: the class folder %s holds no .png, .jpg or .jpeg file (torchvision's ImageFolder "
                    "refuses an empty class too: remove the folder or add images)", op, cdir);
    free(cdir);
  }
  return s;
}

/* Keep the samples of one side of a seeded random split (see ct_imagefolder_opts). */
static ct_status split_by_fraction(const char *op, const char *root, ct_split split, double fraction, uint64_t seed,
                                   strlist *paths, int64_t *labels) {
  int64_t n = paths->n, nval = (int64_t)floor(fraction * (double)n), ntrain = n - nval;
  if (split == CT_SPLIT_TEST && nval == 0)
    return ct__error(fraction == 0.0 ? CT_EINVAL : CT_EFORMAT,
                     "%s: %s has no train/ and val/ (or test/) folders, and val_fraction = %g of its %lld samples leaves "
                     "the test split empty: give a val_fraction > 0 (such as 0.1)",
                     op, root, fraction, (long long)n);
  int64_t *perm = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
  uint8_t *keep = calloc((size_t)(n > 0 ? n : 1), 1);
  if (!perm || !keep) {
    free(perm), free(keep);
    return ct__error(CT_ENOMEM, "%s: out of memory", op);
  }
  ct__permutation(perm, n, seed); /* random_split: the first ntrain of the permutation train, the rest test */
  for (int64_t k = 0; k < n; k++) keep[perm[k]] = (k < ntrain) == (split == CT_SPLIT_TRAIN);
  int64_t m = 0;
  for (int64_t i = 0; i < n; i++) {
    if (keep[i]) paths->items[m] = paths->items[i], labels[m++] = labels[i];
    else free(paths->items[i]);
  }
  paths->n = m;
  free(perm), free(keep);
  return CT_OK;
}

/* Fix the samples' size when the options give none: the first sample that decodes (under
 * CT_DECODE_SKIP, the *nbad ones before it, samples 0 .. *nbad - 1, did not). */
static ct_status probe_size(const char *op, folder *f, int skip, int64_t *nbad) {
  char msg[1024];
  *nbad = 0;
  for (int64_t i = 0; i < f->n; i++) {
    ct_image img;
    ct_status s = decode_resized(f, i, &img, msg, sizeof msg);
    if (s == CT_OK) {
      if (img.h > (1 << 16) || img.w > (1 << 16)) {
        ct_image_free(&img);
        return ct__error(CT_EINVAL, "%s: %s is %lldx%lld; give the folder a size (resize or a crop) of at most 65536", op,
                         f->paths[i], (long long)img.h, (long long)img.w);
      }
      f->h = (int)img.h, f->w = (int)img.w;
      ct_image_free(&img);
      return CT_OK;
    }
    if (!skip || (s != CT_EFORMAT && s != CT_EIO)) return ct__error(s, "%s: %s", op, msg);
    (*nbad)++;
  }
  return ct__error(CT_EFORMAT, "%s: none of the %lld files decodes (the last: %s)", op, (long long)f->n, msg);
}

ct_dataset *ct_imagefolder_load(const char *root, ct_split split, const ct_imagefolder_opts *opts) {
  const char *op = "ct_imagefolder_load";
  if (!root) return ct__null_arg(op, "root");
  if (split != CT_SPLIT_TRAIN && split != CT_SPLIT_TEST)
    CT_FAIL_NULL(CT_EINVAL, "%s: split %d is neither CT_SPLIT_TRAIN (0) nor CT_SPLIT_TEST (1)", op, (int)split);
  ct_imagefolder_opts o = {0};
  if (opts) o = *opts;
  if (check_opts(&o) != CT_OK) return NULL;
  char base[4096];
  snprintf(base, sizeof base, "%s", root);
  for (size_t n = strlen(base); n > 1 && base[n - 1] == '/'; n--) base[n - 1] = 0;
  struct stat st;
  if (stat(base, &st) != 0) CT_FAIL_NULL(CT_EIO, "%s: cannot read the folder %s: %s", op, base, strerror(errno));
  if (!S_ISDIR(st.st_mode)) CT_FAIL_NULL(CT_EIO, "%s: %s is not a folder", op, base);

  char train_dir[4200], test_dir[4200];
  snprintf(train_dir, sizeof train_dir, "%s/train", base);
  snprintf(test_dir, sizeof test_dir, "%s/val", base);
  if (!is_dir(test_dir)) snprintf(test_dir, sizeof test_dir, "%s/test", base);
  int layout = is_dir(train_dir) && is_dir(test_dir);
  const char *class_root = layout ? train_dir : base;
  const char *dir = layout && split == CT_SPLIT_TEST ? test_dir : class_root;

  strlist classes = {0}, paths = {0};
  int64_t *labels = NULL, nbad = 0;
  folder *f = NULL;
  ct_status s = entries(op, class_root, 1, &classes);
  if (s == CT_OK && classes.n == 0)
    s = ct__error(CT_EFORMAT, "%s: %s holds no class folder; the layout is %s/<class>/<image>.png|.jpg (or train/ and val/ "
                  "folders of that layout)", op, class_root, base);
  if (s == CT_OK && classes.n > INT32_MAX) s = ct__error(CT_EFORMAT, "%s: %s: too many classes", op, class_root);
  if (s == CT_OK && layout && split == CT_SPLIT_TEST) { /* the test folder's classes must be train's */
    strlist tc = {0};
    s = entries(op, test_dir, 1, &tc);
    for (int64_t i = 0; s == CT_OK && i < tc.n; i++)
      if (!bsearch(&tc.items[i], classes.items, (size_t)classes.n, sizeof(char *), by_name))
        s = ct__error(CT_EFORMAT, "%s: %s/%s is a class folder that %s lacks: the test split's classes are the train split's",
                      op, test_dir, tc.items[i], train_dir);
    strlist_free(&tc);
  }
  if (s == CT_OK) s = scan(op, dir, &classes, !(layout && split == CT_SPLIT_TEST), &paths, &labels);
  if (s == CT_OK && paths.n == 0)
    s = ct__error(CT_EFORMAT, "%s: %s holds no .png, .jpg or .jpeg file in its class folders", op, dir);
  if (s == CT_OK && !layout && (o.val_fraction > 0 || split == CT_SPLIT_TEST))
    s = split_by_fraction(op, base, split, o.val_fraction, o.split_seed, &paths, labels);
  if (s == CT_OK && !(f = calloc(1, sizeof *f))) s = ct__error(CT_ENOMEM, "%s: out of memory", op);
  if (s == CT_OK) {
    f->paths = paths.items, f->n = paths.n;
    paths.items = NULL, paths.n = 0;
    f->mode = o.mode, f->resize = o.resize, f->resize_h = o.resize_h, f->resize_w = o.resize_w;
    f->crop_h = o.crop_h, f->crop_w = o.crop_w;
    f->c = o.mode == CT_IMAGE_GRAY ? 1 : 3;
    f->h = o.crop_h ? o.crop_h : o.resize_h, f->w = o.crop_w ? o.crop_w : o.resize_w;
    if (!f->h) s = probe_size(op, f, o.on_error == CT_DECODE_SKIP, &nbad);
  }
  int64_t n = f ? f->n : 0;
  if (s != CT_OK) {
    strlist_free(&classes), strlist_free(&paths);
    free(labels);
    folder_free(f);
    return NULL;
  }
  ct_dataset *ds = ct__dataset_from_source(&folder_source, f, labels, n, f->c, f->h, f->w, (int)classes.n);
  if (ds) {
    ds->owned_names = classes.items; /* the dataset frees them */
    ds->class_names = (const char *const *)classes.items;
    classes.items = NULL, classes.n = 0;
    ds->skip_bad = o.on_error == CT_DECODE_SKIP;
    if (ds->skip_bad && !(ds->bad = calloc((size_t)(n > 0 ? n : 1), 1))) {
      ct_dataset_free(ds);
      ds = NULL;
      ct__error(CT_ENOMEM, "%s: out of memory", op);
    }
    if (ds && nbad) memset(ds->bad, 1, (size_t)nbad); /* the samples probe_size found bad */
    if (ds) ds->skipped = nbad;
  } else {
    ct__error_prefix("%s", op);
  }
  strlist_free(&classes);
  return ds;
}
