/* src/io/dlpack.c: DLPack export and import (cuttle/dlpack.h has the rules; the format is
 * dlpack/dlpack.h of https://github.com/dmlc/dlpack, the Python side the array API standard's
 * "DLPack" page: https://data-apis.org/array-api/latest/design_topics/data_interchange.html).
 *
 * Export: a record holds the DLManagedTensor (first, so the deleter finds the record from its
 * argument), the shape and strides it points at, and one reference to a plain view of the tensor
 * (a header without autograd history, out of any scope), which the deleter releases.
 * Import: a foreign tensor becomes a storage whose bytes are the foreign memory, with a release
 * hook that calls the foreign deleter, and a view with the foreign shape, strides and offset. A
 * struct cuttle made itself is recognized by its deleter and becomes a view of the original
 * storage, which is how an OpenCL tensor round-trips (cuttle cannot adopt a foreign cl_mem). */
#include <stdio.h>
#include <string.h>

#include <dlpack/dlpack.h>

#include "core/backend.h"
#include "cuttle/dlpack.h"
#include "io/dlpack_internal.h"

/* DLPack 0.8 added kDLBool (6); Debian 12's dlpack.h 0.6 predates it. */
#define CT__DL_BOOL 6u

#ifndef DLPACK_MAJOR_VERSION
/* DLPack 1.x's versioned struct, laid out as dlpack.h 1.0 and 1.1 (github.com/dmlc/dlpack,
 * include/dlpack/dlpack.h, tags v1.0 and v1.1) define it, for a dlpack.h older than 1.0. DLPack
 * promises this layout for every 1.x ("A change in major version indicates that we have changed the
 * data layout of the ABI"); tests/io/test_dlpack_v1.c compiles against dlpack.h 1.1 and checks it. */
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
};
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#endif

/* ---- dtypes */

static const struct {
  ct_dtype dt;
  uint8_t code, bits;
} dtype_map[] = {
    {CT_F64, kDLFloat, 64}, {CT_F32, kDLFloat, 32}, {CT_F16, kDLFloat, 16}, {CT_BF16, kDLBfloat, 16},
    {CT_I64, kDLInt, 64},   {CT_I32, kDLInt, 32},   {CT_U8, kDLUInt, 8},    {CT_BOOL, CT__DL_BOOL, 8},
};
#define NMAP (sizeof dtype_map / sizeof dtype_map[0])

static DLDataType dl_dtype(ct_dtype dt) {
  for (size_t i = 0; i < NMAP; i++)
    if (dtype_map[i].dt == dt) return (DLDataType){dtype_map[i].code, dtype_map[i].bits, 1};
  CT_ASSERT(0 && "every cuttle dtype has a DLPack code");
  return (DLDataType){0, 0, 0};
}

static const char *code_name(uint8_t code) {
  switch (code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    case kDLOpaqueHandle: return "opaque handle";
    case kDLBfloat: return "bfloat";
    case kDLComplex: return "complex";
    case CT__DL_BOOL: return "bool";
    default: return "unknown";
  }
}

/* The cuttle dtype of d, or CT_DTYPE_COUNT with CT_EDTYPE set. */
static ct_dtype ct_dtype_of(const char *op, DLDataType d) {
  for (size_t i = 0; i < NMAP && d.lanes == 1; i++)
    if (dtype_map[i].code == d.code && dtype_map[i].bits == d.bits) return dtype_map[i].dt;
  ct__error(CT_EDTYPE,
            "%s: the DLPack dtype (code %u = %s, %u bits, lanes %u) has no cuttle dtype; cuttle exchanges float64, "
            "float32, float16, bfloat16, int64, int32, uint8 and bool with 1 lane: convert the tensor on the producer's "
            "side first (for example with .to(torch.float32))",
            op, d.code, code_name(d.code), d.bits, d.lanes);
  return CT_DTYPE_COUNT;
}

static const char *device_type_name(int type) {
  switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLVPI: return "kDLVPI";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLExtDev: return "kDLExtDev";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    case 14: return "kDLOneAPI";
    case 15: return "kDLWebGPU";
    case 16: return "kDLHexagon";
    default: return "an unknown device type";
  }
}

