/* cuttle/datasets.h: more datasets for the loader of cuttle/data.h (CIFAR-10, CIFAR-100, a folder of
 * PNG and JPEG images), the image decoding they use, and torchvision's transforms.
 *
 * Every dataset here is a ct_dataset (data.h): samples of shape (C, H, W), labels int64 in
 * [0, num_classes), read by ct_loader into batches x: (B, C, H, W) float32 and y: (B) int64. What
 * a sample goes through, in this order, follows the usual torchvision pipeline
 * Compose([Resize, CenterCrop, RandomCrop, RandomHorizontalFlip, ToTensor, Normalize]):
 *   1. its pixels: held in memory (Fashion-MNIST, CIFAR), or for an image folder decoded from its
 *      file in the loader's worker thread, converted to RGB or grayscale, resized and center-cropped
 *      to the folder's fixed size (ct_imagefolder_opts);
 *   2. the random augmentation of ct_dataset_set_augment (RandomCrop, RandomHorizontalFlip), on u8
 *      pixels, drawn from a random stream that depends only on (loader seed, epoch, sample index);
 *   3. ToTensor and Normalize: x = (pixel / 255 - mean[c]) / std[c], in float32, per channel
 *      (ct_dataset_set_normalize).
 * So a loader gives the same bits for any number of workers, with augmentation as without.
 *
 * Threads: a dataset may be read by several loaders at once (each from its own threads); its
 * settings (ct_dataset_set_*) may change only while no loader reads it. */
#ifndef CUTTLE_DATASETS_H
#define CUTTLE_DATASETS_H

#include "cuttle/export.h"

#include <stddef.h>
#include <stdint.h>
#include "cuttle/data.h"
#include "cuttle/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Normalize and augmentation (torchvision.transforms) */

/* torchvision.transforms.Normalize(mean, std) after ToTensor: sample values become
 * (pixel / 255 - mean[c]) / std[c] (float32), replacing the dataset's normalization. n is 1 (one
 * mean and std for every channel, as torchvision broadcasts a 1-element mean) or the dataset's
 * channel count C. mean 0 and std 1 give ToTensor alone: pixel / 255 in [0, 1].
 * Errors: CT_EINVAL (ds, mean or std NULL; n neither 1 nor C; a std of 0 or a NaN; a loader is
 * reading ds: set it before ct_loader_new). */
CT_API ct_status ct_dataset_set_normalize(ct_dataset *ds, int n, const float *mean, const float *std);

/* Random augmentation, applied to every sample a loader reads (and to ct_dataset_get), drawn from a
 * stream seeded by (the loader's seed, the epoch, the sample's index in the dataset): the same
 * sample gets the same draws in a given epoch whatever the number of workers, the batch size or the
 * rank, and other draws in the next epoch. Zero is "none" throughout; {0} turns augmentation off. */
typedef struct {
  /* torchvision.transforms.RandomCrop(size=(crop_h, crop_w), padding=crop_padding): pad every
   * side with crop_padding zero pixels (fill=0, padding_mode="constant"), then cut a crop_h x
   * crop_w window at a uniformly drawn top in [0, H + 2p - crop_h] and left in
   * [0, W + 2p - crop_w]. The batches' sample shape becomes (C, crop_h, crop_w). crop_h and crop_w
   * are both 0 (no crop, and then crop_padding must be 0) or both >= 1 and at most H + 2p, W + 2p.
   * CIFAR's usual augmentation is crop 32 x 32 with padding 4. */
  int crop_h, crop_w, crop_padding;
  /* torchvision.transforms.RandomHorizontalFlip(p): mirror left-right when a uniform draw in
   * [0, 1) is below hflip_p, after the crop. In [0, 1]; 0.5 is torchvision's default. */
  float hflip_p;
} ct_augment;

/* Set (or with aug NULL or {0}, clear) the augmentation of ds; ct_dataset_sample_shape then gives
 * the shape batches hold. Errors: CT_EINVAL (ds NULL; sizes < 0; only one of crop_h, crop_w set;
 * padding without a crop; a crop larger than the padded image; hflip_p outside [0, 1] or NaN; a
 * loader is reading ds). */
CT_API ct_status ct_dataset_set_augment(ct_dataset *ds, const ct_augment *aug);

