/* cuttle/io.h: tensors and checkpoints in the safetensors format.
 *
 * The format (https://github.com/huggingface/safetensors, README "Format"): an 8-byte little-endian
 * unsigned length N, then N bytes of UTF-8 JSON, then the byte buffer. The JSON is one object:
 *   {"__metadata__": {"key": "value", ...},                       (optional; strings only)
 *    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
 * where [begin, end) are byte offsets into the buffer (not the file). Tensors are row-major and
 * little-endian. The writer produces the reference (Rust) writer's bytes exactly (checked against
 * safetensors 0.8): compact JSON, "__metadata__" first, tensors laid out in the order of the
 * reference's Dtype enum from the end (I64, F64, F32, I32, BF16, F16, U8, BOOL), then by name, and the
 * header padded with spaces to a multiple of 8 bytes, so every tensor is aligned to its dtype size in
 * the file. The reader applies the reference reader's checks (safetensors/src/tensor.rs:
 * read_metadata and Metadata::validate) and is stricter in three ways: a repeated key is an error
 * (the reference keeps the last), the header must start with '{' (the reference has that check
 * written but commented out), and the header must be strict UTF-8 without NUL bytes. It is looser in
 * one: cJSON reads numbers as doubles, so a shape written "2.0" or "2e0" is taken as 2 (the
 * reference rejects it); numbers above 2^53 are rejected rather than rounded.
 *
 * The JSON itself is parsed and printed with cJSON (Debian's libcjson-dev). */
#ifndef CUTTLE_IO_H
#define CUTTLE_IO_H

#include "cuttle/export.h"

#include <stddef.h>
#include <stdint.h>
#include "cuttle/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The reference reader's cap on the header length N (MAX_HEADER_SIZE in safetensors/src/tensor.rs). */
#define CT_SAFETENSORS_MAX_HEADER 100000000u

/* The "__metadata__" key of the checksum that ct_checkpoint_save records and that every parse of a
 * file verifies (ct_safetensors_parse, so ct_safetensors_open and ct_checkpoint_load too). Its value
 * is "xxh3_64:" and 16 lowercase hex digits (e.g. "xxh3_64:2d06800538d394c2"): XXH3_64bits of
 * xxHash (seed 0, https://github.com/Cyan4973/xxHash) over the whole byte buffer, that is every byte
 * after the 8-byte length and the JSON header, all tensors' data in file order. It covers the
 * tensor bytes, not the header (the header's own damage shows as a JSON, UTF-8 or offsets error).
 * To PyTorch and the safetensors package it is one more metadata string
 * (safe_open(path, "pt").metadata()["cuttle.checksum"]); they do not check it. The key is reserved:
 * ct_safetensors_save and ct_checkpoint_save refuse it among the caller's metadata (CT_EINVAL),
 * since a value copied from another file would not match the tensors written. */
#define CT_SAFETENSORS_CHECKSUM_KEY "cuttle.checksum"

/* One "__metadata__" entry: both strings are UTF-8 and borrowed from the caller. */
typedef struct {
  const char *key;
  const char *value;
} ct_metadata_kv;

/* ---- writing */