/* ---- synchronization (the stream rule of cuttle/dlpack.h) */

/* The CUDA stream handle of DLPack's stream number: 0 and 1 the legacy default stream
 * (cudaStreamLegacy is ((cudaStream_t)0x1)), 2 the per-thread default stream (cudaStreamPerThread is
 * ((cudaStream_t)0x2)), any other value a cudaStream_t. */
static void *cuda_stream_of(int64_t stream) { return stream == 0 ? (void *)(uintptr_t)1 : (void *)(uintptr_t)stream; }

/* Make stream `to` of CUDA device index wait for the work queued so far on stream `from` (NULL:
 * cuttle's compute stream), through an event, without blocking the host. */
static ct_status cuda_order(const char *op, int index, void *from, void *to) {
  const ct_backend *be = ct__backend(CT_CUDA);
  if (!be || !be->event_record || !be->stream_wait_event)
    return ct__error(CT_EUNSUPPORTED, "%s: this build has no CUDA streams to order", op);
  void *ev = NULL;
  ct_status s = be->event_record(index, from, &ev);
  if (s == CT_OK) s = be->stream_wait_event(index, to, ev);
  if (ev) be->event_free(index, ev);
  return s == CT_OK ? CT_OK : ct__error_prefix("%s: ordering the streams of cuda:%d", op, index);
}

/* ---- export */

typedef struct {
  ct_tensor *view; /* one reference to a plain view of the exported tensor */
  int64_t shape[CT_MAX_DIMS], strides[CT_MAX_DIMS];
} export_common;
typedef struct {
  DLManagedTensor m; /* first: the deleter's argument is the record */
  export_common c;
} export_legacy;
typedef struct {
  struct DLManagedTensorVersioned m;
  export_common c;
} export_v1;

static void release_common(export_common *c) { ct__tensor_decref(c->view); }
static void legacy_deleter(DLManagedTensor *self) {
  if (!self) return;
  release_common(&((export_legacy *)self)->c);
  free(self);
}
static void v1_deleter(struct DLManagedTensorVersioned *self) {
  if (!self) return;
  release_common(&((export_v1 *)self)->c);
  free(self);
}

/* Fill dl and c for t (the checks, the device, the layout, the synchronization). */
static ct_status fill_export(const char *op, ct_tensor *t, const ct_dlpack_opts *o, DLTensor *dl, export_common *c) {
  int64_t stream = o ? o->stream : 0;
  char name[32];
  DLDevice dev;
  void *data = ct__ptr(t);
  uint64_t byte_offset = 0;
  switch (t->device.kind) {
    case CT_CPU:
      dev = (DLDevice){kDLCPU, 0};
      if (ct__pinned_by(t->storage, ct__backend(CT_CUDA))) dev.device_type = kDLCUDAHost;
      break;
    case CT_CUDA:
      dev = (DLDevice){kDLCUDA, t->device.index};
      if (stream != CT_DLPACK_NO_SYNC && cuda_order(op, t->device.index, NULL, cuda_stream_of(stream)) != CT_OK)
        return ct_last_status();
      break;
    case CT_OPENCL: {
      dev = (DLDevice){kDLOpenCL, t->device.index};
      if (ct__dlpack_ocl_mem(t->device.index, data, &data, &byte_offset) != CT_OK)
        return ct__error_prefix("%s: the cl_mem of an %s tensor", op, ct_device_str(t->device, name, sizeof name));
      if (stream != CT_DLPACK_NO_SYNC && ct_synchronize(t->device) != CT_OK)
        return ct__error_prefix("%s: waiting for the queued work of %s", op, ct_device_str(t->device, name, sizeof name));
      break;
    }
    default:
      return ct__error(CT_EUNSUPPORTED, "%s: a tensor on %s has no DLPack device type", op,
                       ct_device_str(t->device, name, sizeof name));
  }
  ct_tensor *v = ct__view_of(t, t->ndim, t->shape, t->stride, t->offset);
  if (!v) return ct_last_status();
  ct__untrack(v); /* the record owns this reference, not the open scope */
  c->view = v;
  for (int i = 0; i < t->ndim; i++) c->shape[i] = t->shape[i], c->strides[i] = t->stride[i];
  *dl = (DLTensor){.data = data,
                   .device = dev,
                   .ndim = t->ndim,
                   .dtype = dl_dtype(t->dtype),
                   .shape = c->shape,
                   .strides = c->strides,
                   .byte_offset = byte_offset};
  return CT_OK;
}