/* Sample i as a loader with this seed gives it in this epoch: x receives C*H*W float32 values of
 * the shape ct_dataset_sample_shape gives (augmented and normalized), *y its label (either may be
 * NULL). ct_dataset_get(ds, i, x, y) is ct_dataset_get_seeded(ds, i, 0, 0, x, y).
 * Errors: CT_EINVAL (ds NULL, i outside [0, N), epoch < 0); CT_ENOMEM for the sample's buffers
 * (allocated per call here; a loader's workers reuse theirs); for an
 * image folder those of decoding
 * the sample's file (CT_EIO, CT_EFORMAT, CT_ESHAPE, CT_ENOMEM, naming the file), whatever the
 * folder's on_error policy. */
CT_API ct_status ct_dataset_get_seeded(const ct_dataset *ds, int64_t i, uint64_t seed, int64_t epoch, float *x,
                                       int64_t *y);

/* The name of class `label`: Fashion-MNIST's and CIFAR's published names, an image folder's
 * directory name; "" for a dataset made by ct_dataset_from_u8, which has none. The string is
 * borrowed from ds. Errors: NULL with CT_EINVAL (ds NULL, label outside [0, num_classes)). */
CT_API const char *ct_dataset_class_name(const ct_dataset *ds, int64_t label);

/* The file of sample i of an image folder (borrowed from ds). Errors: NULL with CT_EINVAL (ds NULL,
 * i outside [0, N)) or CT_EUNSUPPORTED (ds holds its samples in memory: it has no files). */
CT_API const char *ct_dataset_sample_path(const ct_dataset *ds, int64_t i);

/* The number of distinct samples skipped so far because their file did not decode (an image
 * folder opened with CT_DECODE_SKIP); 0 for every other dataset. -1 with CT_EINVAL for NULL. */
CT_API int64_t ct_dataset_skipped(const ct_dataset *ds);

/* ---------------------------------------------------------------------------------------------
 * CIFAR-10 and CIFAR-100, binary version (Krizhevsky 2009, "Learning Multiple Layers of Features
 * from Tiny Images"; the layout is the one of https://www.cs.toronto.edu/~kriz/cifar.html, "Binary
 * version"): 32x32 RGB images, each file a sequence of records:
 *   CIFAR-10  (cifar-10-binary.tar.gz -> cifar-10-batches-bin/): data_batch_1.bin ..
 *             data_batch_5.bin (10000 records each: the training set, 50000) and test_batch.bin
 *             (10000); a record is 3073 bytes: 1 label byte in [0, 10), then 3072 pixel bytes;
 *   CIFAR-100 (cifar-100-binary.tar.gz -> cifar-100-binary/): train.bin (50000 records) and
 *             test.bin (10000); a record is 3074 bytes: the coarse label byte in [0, 20), the fine
 *             label byte in [0, 100), then 3072 pixel bytes.
 * The pixel bytes are the 1024 red values, then the 1024 green, then the 1024 blue, each plane
 * row-major: exactly a (3, 32, 32) CHW u8 sample. Neither Debian nor PyPI packages the files. */

#define CT_CIFAR_RECORD_PIXELS 3072
#define CT_CIFAR10_CLASSES 10
#define CT_CIFAR100_CLASSES 100
#define CT_CIFAR100_COARSE_CLASSES 20
/* Per-channel mean and standard deviation of the training pixels scaled to [0, 1] (R, G, B), the
 * values commonly given to torchvision's Normalize for each set; the loaders below normalize with
 * them. */
#define CT_CIFAR10_MEAN {0.4914f, 0.4822f, 0.4465f}
#define CT_CIFAR10_STD {0.2470f, 0.2435f, 0.2616f}
#define CT_CIFAR100_MEAN {0.5071f, 0.4865f, 0.4409f}
#define CT_CIFAR100_STD {0.2673f, 0.2564f, 0.2762f}

/* Which CIFAR-100 label a sample carries: the fine one (100 classes, torchvision.datasets.CIFAR100's
 * target) or the coarse superclass (20). */
typedef enum { CT_CIFAR100_FINE = 0, CT_CIFAR100_COARSE = 1 } ct_cifar100_label;

