/* cuttle/data.h: the data layer: IDX files, the Fashion-MNIST dataset and a multi-threaded loader.
 * (cuttle/datasets.h adds CIFAR-10/100, image folders, per-channel Normalize and augmentation.)
 *
 * IDX is the file format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/, section
 * "FILE FORMATS FOR THE MNIST DATABASE"): a 4-byte magic (two zero bytes, a type code, the number
 * of dimensions), one big-endian 32-bit size per dimension, then the data, row-major, big-endian.
 *
 * A dataset (ct_dataset) holds N samples in host memory: u8 pixels of shape (C, H, W) each and one
 * int64 label, plus the normalization applied when a sample is read: x = (pixel/255 - mean) / std
 * (an image folder holds file names instead, and decodes a sample when it is read; datasets.h).
 *
 * A loader (ct_loader) cuts a dataset into batches, x: (B, C, H, W) float32 and y: (B) int64, in
 * a seeded shuffled order, with worker threads preparing the next batches while the current one
 * trains. The order of samples and the bits of every batch depend only on the seed and the epoch,
 * never on the number of workers, with the dataset's random augmentation (datasets.h) too. */
#ifndef CUTTLE_DATA_H
#define CUTTLE_DATA_H

#include "cuttle/export.h"

#include <stddef.h>
#include <stdint.h>
#include "cuttle/device.h"
#include "cuttle/status.h"
#include "cuttle/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * IDX files */

/* IDX type codes (the third byte of the magic), with the element size of each. */
typedef enum {
  CT_IDX_U8 = 0x08,  /* unsigned byte, 1 byte */
  CT_IDX_I8 = 0x09,  /* signed byte, 1 byte */
  CT_IDX_I16 = 0x0B, /* short, 2 bytes */
  CT_IDX_I32 = 0x0C, /* int, 4 bytes */
  CT_IDX_F32 = 0x0D, /* float, 4 bytes */
  CT_IDX_F64 = 0x0E, /* double, 8 bytes */
} ct_idx_type;

/* The magics of the two files of an MNIST-style dataset. */
#define CT_IDX_MAGIC_IMAGES 0x00000803u /* u8, 3 dims: (N, rows, cols) */
#define CT_IDX_MAGIC_LABELS 0x00000801u /* u8, 1 dim: (N) */

/* The most dimensions an IDX file may have here (the format allows 255; cuttle's tensors 8). */
#define CT_IDX_MAX_DIMS 8

/* One parsed IDX file. The caller owns data and releases it with ct_idx_free. */
typedef struct {
  uint32_t magic;                   /* as read, e.g. 0x00000803 */
  ct_idx_type type;                 /* element type (magic byte 3) */
  int ndim;                         /* 1..CT_IDX_MAX_DIMS (magic byte 4) */
  int64_t shape[CT_IDX_MAX_DIMS];   /* ndim sizes, as in the header */
  size_t elem_size;                 /* bytes per element: 1, 2, 4 or 8 */
  int64_t numel;                    /* product of shape */
  size_t nbytes;                    /* numel * elem_size */
  void *data;                       /* malloc'd, row-major, converted to host byte order */
} ct_idx;

/* The element size in bytes of an IDX type code; 0 for an unknown code. */
CT_API size_t ct_idx_type_size(int type);

/* Parse an IDX file held in memory (already gunzipped): buf of n bytes. name is only used in error
 * messages (NULL reads "<buffer>"). On success *out holds a copy of the data in host byte order
 * (the caller frees it with ct_idx_free); on failure *out is zeroed and holds nothing.
 * Errors: CT_EINVAL (buf NULL with n > 0, out NULL); CT_EFORMAT, with name and the problem in the
 * message: "wrong magic" (the first two bytes are not zero), "unknown type code", "0 dimensions" /
 * "more than 8 dimensions", "truncated header", "truncated data" (fewer bytes than the header
 * says), "trailing bytes" (more bytes than the header says); CT_ENOMEM. Never reads outside buf. */
CT_API ct_status ct_idx_parse(const uint8_t *buf, size_t n, const char *name, ct_idx *out);

/* Read and parse the IDX file at path: gzip-compressed (.gz, any name) or raw, detected by content
 * (zlib's gzread reads both). Errors: CT_EINVAL (NULL argument); CT_EIO when the file cannot be
 * opened or read (the message names the path and strerror); CT_EFORMAT for a corrupt or truncated
 * gzip stream and every error of ct_idx_parse, naming the path; CT_ENOMEM. */
CT_API ct_status ct_idx_load(const char *path, ct_idx *out);

/* Release idx->data and zero *idx. NULL and an already freed (zeroed) ct_idx are allowed. */
CT_API void ct_idx_free(ct_idx *idx);

/* The IDX data as a new contiguous tensor on dev with shape idx->shape: u8 as CT_U8, i32 as
 * CT_I32, f32 as CT_F32, f64 as CT_F64, i8 and i16 widened to CT_I32. Ownership as in tensor.h
 * (the caller's, or the open scope's). Errors: CT_EINVAL (NULL or empty ct_idx, an unknown type, a
 * shape that is invalid or disagrees with numel and nbytes), CT_EDEVICE, those of
 * ct_from_host. */