/* Write n tensors under the given names, plus n_meta metadata strings, to the safetensors file path.
 * tensors: any shape (up to 8 dims), dtype and device; each is copied to the host in its own dtype
 * (ct_to_host, a synchronization point for a GPU tensor) and written row-major little-endian, as
 * dtype F32, F64, F16, BF16, I32, I64, U8 or BOOL (bool as one byte, 0 or 1). Nothing is taken over:
 * names, tensors and meta stay the caller's. n may be 0 (a file with only metadata, or none).
 *
 * The write is atomic, for every caller: path holds either its old content (or nothing) or the
 * complete new file, never a torn one, even when the process is killed or the machine loses power
 * during the save. The bytes go to an unnamed file in path's directory (open with O_TMPFILE, so a
 * SIGKILL while writing leaves nothing behind), which is fsync'ed, linked as "<path>.tmp.<pid>",
 * renamed over path, and then the directory is fsync'ed (the rename is atomic within one file
 * system, POSIX rename(2); the fsyncs make it durable). Where O_TMPFILE is missing (kernels before
 * 3.11, NFS, no /proc) the bytes are written to "<path>.tmp.<pid>" directly. Either way, a process
 * killed while that name exists leaves it behind; every save first removes the "<path>.tmp.<pid>"
 * files beside path whose pid is no longer a running process (a live one is never touched; on a
 * file system shared by several machines a pid is only checked on this one, so do not save to one
 * path from two machines at once). Two threads saving to the same path at once is not supported.
 * On any error the temporary file is removed and an existing file at path is left as it was.
 * Test hook: the environment variable CUTTLE_TEST_SAVE_DELAY_MS=N pauses every save N ms after the
 * header is written, so tests can interrupt a half-written file; it is for tests only.
 *
 * The bytes are exactly those of the reference writer for the same tensors and metadata: no checksum
 * is added (ct_checkpoint_save adds one, CT_SAFETENSORS_CHECKSUM_KEY).
 *
 * Errors: CT_EINVAL for a NULL argument, a NULL tensor, a name that is NULL, repeated or
 * "__metadata__", a repeated metadata key, the reserved key CT_SAFETENSORS_CHECKSUM_KEY, or a string
 * that is not valid UTF-8; CT_EIO (the message
 * names the file and the system error) when the file cannot be created, written, synced or renamed;
 * CT_ENOMEM; the status of ct_to_host for a tensor that cannot be copied. */
CT_API ct_status ct_safetensors_save(const char *path, int n, const char *const *names, ct_tensor *const *tensors,
                              int n_meta, const ct_metadata_kv *meta);

/* ---- reading */

/* A parsed, validated safetensors file held in memory. Opaque; freed with ct_safetensors_close. */
typedef struct ct_safetensors ct_safetensors;

/* Read the whole file at path into memory (the handle holds all of it until closed) and parse it
 * with ct_safetensors_parse (label: path). The caller frees
 * the result with ct_safetensors_close. Errors (NULL return): CT_EIO when the file cannot be read,
 * CT_EFORMAT as for ct_safetensors_parse, CT_ENOMEM. */
CT_API ct_safetensors *ct_safetensors_open(const char *path);

/* Parse and validate the size bytes at data as a whole safetensors file. The bytes are copied, so
 * data stays the caller's and may be freed at once. label names the source in error messages
 * ("<memory>" when NULL). Every message is "<label>: <problem>".
 *
 * Checks, in order (those of the reference reader, and the cap on N is its MAX_HEADER_SIZE):
 *  - size >= 8, and 2 <= N <= CT_SAFETENSORS_MAX_HEADER (100,000,000), and 8 + N <= size;
 *  - the header is UTF-8 with no NUL byte, starts with '{' and is one JSON object (trailing spaces
 *    allowed);
 *  - no key appears twice: tensor names, "__metadata__", keys inside "__metadata__", and the fields
 *    of a tensor entry;
 *  - "__metadata__", when present, is an object of strings;
 *  - every other key maps to an object with "dtype" (a string naming a known dtype), "shape" (an
 *    array of non-negative integers) and "data_offsets" (an array of two non-negative integers);
 *    other fields are ignored, as the reference does. Integers must be exact (at most 2^53, since
 *    cJSON reads numbers as doubles) and have no fraction;
 *  - sorted by (begin, end), the tensors' data_offsets tile the buffer: the first begins at 0, each
 *    begins where the one before ends (no gap, no overlap), end >= begin, and the last ends at the
 *    buffer's size (the file size - 8 - N);
 *  - each tensor's byte count, the product of its shape times the dtype size (checked for
 *    overflow), equals end - begin;
 *  - when "__metadata__" holds CT_SAFETENSORS_CHECKSUM_KEY (cuttle's checkpoints), its value is
 *    "xxh3_64:" and 16 lowercase hex digits, and XXH3_64bits of the byte buffer (all tensor bytes,
 *    not the header) equals it; otherwise CT_EFORMAT: "<label>: the tensor bytes do not match the
 *    checksum recorded at save (xxh3_64 <recorded> recorded, <computed> computed): the file is
 *    damaged; use another checkpoint", or, for a malformed value, one saying the value is not of
 *    that form. A file without the key (PyTorch's, safetensors.torch.save_file's, cuttle's before
 *    checksums) is not checked. Hashing runs at several GB/s, a small part of reading the file.
 * Known dtypes are those of the format as of safetensors 0.8: BOOL F4 F6_E2M3 F6_E3M2 U8 I8 F8_E5M2
 * F8_E4M3 F8_E8M0 I16 U16 F16 BF16 I32 U32 F32 F64 C64 I64 U64; for the sub-byte ones (F4: 4 bits,
 * F6_*: 6 bits) a tensor must fill a whole number of bytes. A file may hold dtypes cuttle has no
 * tensor type for: it parses, and ct_safetensors_get fails for those tensors only.
 * Errors (NULL return): CT_EFORMAT naming the problem and, where one is at fault, the tensor;
 * CT_ENOMEM; CT_EINVAL for NULL data with size > 0. This is the entry point of the fuzz target
 * tests/fuzz/fuzz_safetensors.c. */
