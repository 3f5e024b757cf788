/* src/core/internal.h: the tensor and storage structs and the helpers every layer of the core
 * shares. Not installed; only src/ includes it. */
#ifndef CUTTLE_INTERNAL_H
#define CUTTLE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "cuttle.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ct_backend;
struct ct_node;

/* The index space of up to four operands of one shape walked together (src/core/strided.c), from
 * which each backend's strided iterator starts: size-1 dims dropped, and adjacent dims across which
 * every operand is contiguous merged into one. ndim is the count of dims kept, 0 for a single
 * element; stride[k] is operand k's, in the unit its strides were given in. */
#define CT_STRIDED_MAX_OPS 4
typedef struct {
  int ndim;
  int64_t size[CT_MAX_DIMS];
  int64_t stride[CT_STRIDED_MAX_OPS][CT_MAX_DIMS];
} ct__strided;
/* Build it from shape (ndim dims) and each operand's strides (nops <= CT_STRIDED_MAX_OPS arrays of
 * ndim entries; NULL: a broadcast operand, stride 0 in every dim). */
void ct__strided_init(ct__strided *it, int ndim, const int64_t *shape, int nops, const int64_t *const *strides);

/* A block of memory on one device, shared by every view of it. */
typedef struct ct_storage {
  int refs; /* atomic via __atomic builtins (this header is also read by nvcc as C++) */
  void *data;
  size_t nbytes;
  ct_device device;
  const struct ct_backend *backend;
  void (*release)(struct ct_storage *s); /* NULL: backend->free; else custom (borrowed buffers) */
  void *release_ctx;
  bool pinned; /* host memory that is page-locked (ct_empty_pinned): copies from/to it may be asynchronous */
  /* in-place writes through the library (ct_copy_, ct_fill_, an optimizer step, ...), counted for
   * autograd's check of saved tensors (torch's version counter, which views share as they share
   * this storage); atomic via __atomic builtins */
  uint64_t version;
} ct_storage;

struct ct_tensor {
  int refs; /* atomic via __atomic builtins */
  int ndim;
  int64_t shape[CT_MAX_DIMS];
  int64_t stride[CT_MAX_DIMS]; /* in elements */
  int64_t offset;              /* in elements, into storage */
  ct_dtype dtype;
  ct_device device;
  ct_storage *storage;
  /* autograd */
  bool requires_grad;
  struct ct_node *grad_fn; /* owned; NULL for a leaf */
  /* Frees grad_fn; set by autograd with grad_fn, so that the core frees a node without knowing
   * what a node is (core is the ground floor: it includes nothing from autograd). */
  void (*grad_fn_release)(struct ct_node *n);
  ct_tensor *grad;         /* owned; accumulated gradient of a leaf */
  ct_tensor *bw_grad;      /* owned; gradient being accumulated during one backward pass */
  int bw_pending;          /* consumers not yet processed during one backward pass */
  int bw_mark;             /* visited during one backward pass: its index in the pass's list plus one */
  int scope_refs;          /* references held by scopes on this thread */
  /* References held by tape nodes that take this tensor as an input (autograd's ct__record adds
   * one after its retain, ct__node_free drops one before its release; atomic). A node needs only
   * its inputs' metadata (shape, dtype, device, strides, grad_fn), never their values, which it
   * saves apart as detached views when its rule reads them; so when only nodes still hold a
   * non-leaf, its storage reference goes (refs.c), as PyTorch frees an activation that no
   * backward rule saved once the program drops it. */
  int graph_refs;
};

/* ---- errors (src/core/status.c): set the thread-local message; return the status (or NULL from
 * the macros). */
