/* tools/cuttle/data_arg.c: the data options of `cuttle train` and `cuttle eval` (commands.h):
 * --data fashion-mnist|cifar10:DIR|cifar100:DIR|imagefolder:DIR read into a data set of
 * cuttle/data.h or cuttle/datasets.h, with --image-size, --gray, --val-split, --skip-bad-images,
 * --normalize and --augment. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "commands.h"
#include "cuttle/datasets.h"
#include "cuttle/dist.h"
#include "cuttle/io.h"

/* "H" or "H,W", each in [1, 65536]. 0, or -1 when malformed. */
static int read_size(const char *s, int *h, int *w) {
  char *end;
  long a = strtol(s, &end, 10), b = a;
  if (end == s) return -1;
  if (*end == ',') {
    const char *t = end + 1;
    b = strtol(t, &end, 10);
    if (end == t) return -1;
  }
  if (*end || a < 1 || b < 1 || a > 65536 || b > 65536) return -1;
  *h = (int)a, *w = (int)b;
  return 0;
}

/* A comma list of at most CT_CLI_MAX_CHANNELS floats from s up to end (exclusive) into v. Its
 * length, or -1 when malformed (an empty list or item, a NaN or an infinity; the range of each
 * value is ct_dataset_set_normalize's to judge, after the data set is open). */
static int read_floats(const char *s, const char *end, float *v) {
  int n = 0;
  while (s < end) {
    char *e;
    double x = strtod(s, &e);
    if (e == s || n == CT_CLI_MAX_CHANNELS || !isfinite(x)) return -1;
    v[n++] = (float)x;
    s = e;
    if (s < end && *s++ != ',') return -1;
    if (s == end && s[-1] == ',') return -1;
  }
  return n;
}

/* --normalize MEAN/STD: each list one value (every channel, as torchvision broadcasts a 1-element
 * mean or std) or one per channel of the data (channels: 1 for Fashion-MNIST and --gray folders, 3
 * otherwise); the result, norm_n values in both, replicates a one-value list. 0, or -1. */
static int read_normalize(ct_cli_data_opts *o, int channels) {
  const char *s = o->normalize, *slash = strchr(s, '/');
  if (!slash) return -1;
  int n = read_floats(s, slash, o->mean), m = read_floats(slash + 1, slash + 1 + strlen(slash + 1), o->std);
  if (n < 1 || m < 1 || (n != 1 && n != channels) || (m != 1 && m != channels)) return -1;
  for (int i = 0; i < m; i++) /* ct_dataset_set_normalize refuses it too, but only once the data is read */
    if (o->std[i] == 0) return -1;
  o->norm_n = n > m ? n : m;
  for (int i = 1; i < o->norm_n; i++) {
    if (n == 1) o->mean[i] = o->mean[0];
    if (m == 1) o->std[i] = o->std[0];
  }
  return 0;
}

/* --data's kind and folder. 0, or 2 after saying why. */
static int read_kind(const char *prog, ct_cli_data_opts *o) {
  static const char *const kinds[] = {"fashion-mnist", "cifar10", "cifar100", "imagefolder"};
  const char *d = o->data ? o->data : "fashion-mnist", *colon = strchr(d, ':');
  size_t n = colon ? (size_t)(colon - d) : strlen(d);
  o->kind = -1;
  for (int k = 0; k < 4; k++)
    if (strlen(kinds[k]) == n && strncmp(d, kinds[k], n) == 0) o->kind = k;
  if (o->kind < 0) {
    fprintf(stderr, "%s: unknown --data \"%s\": use fashion-mnist (with --data-dir DIR), cifar10:DIR, cifar100:DIR "
                    "or imagefolder:DIR\n", prog, d);
    return 2;
  }
  o->dir = colon ? colon + 1 : NULL;
  if (o->kind == CT_CLI_FASHION_MNIST && colon) {
    fprintf(stderr, "%s: --data fashion-mnist takes no folder: give it with --data-dir DIR\n", prog);
    return 2;
  }
  if (o->kind != CT_CLI_FASHION_MNIST && (!o->dir || !*o->dir)) {
    fprintf(stderr, "%s: --data %s needs its folder: --data %s:DIR\n", prog, kinds[o->kind], kinds[o->kind]);
    return 2;
  }
  if (o->kind != CT_CLI_FASHION_MNIST && o->data_dir) {
    fprintf(stderr, "%s: --data-dir is Fashion-MNIST's folder; --data %s:DIR names the folder itself\n", prog,
            kinds[o->kind]);
    return 2;
  }
  return 0;
}

int ct_cli_data_check(const char *prog, ct_cli_data_opts *o) {
  if (read_kind(prog, o)) return 2;
  int folder = o->kind == CT_CLI_IMAGEFOLDER;
  if ((o->image_size || o->gray || o->val_split || o->skip_bad) && !folder) {
    fprintf(stderr, "%s: --image-size, --gray, --val-split and --skip-bad-images are for --data imagefolder:DIR\n",
            prog);
    return 2;
  }
  if (o->image_size && read_size(o->image_size, &o->image_h, &o->image_w)) {
    fprintf(stderr, "%s: bad --image-size \"%s\": use H or H,W (pixels, >= 1)\n", prog, o->image_size);
    return 2;
  }
  int channels = o->kind == CT_CLI_FASHION_MNIST || (folder && o->gray) ? 1 : 3;
  if (o->normalize && read_normalize(o, channels)) {
    fprintf(stderr, "%s: bad --normalize \"%s\": use MEAN/STD, e.g. 0.5/0.25 or 0.485,0.456,0.406/0.229,0.224,0.225 "
                    "(torchvision's Normalize: in each list one value for every channel, or one per channel; this data "
                    "has %d)\n", prog, o->normalize, channels);
    return 2;
  }
  if (!(o->val_split >= 0 && o->val_split < 1)) {
    fprintf(stderr, "%s: --val-split must be in [0, 1)\n", prog);
    return 2;
  }
  return 0;
}