CT_API ct_safetensors *ct_safetensors_parse(const void *data, size_t size, const char *label);

/* Free everything the handle owns. NULL is allowed. */
CT_API void ct_safetensors_close(ct_safetensors *f);

/* The number of tensors in the file; -1 with CT_EINVAL for NULL (as ct_safetensors_metadata_count). */
CT_API int ct_safetensors_count(const ct_safetensors *f);

/* What the header says about one tensor. Pointers are borrowed from f and valid until it is closed. */
typedef struct {
  const char *name;     /* UTF-8 */
  const char *format_dtype; /* as in the file: "F32", "I16", ... */
  ct_dtype dtype;           /* the cuttle dtype, or CT_DTYPE_COUNT when cuttle has none (I16, U64, ...) */
  int ndim;             /* may exceed CT_MAX_DIMS in a valid file; such a tensor cannot be loaded */
  const int64_t *shape; /* ndim entries */
  size_t offset;        /* bytes from the start of the byte buffer (data_offsets[0]) */
  size_t nbytes;        /* data_offsets[1] - data_offsets[0] */
} ct_safetensors_info;

/* Fill *out for tensor i, 0 <= i < count, in order of name (strcmp). Errors: CT_EINVAL for a NULL
 * argument or i out of range. */
CT_API ct_status ct_safetensors_info_at(const ct_safetensors *f, int i, ct_safetensors_info *out);

/* The index of the tensor called name (for ct_safetensors_info_at), or -1 when there is none (and
 * CT_EINVAL set when f or name is NULL). */
CT_API int ct_safetensors_find(const ct_safetensors *f, const char *name);

/* A new tensor on dev holding a copy of the tensor called name, with its shape and dtype. The caller
 * owns it (see tensor.h). BOOL bytes other than 0 read as true. Errors (NULL return): CT_EINVAL for
 * a NULL argument or a name not in the file (the message lists up to 5 names that are); CT_EDTYPE
 * for a dtype cuttle has no tensor type for; CT_EUNSUPPORTED for more than CT_MAX_DIMS dims;
 * CT_EDEVICE, CT_ENOMEM. */
CT_API ct_tensor *ct_safetensors_get(const ct_safetensors *f, const char *name, ct_device dev);

/* The value of metadata key, borrowed from f, or NULL when the file has no such key (and CT_EINVAL
 * set when f or key is NULL). */
CT_API const char *ct_safetensors_metadata(const ct_safetensors *f, const char *key);
/* The number of metadata entries, and entry i of them (in file order; borrowed strings). */
CT_API int ct_safetensors_metadata_count(const ct_safetensors *f);
CT_API ct_status ct_safetensors_metadata_at(const ct_safetensors *f, int i, const char **key, const char **value);