ct_status ct__error(ct_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Put back a last error saved with ct_last_status and ct_last_error (msg copied), with none of
 * ct__error's side effects (CT_ABORT_ON_ERROR): for code that must leave the caller's error as it
 * found it, such as the profiler's wait. */
void ct__error_restore(ct_status s, const char *msg);
/* ---- files written whole or not at all (src/core/file_replace.c): f = ct__replace_open(op, path,
 * &tmp) opens a new temporary file beside path (NULL with CT_EIO or CT_ENOMEM set, named after op);
 * after writing f, ct__replace_commit(op, f, tmp, path) closes it and renames it over path, or
 * removes it when a write, the close or the rename failed (CT_EIO naming path). Either way f and
 * tmp are gone after the commit. */
FILE *ct__replace_open(const char *op, const char *path, char **tmp);
/* The whole file at path (src/core/file_read.c), malloc'd and NUL-terminated after its *n bytes (the
 * caller frees it); NULL with CT_EIO naming op and the file (cannot open or read it: a directory, a
 * missing file) or CT_ENOMEM. */
char *ct__slurp_file(const char *op, const char *path, size_t *n);
ct_status ct__replace_commit(const char *op, FILE *f, char *tmp, const char *path);
#define CT_FAIL_NULL(status, ...)   \
  do {                              \
    ct__error(status, __VA_ARGS__); \
    return NULL;                    \
  } while (0)
/* Prefix the pending error's message with a context, printf-style ("ct_module_to"), followed by
 * ": ", for a public function whose inner call failed in a way it could not check up front.
 * Returns the pending status (a negative code). */
ct_status ct__error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* ---- argument checks shared by the public entries (src/core/check.c; the two NULL ones are
 * status.c's). Each names op and the argument in its message and returns 0 (or NULL, or the
 * status) with the error set. */
/* A NULL input to op: sets CT_EINVAL naming arg, unless an error is already pending on this thread
 * (then the NULL is that failure's result, and a chain of ops keeps its first message). NULL. */
void *ct__null_arg(const char *op, const char *arg);
/* A NULL argument of a function that returns a status: always CT_EINVAL. */
ct_status ct__null_status(const char *op, const char *arg);
/* ndim in [0, CT_MAX_DIMS], shape not NULL when ndim > 0, sizes >= 0, and their product (into
 * *numel, which may be NULL) within int64, computed with checked multiplication. */
int ct__checked_numel(const char *op, int ndim, const int64_t *shape, int64_t *numel);
int ct__check_dtype(const char *op, ct_dtype dt);
/* dev exists on this machine (CT_EDEVICE otherwise). */
int ct__check_device(const char *op, ct_device dev);
/* Everything a constructor checks: the shape, the dtype, the byte count within int64, the device. */
int ct__check_new(const char *op, int ndim, const int64_t *shape, ct_dtype dt, ct_device dev);
/* Internal invariant: a bug in cuttle, not a user error. */
#define CT_ASSERT(cond)                                                                      \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "cuttle: internal error: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      abort();                                                                               \
    }                                                                                        \
  } while (0)

/* ---- host memory: every allocation of the library goes through these (src/core/alloc.c), so
 * that each failure path can be tested. On failure they return NULL with CT_ENOMEM set, naming what
 * (a short noun phrase: "a tape node") and how many bytes. Memory they return goes back with free(). */
void *ct__malloc(size_t nbytes, const char *what);
void *ct__calloc(size_t n, size_t size, const char *what);
/* Like realloc: p is left as it was when NULL comes back. */
void *ct__realloc(void *p, size_t nbytes, const char *what);
char *ct__strdup(const char *s, const char *what);

/* ---- fault injection, for tests only. ct__fault_inject_alloc(k) makes the k-th allocation from
 * now fail (host: the wrappers above; device: every backend alloc the core makes), once; k <= 0
 * turns it off. The count restarts at every call. CUTTLE_FAIL_ALLOC=k arms the same from the
 * environment for a whole process. ct__fault_alloc_count: allocation points passed since the
 * arming (counted only while armed: arm with INT64_MAX to count without failing);
 * ct__fault_alloc_fired: failures injected since then. */
void ct__fault_inject_alloc(int64_t k);
int64_t ct__fault_alloc_count(void);
int64_t ct__fault_alloc_fired(void);
/* Counts one device allocation point; 1 when it must fail (the caller then reports CT_ENOMEM as
 * the backend would). */
int ct__fault_device_alloc(void);

/* ---- shapes as (ndim, sizes), with no tensor (src/core/shape.c) */
/* Contiguous strides for a shape. */
void ct__contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
int64_t ct__numel(int ndim, const int64_t *shape);
/* Normalize a possibly negative dim; -1 when out of range. */
int ct__dim(int dim, int ndim);
/* Shape as "(2, 3)" into buf. */
char *ct__shape_str(int ndim, const int64_t *shape, char *buf, size_t n);