void ct_cli_data_transform(const ct_cli_data_opts *o, char *out, size_t n) {
  size_t k = 0;
  out[0] = 0;
  if (o->gray) k += (size_t)snprintf(out + k, n - k, "--gray ");
  if (o->image_h && k < n) k += (size_t)snprintf(out + k, n - k, "--image-size %d,%d ", o->image_h, o->image_w);
  for (int list = 0; o->norm_n && list < 2 && k < n; list++) {
    const float *v = list ? o->std : o->mean;
    int same = 1; /* a list of one value repeated is written as that value: 0.5,0.5,0.5 is 0.5 */
    for (int i = 1; i < o->norm_n; i++) same &= v[i] == v[0];
    k += (size_t)snprintf(out + k, n - k, "%s", list ? "/" : "--normalize ");
    for (int i = 0; i < (same ? 1 : o->norm_n) && k < n; i++) k += (size_t)snprintf(out + k, n - k, "%s%g", i ? "," : "", (double)v[i]);
  }
  k = strlen(out);
  if (k && out[k - 1] == ' ') out[k - 1] = 0;
}

void ct_cli_data_compare_saved(const char *prog, const ct_cli_data_opts *o, const ct_safetensors *f, const char *path) {
  if (!f || ct_dist_rank() != 0) return;
  const char *saved = ct_safetensors_metadata(f, CT_CLI_TRANSFORM_KEY);
  char now[512];
  ct_cli_data_transform(o, now, sizeof now);
  if (saved && strcmp(saved, now) != 0)
    fprintf(stderr, "%s: warning: %s was trained with the data options \"%s\", this run uses \"%s\": give the same "
                    "--normalize, --gray and --image-size, or the model sees other inputs than it learned\n",
            prog, path, *saved ? saved : "(none)", *now ? now : "(none)");
  ct_clear_error(); /* a key the file lacks */
}

/* An image folder's split with the options: --image-size H,W is Resize(min(H, W)) then
 * CenterCrop((H, W)), torchvision's usual pair (a square image comes out H x W). */
static ct_dataset *open_folder(const ct_cli_data_opts *o, ct_split split) {
  ct_imagefolder_opts io = {.mode = o->gray ? CT_IMAGE_GRAY : CT_IMAGE_RGB, .val_fraction = o->val_split,
                            .split_seed = o->seed, .on_error = o->skip_bad ? CT_DECODE_SKIP : CT_DECODE_ERROR};
  if (o->image_h) {
    io.resize = o->image_h < o->image_w ? o->image_h : o->image_w;
    io.crop_h = o->image_h, io.crop_w = o->image_w;
  }
  return ct_imagefolder_load(o->dir, split, &io);
}

/* --augment: RandomCrop(the image's size, padding=4), RandomHorizontalFlip(0.5). */
static ct_status augment(ct_dataset *ds) {
  int64_t s[3];
  ct_dataset_sample_shape(ds, s);
  ct_augment a = {.crop_h = (int)s[1], .crop_w = (int)s[2], .crop_padding = 4, .hflip_p = 0.5f};
  return ct_dataset_set_augment(ds, &a);
}

ct_dataset *ct_cli_data_open(const char *prog, const ct_cli_data_opts *o, ct_split split) {
  ct_dataset *ds = NULL;
  switch (o->kind) {
    case CT_CLI_FASHION_MNIST: ds = ct_fashion_mnist_load(o->data_dir, split); break;
    case CT_CLI_CIFAR10: ds = ct_cifar10_load(o->dir, split); break;
    case CT_CLI_CIFAR100: ds = ct_cifar100_load(o->dir, split, CT_CIFAR100_FINE); break;
    default: ds = open_folder(o, split); break;
  }
  if (ds && o->norm_n && ct_dataset_set_normalize(ds, o->norm_n, o->mean, o->std) != CT_OK) {
    ct_dataset_free(ds);
    ds = NULL;
  }
  if (ds && o->augment && split == CT_SPLIT_TRAIN && augment(ds) != CT_OK) {
    ct_dataset_free(ds);
    ds = NULL;
  }
  if (!ds) {
    fprintf(stderr, "%s: %s\n", prog, ct_last_error());
    if (o->kind == CT_CLI_IMAGEFOLDER && split == CT_SPLIT_TEST && !o->val_split && ct_last_status() == CT_EINVAL)
      fprintf(stderr, "%s: a folder without train/ and val/ (or test/) folders needs --val-split F to hold out a "
                      "test split\n", prog);
  }
  return ds;
}

ct_module *ct_cli_model_for(const char *prog, const char *model, const ct_dataset *ds, ct_device dev,
                            ct_generator *gen) {
  int64_t s[3];
  ct_dataset_sample_shape(ds, s);
  ct_module *m = ct_model_new_for(model, s[0], s[1], s[2], ct_dataset_num_classes(ds), dev, gen);
  if (!m) fprintf(stderr, "%s: %s\n", prog, ct_last_error());
  return m;
}