DLManagedTensor *ct_to_dlpack_ex(ct_tensor *t, const ct_dlpack_opts *o) {
  if (!t) return ct__null_arg("ct_to_dlpack", "t");
  export_legacy *r = ct__calloc(1, sizeof *r, "a DLPack export record");
  if (!r) return NULL;
  if (fill_export("ct_to_dlpack", t, o, &r->m.dl_tensor, &r->c) != CT_OK) {
    free(r);
    return NULL;
  }
  r->m.manager_ctx = r;
  r->m.deleter = legacy_deleter;
  return &r->m;
}

DLManagedTensor *ct_to_dlpack(ct_tensor *t) { return ct_to_dlpack_ex(t, NULL); }

struct DLManagedTensorVersioned *ct_to_dlpack_versioned(ct_tensor *t, const ct_dlpack_opts *o) {
  if (!t) return ct__null_arg("ct_to_dlpack_versioned", "t");
  export_v1 *r = ct__calloc(1, sizeof *r, "a DLPack export record");
  if (!r) return NULL;
  if (fill_export("ct_to_dlpack_versioned", t, o, &r->m.dl_tensor, &r->c) != CT_OK) {
    free(r);
    return NULL;
  }
  r->m.version = (DLPackVersion){1, 0};
  r->m.manager_ctx = r;
  r->m.deleter = v1_deleter;
  r->m.flags = 0;
  return &r->m;
}

/* ---- import */

/* The foreign struct behind an imported storage; the deleter is called only once the import
 * succeeded (armed), so that a failed import leaves the struct to the caller. */
typedef struct {
  void *m;
  int versioned;
  int armed;
} import_ctx;

static void call_deleter(void *m, int versioned) {
  if (versioned) {
    struct DLManagedTensorVersioned *v = m;
    if (v->deleter) v->deleter(v);
  } else {
    DLManagedTensor *l = m;
    if (l->deleter) l->deleter(l);
  }
}

static void import_release(ct_storage *s) {
  import_ctx *c = s->release_ctx;
  if (c->armed) call_deleter(c->m, c->versioned);
  free(c);
}

/* ct__alloc_custom's allocation hook takes no context: the foreign address and whether the hook
 * ran travel in thread-locals. */
static _Thread_local void *import_data;
static _Thread_local int import_alloc_ran;
static void *import_alloc(size_t nbytes) {
  (void)nbytes;
  import_alloc_ran = 1;
  return import_data;
}

/* The span of dl in elements (the largest element offset plus one; 0 without elements) into *span,
 * its strides (row-major when dl has none) into strides. 0 with the error set when a check fails. */
static int layout(const char *op, const DLTensor *dl, int64_t *strides, int64_t *span, int64_t *numel) {
  if (dl->ndim < 0 || dl->ndim > CT_MAX_DIMS)
    return ct__error(CT_ESHAPE, "%s: the tensor has %d dims; cuttle tensors have 0 to %d", op, dl->ndim, CT_MAX_DIMS), 0;
  if (dl->ndim > 0 && !dl->shape) return ct__error(CT_EINVAL, "%s: the tensor has %d dims and a NULL shape", op, dl->ndim), 0;
  if (!ct__checked_numel(op, dl->ndim, dl->shape, numel)) return 0;
  if (dl->strides) {
    for (int i = 0; i < dl->ndim; i++) {
      if (dl->strides[i] < 0)
        return ct__error(CT_EUNSUPPORTED,
                         "%s: stride %lld of dim %d is negative; cuttle's views have strides >= 0: make the tensor "
                         "contiguous on the producer's side first (for example .contiguous() or numpy.ascontiguousarray)",
                         op, (long long)dl->strides[i], i),
               0;
      strides[i] = dl->strides[i];
    }
  } else {
    ct__contiguous_strides(dl->ndim, dl->shape, strides);
  }
  int64_t last = 0;
  for (int i = 0; i < dl->ndim && *numel > 0; i++) {
    int64_t step;
    if (__builtin_mul_overflow(dl->shape[i] - 1, strides[i], &step) || __builtin_add_overflow(last, step, &last))
      return ct__error(CT_ESHAPE, "%s: the tensor's shape and strides span more than 2^63 elements", op), 0;
  }
  *span = *numel > 0 ? last + 1 : 0;
  return 1;
}