/* ---- tensors (src/core/tensor.c) */
/* be->alloc(dev.index, nbytes), behind the device fault-injection point: every allocation of
 * device memory by the core goes through it. NULL with CT_ENOMEM set on failure. */
void *ct__device_alloc(const struct ct_backend *be, ct_device dev, size_t nbytes);
/* A new contiguous tensor (uninitialized), registered in the open scope. */
ct_tensor *ct__alloc(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev);
/* A new view header on t's storage (one more storage reference), registered in the open scope. */
ct_tensor *ct__view_of(ct_tensor *t, int ndim, const int64_t *shape, const int64_t *stride, int64_t offset);
/* Address of element 0 of t (storage data + offset * itemsize). */
static inline void *ct__ptr(const ct_tensor *t) {
  return (char *)t->storage->data + t->offset * (int64_t)ct_dtype_size(t->dtype);
}
/* ---- scopes (src/core/scope.c) */
/* Record one more reference to t in the innermost open scope (no-op without a scope). CT_ENOMEM
 * when the scope cannot grow: t is then not recorded. */
ct_status ct__scope_track(ct_tensor *t);
/* One more reference to t, recorded in the innermost open scope like a new tensor: how an op
 * hands back its input as its result. NULL with CT_ENOMEM (and no reference taken) when the scope
 * cannot grow; NULL for a NULL t. */
ct_tensor *ct__retain_tracked(ct_tensor *t);
/* Move one scope reference of t out to the caller (never to a parent scope). */
void ct__untrack(ct_tensor *t);
/* Forget one reference to t held by an open scope of this thread (innermost first): ct_tensor_free
 * calls it before it drops that reference. */
void ct__scope_release_one(ct_tensor *t);

/* ---- reference counts (src/core/refs.c) */
/* Drop t's destruction reference (the last ct_tensor_free without the scope bookkeeping). */
void ct__tensor_decref(ct_tensor *t);
/* Count an in-place write into t's storage (ct_storage.version). The writes that can reach a
 * tensor a graph saved call it: ct_copy_ (and what goes through it: checkpoint load, the
 * collectives' write-back, data-parallel broadcasts), ct_fill_/ct_zero_, optimizer steps on the
 * parameters, batch norm's running statistics, the collectives on host tensors. Gradients and
 * optimizer state, which no graph saves, are written without it. NULL does nothing. */
void ct__bump_version(ct_tensor *t);
/* t's storage version now (what autograd records when it saves t and compares before it reads it). */
uint64_t ct__version(const ct_tensor *t);
/* One more reference to storage s; drop one (s freed, its bytes back to the backend or its
 * release hook, when the last goes; a NULL s is ignored). */
void ct__storage_retain(ct_storage *s);
void ct__storage_release(ct_storage *s);

/* Check that all n tensors live on one device (src/core/tensor.c). op names the op; argument names
 * come from names. Returns CT_OK or CT_EDEVICE with the message the design asks for. */
ct_status ct__same_device(const char *op, int n, ct_tensor *const *ts, const char *const *names);

/* ---- the ledger (src/core/ledger.c): count one copy of nbytes from src to dst (pinned: the host
 * side was page-locked; synchronous: the host waited for it), or one synchronization point. */
void ct__ledger_copy(ct_device src, ct_device dst, size_t nbytes, bool pinned, bool synchronous);
void ct__ledger_sync(void);

/* ---- copies (src/core/copy.c): copy the contiguous src into the contiguous dst of the same dtype
 * and size, across devices or within one. A host<->device copy is asynchronous only when
 * non_blocking is asked and the host side was pinned by the device's own backend; the ledger and
 * the sync-debug mode (under the name op) are told which it was. Between two devices without a
 * direct path the bytes go through the host, counted as two copies. */
ct_status ct__copy_between(const char *op, ct_tensor *dst, ct_tensor *src, int non_blocking);

/* ---- device choice (src/core/best.c): the index in props[0..n) of the best device by policy, -1
 * when n <= 0. CT_BEST_MOST_FREE_MEMORY: the most free_memory. CT_BEST_LEAST_UTILIZATION: the
 * lowest known utilization (an unknown one, -1, ranks after every known one), ties broken by more
 * free memory. Remaining ties go to the lowest index, so the choice is stable. Pure, for tests. */