CT_API ct_tensor *ct_idx_to_tensor(const ct_idx *idx, ct_device dev);

/* ---------------------------------------------------------------------------------------------
 * Datasets */

typedef struct ct_dataset ct_dataset;

/* A dataset made from host arrays, copied (the arrays stay the caller's):
 *   images: (n, c, h, w) u8 pixels, row-major; labels: (n) int64, each in [0, num_classes).
 * Reading a sample gives x = (pixel/255 - mean) / std as float32 (computed in float32).
 * n >= 0; c, h, w >= 1; std != 0; num_classes >= 1.
 * Errors: CT_EINVAL (bad sizes, std == 0, NULL arrays with n > 0, a label out of range: the message
 * gives its index and value), CT_ENOMEM. The caller frees the result with ct_dataset_free. */
CT_API ct_dataset *ct_dataset_from_u8(const uint8_t *images, const int64_t *labels, int64_t n, int c, int h, int w,
                               int num_classes, float mean, float std);

/* Release a dataset. NULL is allowed. Loaders reading it must be freed first. */
CT_API void ct_dataset_free(ct_dataset *ds);

/* Accessors. A NULL ds sets CT_EINVAL and gives -1 (len, num_classes) or NULL (pixels, labels). */
CT_API int64_t ct_dataset_len(const ct_dataset *ds);                  /* number of samples N */
/* (C, H, W) of the samples batches hold: the stored shape, or the crop of ct_dataset_set_augment */
CT_API void ct_dataset_sample_shape(const ct_dataset *ds, int64_t out[3]);
CT_API int ct_dataset_num_classes(const ct_dataset *ds);
/* (N, C, H, W) u8 of the stored shape (before augmentation), borrowed; NULL with CT_EUNSUPPORTED
 * for an image folder, which holds no pixels */
CT_API const uint8_t *ct_dataset_pixels(const ct_dataset *ds);
CT_API const int64_t *ct_dataset_labels(const ct_dataset *ds);        /* (N) int64, borrowed */

/* Sample i, normalized: x receives C*H*W float32 values (ct_dataset_sample_shape), *y the label
 * (either may be NULL). With augmentation, the draws of seed 0 and epoch 0: this is
 * ct_dataset_get_seeded(ds, i, 0, 0, x, y) (datasets.h). Errors: CT_EINVAL when i is outside
 * [0, N); for an image folder, those of decoding the sample's file (naming it). */
CT_API ct_status ct_dataset_get(const ct_dataset *ds, int64_t i, float *x, int64_t *y);

/* ---------------------------------------------------------------------------------------------
 * Fashion-MNIST (Xiao, Rasul, Vollgraf 2017, https://github.com/zalandoresearch/fashion-mnist):
 * 28x28 grayscale images of 10 kinds of clothing, 60000 for training and 10000 for testing, in
 * four IDX files. Debian's dataset-fashion-mnist package installs them, gzipped, in
 * CT_FASHION_MNIST_DIR. */

#define CT_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
/* The mean and standard deviation of the training pixels scaled to [0, 1]. */
#define CT_FASHION_MNIST_MEAN 0.2860f
#define CT_FASHION_MNIST_STD 0.3530f
#define CT_FASHION_MNIST_CLASSES 10

typedef enum {
  CT_SPLIT_TRAIN = 0, /* train-images-idx3-ubyte, train-labels-idx1-ubyte: 60000 samples */
  CT_SPLIT_TEST = 1,  /* t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte: 10000 samples */
} ct_split;

/* Load one split from data_dir: for each of the two files, "<name>.gz" is tried first, then the
 * un-gzipped "<name>". data_dir NULL means $CUTTLE_DATA_DIR when set, else CT_FASHION_MNIST_DIR.
 * The dataset has shape (N, 1, 28, 28), 10 classes, and normalizes with CT_FASHION_MNIST_MEAN/STD,
 * so batches hold (x/255 - 0.2860) / 0.3530. The caller frees it with ct_dataset_free.
 * Errors: CT_EINVAL (bad split); CT_EIO when a file is missing (the message names both paths tried
 * and the package to install) or unreadable; CT_EFORMAT, naming the file, for every error of
 * ct_idx_load, a magic other than 0x00000803 (images) / 0x00000801 (labels), images that are not
 * 28x28, image and label counts that differ, a label >= 10; CT_ENOMEM. */
CT_API ct_dataset *ct_fashion_mnist_load(const char *data_dir, ct_split split);

/* The class name of a Fashion-MNIST label ("T-shirt/top", ..., "Ankle boot"); "?" out of range. */
CT_API const char *ct_fashion_mnist_class_name(int64_t label);

/* ---------------------------------------------------------------------------------------------
 * Loader */

typedef struct ct_loader ct_loader;