/* Load a CIFAR-10 split from dir, the folder holding the .bin files (or its parent, when that holds
 * cifar-10-batches-bin/): CT_SPLIT_TRAIN reads data_batch_1.bin .. data_batch_5.bin in that order,
 * CT_SPLIT_TEST test_batch.bin. Shape (N, 3, 32, 32), 10 classes ("airplane" .. "truck"),
 * normalized with CT_CIFAR10_MEAN/STD. Files may hold any whole number >= 1 of records (tests write
 * small ones). The caller frees the result with ct_dataset_free.
 * Errors: CT_EINVAL (dir NULL, bad split); CT_EIO, naming the path, when a file is missing (the
 * message says where the data set is downloaded) or unreadable; CT_EFORMAT, naming the file and the
 * record, for a size that is not a whole number of 3073-byte records (or 0 bytes), a label >= 10;
 * CT_ENOMEM. */
CT_API ct_dataset *ct_cifar10_load(const char *dir, ct_split split);

/* Load a CIFAR-100 split from dir (the folder holding train.bin and test.bin, or its parent when
 * that holds cifar-100-binary/), with the fine or coarse labels. Shape (N, 3, 32, 32); 100 or 20
 * classes with their published names; normalized with CT_CIFAR100_MEAN/STD. Errors as
 * ct_cifar10_load, with 3074-byte records, a coarse label >= 20 or a fine one >= 100, and CT_EINVAL
 * for a bad `labels`. */
CT_API ct_dataset *ct_cifar100_load(const char *dir, ct_split split, ct_cifar100_label labels);

/* Check one CIFAR file held in memory (buf, n bytes; name is only for messages, NULL reads
 * "<buffer>"): label_bytes 1 (CIFAR-10) or 2 (CIFAR-100). On success *records gets the record
 * count. Errors: CT_EINVAL (buf NULL with n > 0, records NULL, label_bytes not 1 or 2), CT_EFORMAT
 * as the loaders. Never reads outside buf. */
CT_API ct_status ct_cifar_check(const uint8_t *buf, size_t n, const char *name, int label_bytes, int64_t *records);

/* ---------------------------------------------------------------------------------------------
 * Images: PNG (libpng) and JPEG (libjpeg-turbo's libjpeg API) decoding into u8 pixels */

/* The channels images are decoded to, as PIL's Image.convert, which torchvision's ImageFolder
 * loader calls: RGB (3 channels; a grayscale file is replicated) or GRAY (1 channel; an RGB file
 * becomes L = (19595 R + 38470 G + 7471 B + 32768) >> 16, PIL's ITU-R 601-2 luma in fixed point).
 * Alpha is dropped (not composited); a palette is expanded; JPEG CMYK is converted as PIL does
 * (Adobe's inverted CMYK). One difference: 16-bit samples keep their high byte, where PIL clips a
 * 16-bit gray PNG's values to 255 (it reads it as mode "I"). Otherwise the bytes are PIL's
 * (tests/data/test_interop_imagefolder.c). */
typedef enum { CT_IMAGE_RGB = 0, CT_IMAGE_GRAY = 1 } ct_image_mode;

/* A decoded image: h rows of w pixels of c channels (1 or 3), interleaved: data is (h, w, c) HWC
 * u8, malloc'd, owned by whoever holds the ct_image (released with ct_image_free). */
typedef struct {
  int64_t h, w;
  int c;
  uint8_t *data;
} ct_image;

/* The most pixels (h * w) an image may have; more is an error, before any allocation (PIL warns
 * above 89478485 and refuses twice that). */
#define CT_IMAGE_MAX_PIXELS ((int64_t)1 << 28)

/* Decode a PNG or JPEG file held in memory (buf, n bytes; the format is told by its first bytes,
 * not by a name) into *out in the given mode. name is only for messages (NULL reads "<buffer>").
 * JPEG decoding uses libjpeg's defaults (the accurate integer DCT, fancy upsampling), as PIL does.
 * Errors, *out zeroed: CT_EINVAL (buf NULL with n > 0, out NULL, a bad mode); CT_EFORMAT, naming
 * name and the decoder's reason: neither PNG nor JPEG, a corrupt or truncated stream, more than
 * CT_IMAGE_MAX_PIXELS pixels; CT_ENOMEM. Never crashes or reads outside buf, whatever the bytes. */
CT_API ct_status ct_image_decode(const uint8_t *buf, size_t n, const char *name, ct_image_mode mode, ct_image *out);

/* Read the file at path and decode it as ct_image_decode. Errors: those of ct_image_decode naming
 * path; CT_EIO when it cannot be opened or read (strerror). */
CT_API ct_status ct_image_load(const char *path, ct_image_mode mode, ct_image *out);