int ct__best_index(const ct_device_props *props, int n, ct_best_policy policy);

/* ---- sync-debug (ct_set_sync_debug_mode): what an implicit synchronization with device kind
 * does under mode: 0 nothing, 1 warn, 2 fail. Pure, for tests. */
int ct__sync_debug_action(int mode, ct_device_kind kind);
/* Called by every op before it blocks the host on dev implicitly (a blocking copy, ct_item).
 * what says which kind of sync ("device-to-host copy of 8 bytes"). Returns CT_OK (after printing
 * a warning to stderr in mode 1) or, in mode 2, CT_EINVAL with a message naming op. A no-op for
 * the CPU. */
ct_status ct__sync_point(const char *op, ct_device dev, const char *what);
/* 1 while a graph capture runs on device d (core/capture.c): every synchronization of d then fails,
 * since the capture would record it instead of waiting (ct__sync_point, ct_synchronize). */
int ct__capturing(ct_device d);
/* Mark d as the device of the one capture (1), or 0 when a capture already runs; release unmarks. */
int ct__capture_claim(ct_device d);
void ct__capture_release(void);
/* Every path that refuses an op inside a capture (a synchronization, a host copy, state made in the
 * capture) records it here with its name; ct_device_graph_capture_end then fails, naming the first
 * (ct__capture_refused: NULL when none was refused). */
void ct__capture_refuse(const char *op);
const char *ct__capture_refused(void);
/* 1 while a capture runs on any device (pinned host memory is freed with a device-wide wait). */
int ct__capture_running(void);
/* CT_EINVAL naming op when a capture runs on d (recorded as refused), else CT_OK: the core's guard
 * for the calls that would wait for or free what a capture uses (core/cuda.c). */
ct_status ct__capture_guard(const char *op, ct_device d);
/* Warnings printed so far by ct__sync_point (for tests). */
uint64_t ct__sync_debug_warnings(void);

/* ---- tensors with custom storage: like ct__alloc, but the bytes come from alloc(nbytes) and go
 * back through release (the storage's hook; release_ctx = ctx); pinned marks them page-locked.
 * dev must be a host device (the CPU) for pinned memory. */
ct_tensor *ct__alloc_custom(int ndim, const int64_t *shape, ct_dtype dt, ct_device dev, void *(*alloc)(size_t nbytes),
                            void (*release)(ct_storage *s), void *ctx, bool pinned);

/* ---- element conversions used by generic (reference) kernels (the rules: src/core/dtype.c).
 * ct__store converts a value computed in double, as from a floating source: to an integer dtype it
 * truncates toward zero and saturates (NaN -> 0). ct__load_int / ct__store_int carry integer
 * elements (int32, int64, uint8, bool) exactly, and ct__store_int wraps modulo 2^bits as PyTorch
 * does (int32 300 -> uint8 44, int64 2^40 + 5 -> int32 5; bool is v != 0). */
double ct__load(const void *p, ct_dtype dt);
void ct__store(void *p, ct_dtype dt, double v);
int64_t ct__load_int(const void *p, ct_dtype dt);
void ct__store_int(void *p, ct_dtype dt, int64_t v);
/* 1 for the integer dtypes int32, int64, uint8 and bool. */
static inline int ct__dtype_is_int(ct_dtype dt) { return dt == CT_I32 || dt == CT_I64 || dt == CT_U8 || dt == CT_BOOL; }
/* u as a two's complement int64 (u mod 2^64 in [-2^63, 2^63)), with no implementation-defined
 * conversion: integer arithmetic that wraps is done in uint64_t and comes back through here. */
static inline int64_t ct__wrap_i64(uint64_t u) {
  return u <= (uint64_t)INT64_MAX ? (int64_t)u : (int64_t)(u - ((uint64_t)INT64_MAX + 1u)) + INT64_MIN;
}

/* ---- Philox4x32-10: four 32-bit outputs of counter (ctr_lo, ctr_hi) under key seed. */
void ct__philox(uint64_t seed, uint64_t ctr_lo, uint64_t ctr_hi, uint32_t out[4]);

#ifdef __cplusplus
}
#endif
#endif