/* ---- model and training checkpoints (one safetensors file) */

/* The value of "format" in a checkpoint's metadata. Version 2 records the optimizer's kind exactly
 * ("adamw"); version 1 wrote "adam" for AdamW too. ct_checkpoint_load reads both. */
#define CT_CHECKPOINT_FORMAT "cuttle-checkpoint-2"

/* What a training run needs beyond the tensors to resume where it stopped. */
typedef struct {
  int64_t epoch;     /* epochs completed */
  ct_generator rng;  /* the state (seed, offset) of the generator the run draws from */
  /* save only: more metadata strings to store (keys must not be reserved, see below); borrowed */
  int n_extra;
  const ct_metadata_kv *extra;
  /* load only: 1 when the file held "epoch" (a cuttle training checkpoint), else 0 and epoch, rng
   * are zero (a model-only or PyTorch-written file) */
  int has_training_state;
  /* load only: 1 when the file names the optimizer it was saved with, which is then in optimizer
   * (a version-1 file says CT_OPTIM_ADAM for AdamW too); else 0 and CT_OPTIM_SGD */
  int has_optimizer;
  ct_optim_kind optimizer;
  /* The GradScaler's state (PyTorch saves scaler.state_dict() beside the model's). Save: with
   * has_grad_scaler 1, grad_scaler (from ct_grad_scaler_state_get) is stored as the metadata
   * strings "grad_scaler.scale", ".growth_factor", ".backoff_factor" ("%.17g", exact),
   * ".growth_interval", ".growth_tracker", ".steps_taken", ".steps_skipped" and
   * ".last_step_skipped" (decimal integers). Load: has_grad_scaler is 1 when the file holds them,
   * and grad_scaler is filled, for ct_grad_scaler_state_set (which checks the ranges); else both
   * are zero. */
  int has_grad_scaler;
  ct_grad_scaler_state grad_scaler;
} ct_checkpoint_meta;

/* Save a model (and optionally its optimizer and training state) to the safetensors file path,
 * atomically: path holds either its old content or the complete new file, never a torn one, even if
 * the process is killed (SIGKILL) or the machine loses power during the save; no temporary file is
 * left behind (see ct_safetensors_save for how).
 *
 * Keys. The model's parameters and buffers go under their state_dict names from
 * ct_module_named_tensors(m, 1, ...) ("0.weight", "1.running_mean"), in their own dtype, so PyTorch
 * reads the model part with
 *     sd = safetensors.torch.load_file(path)
 *     model.load_state_dict({k: v for k, v in sd.items() if not k.startswith("optimizer.")})
 * (or load_state_dict(sd, strict=False)). With opt (may be NULL), every optimizer state tensor
 * "state.<param>.<slot>" from ct_optimizer_named_state goes under "optimizer.state.<param>.<slot>"
 * (slot: momentum_buffer, exp_avg, exp_avg_sq). State slots that the optimizer has not created yet
 * (before its first step) are not written.
 *
 * Metadata strings (all reserved): "format" = CT_CHECKPOINT_FORMAT; with meta: "epoch", "rng_seed",
 * "rng_offset" (decimal integers), and the "grad_scaler.*" strings when meta->has_grad_scaler; with opt: "optimizer" (the kind it was created with: "sgd",
 * "adam" or "adamw"), "optimizer.lr" ("%.17g", so it reads back exactly), "optimizer.steps".
 * meta->extra adds more strings. Last, always, CT_SAFETENSORS_CHECKSUM_KEY ("cuttle.checksum") =
 * "xxh3_64:<16 lowercase hex digits>", the XXH3_64bits hash of all tensor bytes in file order (not
 * the header), computed while the tensors are written: each tensor is still copied to the host
 * once; the header is written first with a placeholder of the same width and rewritten in place
 * with the value before the file is synced and renamed, so the save stays atomic. Every later open
 * of the file verifies it (see ct_safetensors_parse), so a damaged checkpoint fails to load rather
 * than loading wrong weights.
 *
 * Errors: CT_EINVAL for a NULL path or module, or an extra key that is reserved or repeated; those
 * of ct_safetensors_save. On error an existing file at path is untouched. */