/* A struct cuttle exported (recognized by its deleter): a view of the original storage with dl's
 * layout, after which the struct's deleter runs. */
static ct_tensor *import_own(const char *op, void *m, int versioned, export_common *c, const DLTensor *dl, ct_dtype dt,
                             const int64_t *strides, int64_t span) {
  ct_tensor *src = c->view;
  ct_storage *s = src->storage;
  size_t isz = ct_dtype_size(dt);
  char name[32];
  if (dt != src->dtype)
    CT_FAIL_NULL(CT_EINVAL, "%s: the struct cuttle exported as %s now says %s; its dtype must not change", op,
                 ct_dtype_name(src->dtype), ct_dtype_name(dt));
  /* the byte offset of element 0 from the start of the storage */
  int64_t byte;
  if (src->device.kind == CT_OPENCL) {
    void *mem0;
    uint64_t off0;
    if (ct__dlpack_ocl_mem(src->device.index, s->data, &mem0, &off0) != CT_OK) return NULL;
    if (dl->data != mem0)
      CT_FAIL_NULL(CT_EINVAL, "%s: the struct's cl_mem is not the one cuttle exported for %s", op,
                   ct_device_str(src->device, name, sizeof name));
    byte = (int64_t)dl->byte_offset - (int64_t)off0;
  } else {
    byte = (int64_t)((uintptr_t)dl->data + dl->byte_offset - (uintptr_t)s->data);
  }
  int64_t elem = byte / (int64_t)isz;
  if (byte < 0 || byte % (int64_t)isz || (span > 0 && (elem + span) * (int64_t)isz > (int64_t)s->nbytes))
    CT_FAIL_NULL(CT_EINVAL, "%s: the struct cuttle exported now points outside its storage (byte %lld of %zu)", op,
                 (long long)byte, s->nbytes);
  ct_tensor *v = ct__view_of(src, dl->ndim, dl->shape, strides, elem);
  if (!v) return NULL;
  call_deleter(m, versioned); /* v holds the storage now */
  return v;
}