typedef struct {
  int64_t batch_size;  /* samples per batch; 0 means 1 (PyTorch's default) */
  int shuffle;         /* nonzero: a new permutation each epoch, from seed + epoch; 0: in order */
  uint64_t seed;       /* shuffle seed (splitmix64 + Fisher-Yates); 0 is a valid seed. The dataset's
                          augmentation draws from (seed, epoch, sample index) (datasets.h) */
  int drop_last;       /* nonzero: drop the last batch when it is smaller than batch_size */
  int num_workers;     /* threads preparing batches; 0 means in the calling thread (at most 64) */
  int prefetch_factor; /* batches prepared ahead per worker; 0 means 2 (ignored without workers) */
  int pin_memory;      /* nonzero, where a backend pins host memory for `device`
                          (ct_device_can_pin: CUDA for a GPU, OpenCL for an OpenCL device, the
                          first that pins for the CPU): batches are staged in pinned host memory
                          (ct_empty_pinned_for the device, no extra host copy); for a CPU device
                          they are returned pinned, for another device they are copied with
                          CT_NON_BLOCKING and the next batch's copy is issued before the current
                          batch is returned, so it overlaps the training step. Where nothing pins
                          it is accepted and does nothing. Either way the values are bit-identical */
  ct_device device;    /* where batches are returned; zero is the CPU. Another device gets the
                          batches copied there with ct_to (counted in the copy ledger) */
  int rank;            /* the distributed sampler (torch.utils.data.DistributedSampler): this
                          process's rank, in [0, world_size) */
  int world_size;      /* ranks sharing the dataset; 0 (or 1) means 1: no sharding. With N samples
                          and W ranks every rank builds the same epoch permutation (seed + epoch, or
                          the identity without shuffle), pads it to W * ceil(N/W) indices by
                          repeating its first ones (with drop_last: cuts it to W * floor(N/W)), and
                          takes positions rank, rank + W, rank + 2W, ..., so every rank gets the
                          same number of samples (and batches) and the ranks' samples together are
                          the epoch's. drop_last then also drops a smaller last batch, as above */
} ct_loader_opts;

/* A loader over ds (borrowed: ds must outlive the loader; while the loader exists, the dataset's
 * settings, ct_dataset_set_normalize and ct_dataset_set_augment, are refused). opts NULL means all
 * defaults. Worker threads start here and wait for the first epoch. The caller frees it with
 * ct_loader_free.
 * Errors: CT_EINVAL (ds NULL, batch_size < 0, num_workers outside [0, 64], prefetch_factor < 0,
 * world_size < 0, rank outside [0, world_size) (only 0 with world_size 0)),
 * CT_EDEVICE (opts->device does not exist), CT_ENOMEM, CT_EBACKEND (a thread could not start). */
CT_API ct_loader *ct_loader_new(const ct_dataset *ds, const ct_loader_opts *opts);

/* Stop the workers (also in the middle of an epoch: batches being prepared are finished and
 * dropped) and release everything. Tensors already returned stay valid. NULL is allowed. */
CT_API void ct_loader_free(ct_loader *l);

/* Batches per epoch (per rank with the distributed sampler, where N is the rank's sample count
 * ceil(N / W), or floor(N / W) with drop_last): ceil(N / B), or floor(N / B) with drop_last; -1 with CT_EINVAL for NULL (as
 * ct_loader_epoch). An image folder that skips files that do not decode (CT_DECODE_SKIP) may
 * deliver fewer: a batch whose every sample was skipped is not returned. */
CT_API int64_t ct_loader_len(const ct_loader *l);

/* The epoch the loader is in (or will start with its next ct_loader_next): 0 at first. */
CT_API int64_t ct_loader_epoch(const ct_loader *l);

/* Abandon the current epoch, if any, and make the next ct_loader_next start epoch `epoch` (its
 * shuffle uses seed + epoch). Errors: CT_EINVAL (l NULL, epoch < 0). */
CT_API ct_status ct_loader_set_epoch(ct_loader *l, int64_t epoch);

/* The next batch of the current epoch: *x (B, C, H, W) float32 and *y (B) int64 on opts.device
 * (with pin_memory on a GPU or OpenCL device their copies may still be in flight: ops on the device are ordered after
 * them, and ct_to_host / ct_item wait for them),
 * new tensors whose ownership follows tensor.h (the caller's with no scope open, else the open
 * scope's on this thread). The last batch may be smaller unless drop_last, and so may a batch of an
 * image folder that skipped files (CT_DECODE_SKIP).
 * Returns 1 with a batch; 0 at the end of the epoch (with *x and *y NULL; the following call starts
 * the next epoch); a negative ct_status on error (*x and *y NULL): CT_EINVAL (NULL argument), the
 * errors of ct_from_host and ct_to; for an image folder, a sample that could not be made (CT_EIO,
 * CT_EFORMAT, CT_ESHAPE, CT_ENOMEM: "batch B of epoch E: FILE: why"), reported again by every call
 * until ct_loader_set_epoch. Call from one thread at a time. */
CT_API int ct_loader_next(ct_loader *l, ct_tensor **x, ct_tensor **y);

#ifdef __cplusplus
}
#endif
#endif