CT_API ct_status ct_checkpoint_save(const char *path, ct_module *m, ct_optimizer *opt, const ct_checkpoint_meta *meta);

/* Load a checkpoint written by ct_checkpoint_save, or a PyTorch state_dict saved with
 * safetensors.torch.save_file, into m (and opt, and *meta_out; both may be NULL).
 *
 * Two phases: everything is validated first, and nothing in m or opt changes unless all of it
 * passes. Validation (the first problem is named, with the key):
 *  - every tensor of m's state_dict is in the file (CT_EFORMAT "missing key") with the same shape
 *    (CT_ESHAPE "0.weight: file has (32, 1, 3, 3), model has (64, 1, 3, 3)"), except BatchNorm's
 *    int64 "num_batches_tracked" buffers: a file without them (PyTorch before 0.4.1) loads, the
 *    model's counts left as they were, as torch's _NormBase._load_from_state_dict does;
 *  - dtypes: the same dtype, or both floating, in which case the values are converted (a file saved
 *    in float16 loads into a float32 model, rounding as ct_copy_ does); any other pair is CT_EDTYPE;
 *  - strict about extra keys, like PyTorch's load_state_dict default: a key in the file that m lacks
 *    is CT_EFORMAT "unexpected key", except (a) keys starting with "optimizer." when opt is NULL, and
 *    (b) int64 "num_batches_tracked" buffers (any key ending in it) that m lacks (a module built
 *    without them), so files PyTorch wrote load;
 *  - with opt: when the file names its optimizer ("optimizer"), opt must be of that kind, as the
 *    optimizer a PyTorch user constructs must be the one whose state_dict they load: CT_EINVAL naming
 *    both ("the checkpoint holds the state of an adamw optimizer, but the optimizer given is adam").
 *    A version-1 file's "adam" matches Adam and AdamW. SGD with and without momentum are one kind;
 *    their state differs (momentum buffers) and is checked as below;
 *  - with opt: the file must hold optimizer state (metadata "optimizer.steps"); opt's state slots are
 *    created (ct_optimizer_init_state) when the file has any, and then every slot must be in the file
 *    with its shape, and every "optimizer." tensor in the file must be a slot of opt. A file with no
 *    state tensors (saved before the first step) loads only into an optimizer with none.
 *    Note: creating the slots is the one change that may remain after a failed load; zero slots are
 *    what the first step would start from.
 * Then the tensors are copied into m's and opt's own tensors with ct_copy_ (so they stay on their
 * devices and keep their handles), under no-grad, and opt's lr and step count are set from the file.
 * *meta_out receives epoch, rng and the optimizer kind (n_extra 0, extra NULL; read other strings
 * with ct_safetensors_open and ct_safetensors_metadata).
 *
 * The file's checksum (CT_SAFETENSORS_CHECKSUM_KEY), when it has one, is verified as the file is
 * opened, before anything is validated or copied: tensor bytes damaged since the save (a flipped
 * bit, a torn copy of the same length) fail with CT_EFORMAT naming the file, the recorded and the
 * computed value ("ck.safetensors: the tensor bytes do not match the checksum recorded at save
 * (xxh3_64 ... recorded, ... computed): the file is damaged; use another checkpoint"), and m and opt
 * are left as they were. Files without the key (PyTorch's, older cuttle's) load unchecked.
 *
 * Errors: CT_EINVAL for a NULL path or module, or an optimizer of another kind than the file's;
 * those of ct_safetensors_open (CT_EFORMAT for a checksum mismatch); CT_EFORMAT for a checkpoint of a later format version, a malformed
 * number in the metadata or an unknown "optimizer", and as above. */
CT_API ct_status ct_checkpoint_load(const char *path, ct_module *m, ct_optimizer *opt, ct_checkpoint_meta *meta_out);

#ifdef __cplusplus
}
#endif
#endif