static ct_tensor *import(const char *op, void *m, int versioned, const DLTensor *dl, export_common *own,
                         const ct_dlpack_opts *o) {
  int64_t strides[CT_MAX_DIMS], span, numel;
  if (!layout(op, dl, strides, &span, &numel)) return NULL;
  ct_dtype dt = ct_dtype_of(op, dl->dtype);
  if (dt == CT_DTYPE_COUNT) return NULL;
  int64_t stream = o ? o->stream : 0;
  ct_device dev;
  bool pinned = false;
  int type = dl->device.device_type;
  switch (type) {
    case kDLCPU: dev = CT_DEVICE_CPU; break;
    case kDLCUDAHost: dev = CT_DEVICE_CPU, pinned = true; break;
    case kDLCUDA:
      dev = CT_DEVICE_CUDA(dl->device.device_id);
      if (!ct_device_available(dev))
        CT_FAIL_NULL(CT_EDEVICE,
                     "%s: the tensor lives on kDLCUDA device %d, which this process has not opened: cuttle sees %d CUDA "
                     "device(s)%s",
                     op, dl->device.device_id, ct_device_count(CT_CUDA),
                     ct__backend(CT_CUDA) ? "" : " (this build has no CUDA backend)");
      break;
    case kDLOpenCL:
      dev = CT_DEVICE_OPENCL(dl->device.device_id);
      if (!own)
        CT_FAIL_NULL(CT_EUNSUPPORTED,
                     "%s: a kDLOpenCL tensor that cuttle did not export (device_id %d): cuttle's OpenCL allocator "
                     "cannot adopt a foreign cl_mem yet; copy the values through the host instead",
                     op, dl->device.device_id);
      break;
    default:
      CT_FAIL_NULL(CT_EUNSUPPORTED,
                   "%s: the tensor lives on %s (DLPack device type %d, device_id %d); cuttle imports kDLCPU, "
                   "kDLCUDAHost, kDLCUDA and its own kDLOpenCL tensors: copy it to the CPU on the producer's side first",
                   op, device_type_name(type), type, dl->device.device_id);
  }
  if (own) {
    char a[32], b[32];
    if (!ct_device_eq(own->view->device, dev))
      CT_FAIL_NULL(CT_EINVAL, "%s: the struct cuttle exported from %s now names %s", op,
                   ct_device_str(own->view->device, a, sizeof a), ct_device_str(dev, b, sizeof b));
    return import_own(op, m, versioned, own, dl, dt, strides, span);
  }
  if (numel > 0 && !dl->data) CT_FAIL_NULL(CT_EINVAL, "%s: the tensor has %lld elements and a NULL data pointer", op, (long long)numel);
  uintptr_t base = (uintptr_t)dl->data + (uintptr_t)dl->byte_offset;
  size_t isz = ct_dtype_size(dt);
  if (base % isz)
    CT_FAIL_NULL(CT_EINVAL, "%s: element 0 (data %p + byte_offset %llu) is not aligned to the %zu bytes of %s", op, dl->data,
                 (unsigned long long)dl->byte_offset, isz, ct_dtype_name(dt));
  if (dev.kind == CT_CUDA && stream != CT_DLPACK_NO_SYNC && cuda_order(op, dev.index, cuda_stream_of(stream), NULL) != CT_OK)
    return NULL;

  import_ctx *c = ct__calloc(1, sizeof *c, "a DLPack import record");
  if (!c) return NULL;
  c->m = m;
  c->versioned = versioned;
  static char empty; /* the address of a tensor without elements and without data */
  import_data = base ? (void *)base : &empty;
  import_alloc_ran = 0;
  int64_t extent = span;
  ct_tensor *flat = ct__alloc_custom(1, &extent, dt, dev, import_alloc, import_release, c, pinned);
  if (!flat) {
    if (!import_alloc_ran) free(c); /* else the storage's release freed it */
    return ct__error_prefix("%s", op), NULL;
  }
  ct_tensor *t = ct__view_of(flat, dl->ndim, dl->shape, strides, 0);
  ct_tensor_free(flat); /* t holds the storage, or the storage is gone (c with it) */
  if (!t) return NULL;
  c->armed = 1;
  return t;
}

ct_tensor *ct_from_dlpack_ex(DLManagedTensor *m, const ct_dlpack_opts *o) {
  if (!m) return ct__null_arg("ct_from_dlpack", "m");
  export_common *own = m->deleter == legacy_deleter ? &((export_legacy *)m)->c : NULL;
  return import("ct_from_dlpack", m, 0, &m->dl_tensor, own, o);
}

ct_tensor *ct_from_dlpack(DLManagedTensor *m) { return ct_from_dlpack_ex(m, NULL); }

ct_tensor *ct_from_dlpack_versioned(struct DLManagedTensorVersioned *m, const ct_dlpack_opts *o) {
  const char *op = "ct_from_dlpack_versioned";
  if (!m) return ct__null_arg(op, "m");
  if (m->version.major != 1) {
    unsigned major = m->version.major, minor = m->version.minor;
    call_deleter(m, 1); /* DLPack: on a major version mismatch the consumer must call the deleter */
    CT_FAIL_NULL(CT_EUNSUPPORTED,
                 "%s: the struct is DLPack %u.%u; cuttle reads DLPack 1.x (the struct's deleter has been called, as "
                 "DLPack requires)",
                 op, major, minor);
  }
  if (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    CT_FAIL_NULL(CT_EUNSUPPORTED,
                 "%s: the tensor is read-only (DLPACK_FLAG_BITMASK_READ_ONLY) and cuttle has no read-only tensors: "
                 "export a writable tensor or a copy",
                 op);
  export_common *own = m->deleter == v1_deleter ? &((export_v1 *)m)->c : NULL;
  return import(op, m, 1, &m->dl_tensor, own, o);
}