/* Resize in to exactly (h, w) into *out (same channels), with PIL's bilinear filter
 * (Image.resize(..., BILINEAR), which torchvision's Resize calls on PIL images): a triangle filter
 * whose support widens with the downscaling factor (so it antialiases), separable, horizontal pass
 * first, coefficients in 22-bit fixed point (PIL's 8-bit-per-channel path), the same rounding: the bytes PIL 9 gives. The same size is
 * a copy. Errors: CT_EINVAL (NULL pointers, in without data, h or w < 1, h * w over
 * CT_IMAGE_MAX_PIXELS), CT_ENOMEM. */
CT_API ct_status ct_image_resize(const ct_image *in, int64_t h, int64_t w, ct_image *out);

/* Release img->data and zero *img. NULL and a zeroed ct_image are allowed. */
CT_API void ct_image_free(ct_image *img);

/* ---------------------------------------------------------------------------------------------
 * An image folder (torchvision.datasets.ImageFolder): root/<class>/[folders/]<name>.png|.jpg|.jpeg */

/* What to do with a file that does not decode when a loader reads it. */
typedef enum {
  CT_DECODE_ERROR = 0, /* ct_loader_next fails with the decoder's error naming the file */
  CT_DECODE_SKIP = 1,  /* the sample is left out of its batch (which is then smaller; a batch left
                          empty is not returned) and counted once (ct_dataset_skipped) */
} ct_decode_policy;

typedef struct {
  ct_image_mode mode; /* RGB (3 channels, the default) or GRAY (1) */
  /* The fixed size, reached in torchvision's order Resize, then CenterCrop; zero means "not
   * given". resize: Resize(resize), the shorter side becomes resize and the longer
   * int(resize * long / short) (torchvision's rounding); resize_h, resize_w: Resize((h, w)),
   * exactly that size (both or neither, and not with resize). Both bilinear (ct_image_resize).
   * crop_h, crop_w: CenterCrop((crop_h, crop_w)) (both or neither), with torchvision's offsets
   * (round half to even) and zero padding where the image is smaller. Without crop and exact
   * resize, every image must come out the size of the split's first image; one that does not is
   * CT_ESHAPE naming it. */
  int resize, resize_h, resize_w, crop_h, crop_w;
  /* Without root/train and root/val (or root/test) folders: the fraction of the samples that form
   * the CT_SPLIT_TEST split, in [0, 1), drawn as torch.utils.data.random_split: n_val =
   * floor(fraction * N) of a permutation seeded by split_seed go to the test split, the rest to the
   * train split (each kept in file order). 0 puts every sample in the train split. Ignored when
   * the folders are there. */
  double val_fraction;
  uint64_t split_seed;
  ct_decode_policy on_error;
} ct_imagefolder_opts;

/* Open an image folder's split: a dataset that decodes each sample's file when it is read, in the
 * loader's worker threads (only the list of files is held in memory).
 * Layout: when root/train and root/val (or, without val, root/test) are directories, CT_SPLIT_TRAIN
 * reads root/train and CT_SPLIT_TEST root/val (or root/test), with the class list of root/train (a
 * test class folder not among them is an error); otherwise both splits come from root itself, cut
 * by opts->val_fraction. In the folder read, as torchvision.datasets.ImageFolder: the classes are
 * its subdirectories (symbolic links followed, hidden ones too) sorted by name (byte order, which is
 * Python's code-point order for UTF-8), class i the i-th; the samples are the files under each class
 * folder, walked recursively (links followed, but not back into a folder being walked, where
 * os.walk would loop; 32 levels at most), directories sorted by path and files by name, whose name ends in
 * .png, .jpg or .jpeg in any case (torchvision also takes .bmp, .ppm, .pgm, .tif, .tiff and .webp:
 * files with those are ignored here). The first sample's file is decoded here to fix the size when
 * opts gives none. Labels are the class indices; the dataset normalizes with mean 0 and std 1
 * (ToTensor alone) until ct_dataset_set_normalize. opts NULL means all defaults. The caller frees
 * the result with ct_dataset_free.
 * Errors: CT_EINVAL (root NULL, bad split or options; CT_SPLIT_TEST of a folder with neither split
 * folders nor val_fraction); CT_EIO (root or a folder unreadable, naming it); CT_EFORMAT (no class
 * folder, a class folder without image files, a test class folder unknown to train: each named; the
 * first file does not decode, under CT_DECODE_ERROR); CT_ENOMEM. */
CT_API ct_dataset *ct_imagefolder_load(const char *root, ct_split split, const ct_imagefolder_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
