/* src/backend/opencl/opencl_backend.h: what the OpenCL backend's files share: the per-device
 * context, the device "pointers", the strided iterator, the kernel launcher and the CLBlast GEMM.
 * The backend's folder is the only place that includes CL headers; what every backend shares
 * (temporaries, chunking, CT_TRY) is in backend/common.h.
 *
 * Layers. A file calls only files of the layers below it (in parentheses), never one of its own
 * layer or above, so no two files call each other; in layer 4, where the kernels' files are, the
 * calls go one way (conv_relu_pool.c -> conv.c -> matmul.c -> copy.c). Checked on the objects' symbols
 * (nm), as scripts/include_graph.sh checks the core.
 *   5  backend.c      the vtable, and its device_props: device.c's facts, the allocator's figures
 *   4  copy.c         memcpy, the copy and fill kernels              (launch, allocator, pinned, context)
 *      elementwise.c, reduce.c, matmul.c (and ct__ocl_gemm), conv.c, conv_relu_pool.c, pool.c,
 *      softmax.c, attention.c, random.c, index.c, optim.c, amp.c, bench_access.c (launch, context, ...)
 *   3  launch.c       kernel arguments and launching              (allocator, program, context, device)
 *      event.c        synchronization, streams and events   (allocator's call_error, context, device)
 *   2  allocator.c    the caching allocator, in a table of its own, and ct__ocl_call_error
 *                                                                                    (context, device)
 *      program.c      the program: its source (with the ops.def formulas), build and disk cache
 *                                                                  (the context it is given, device)
 *      pinned.c       pinned host memory                                             (context, device)
 *   1  context.c      the per-device contexts, the exit guard, the CLBlast lock               (device)
 *   0  device.c       enumeration, the devices' facts, the OpenCL error names                (nothing)
 *
 * Device pointers. OpenCL buffers are cl_mem handles, not addresses, but cuttle's storage holds a
 * void * and the core computes element addresses as data + offset * itemsize (ct__ptr) before it
 * calls memcpy. So each buffer gets a window of a virtual address space: the allocator gives a
 * buffer slot s the address (s + 1) << CT_OCL_SLOT_BITS, and ct__ocl_resolve turns any address
 * inside the window back into (cl_mem, byte offset). Nothing ever dereferences these addresses;
 * ct_tensor_data returns NULL for a device tensor. A buffer is therefore at most 2^36 bytes (64 GiB). */
#ifndef CUTTLE_OPENCL_BACKEND_H
#define CUTTLE_OPENCL_BACKEND_H

#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include "core/backend.h"
#include "backend/common.h"

/* The kernels of core/kernels.def, ct__ocl_<name>, each in the file of its family; the table is in
 * backend.c. */
#define CT_KERNEL(name, params) ct_status ct__ocl_##name params;
#include "core/kernels.def"

#define CT_OCL_MAX_DEVICES 64
#define CT_OCL_SLOT_BITS 36
#define CT_OCL_MAX_KERNELS 64 /* the kernels a context may create (program.c's table); kernels/ defines 38 */

/* One OpenCL device: fixed facts from enumeration (device.c). */
typedef struct {
  cl_platform_id platform;
  cl_device_id device;
  cl_device_type type;
  char name[256], vendor[128], driver[64];
  size_t global_mem, max_alloc;
  int fp16, fp64;
} ct__ocl_devinfo;

/* The context of one device, created on first use (context.c) and kept until the process ends.
 * The device's allocator is allocator.c's, in a table of its own. */
/* A kernel of the device's program, made on its first launch. */
typedef struct {
  const char *name;
  cl_kernel k;
  size_t group; /* ct__ocl_launch_groups' work-group size for it, found on its first such launch (0 before) */
} ct__ocl_kernel_entry;

typedef struct {
  int index;
  const ct__ocl_devinfo *info;
  cl_context context;
  cl_command_queue compute; /* in order: every kernel, CLBlast call and blocking copy */
  cl_command_queue copy;    /* in order: the non-blocking copies from and to pinned host memory (copy.c) */
  pthread_mutex_t lock;     /* guards the program, the kernel table and every clSetKernelArg/enqueue pair */
  cl_program program;       /* built on first launch (program.c) */
  int nkernels;
  ct__ocl_kernel_entry kernels[CT_OCL_MAX_KERNELS];
} ct__ocl_ctx;

/* ---- devices (device.c; the vtable's device_props is in backend.c) */
int ct__ocl_device_count(void);
const ct__ocl_devinfo *ct__ocl_devinfo_get(int index); /* NULL when index is out of range */
int ct__ocl_device_is_gpu(int index);
const char *ct__ocl_errstr(cl_int e);

/* ---- contexts (context.c): NULL with CT_EDEVICE / CT_EBACKEND set on failure */
ct__ocl_ctx *ct__ocl_ctx_get(int index);
ct__ocl_ctx *ct__ocl_ctx_peek(int index); /* the context when it exists, else NULL (no error) */
/* Called after each successful enqueue of a kernel (cuttle's or CLBlast's): the first time in the
 * process, waits for the compute queue and registers the at-exit handler that finishes every queue
 * (context.c says why it must come after the first compilation). */
void ct__ocl_exit_guard(ct__ocl_ctx *c);

/* ---- CLBlast calls: ct__ocl_blas_lock takes c->lock (CLBlast enqueues on the compute queue,
 * between cuttle's launches) and then one process-wide lock, because CLBlast is not safe to call
 * from two threads at once even on two devices: its Database constructor fills a class-static
 * vector (Database::database, src/database/database.cpp of CLBlast 1.5.3) on first use without a
 * lock, so two threads' first GEMMs (ct_data_parallel's replicas) race on it (ThreadSanitizer
 * found it). The calls only enqueue, so holding the lock costs little. Unlock in reverse. */
void ct__ocl_blas_lock(ct__ocl_ctx *c);
void ct__ocl_blas_unlock(ct__ocl_ctx *c);

/* ---- the program (program.c): the kernel `name` of the device's program (its entry in ctx's
 * table), built or loaded from the on-disk cache on first use; NULL with the error set. The caller
 * holds ctx->lock. */
ct__ocl_kernel_entry *ct__ocl_kernel(ct__ocl_ctx *ctx, const char *name);

/* ---- memory (allocator.c) */
void *ct__ocl_alloc(int index, size_t nbytes);
void ct__ocl_free(int index, void *p, size_t nbytes);
/* The buffer holding address p of device index and p's byte offset in it; CT_EINVAL for an address
 * that is no live buffer's (a bug). */
ct_status ct__ocl_resolve(int index, const void *p, cl_mem *mem, size_t *byte_offset);
ct_status ct__ocl_memory_stats(int index, ct_memory_stats *out);
ct_status ct__ocl_empty_cache(int index);
ct_status ct__ocl_reset_peak(int index);
/* 1 when the OpenCL status e says the driver ran out of memory (CL_MEM_OBJECT_ALLOCATION_FAILURE,
 * CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY). PoCL and most drivers create buffers lazily, so
 * these come back from the first enqueue that touches a buffer as often as from clCreateBuffer. */
int ct__ocl_is_oom(cl_int e);
/* The error of the failed OpenCL call `what` on device index: CT_ENOMEM with the allocator's
 * figures when e is an out-of-memory status (ct__ocl_is_oom), else CT_EBACKEND. Returns the status. */
ct_status ct__ocl_call_error(int index, const char *what, cl_int e);

/* ---- pinned host memory (pinned.c): the vtable's pinned_* entries, and whether [p, p + nbytes)
 * lies inside a live pinned block (only then may a copy from or to it be asynchronous); a block
 * found is marked as used by a queued copy, so that freeing it fences the copy queues */
void *ct__ocl_pinned_alloc(size_t nbytes);
void ct__ocl_pinned_free(void *p, size_t nbytes);
void ct__ocl_pinned_stats(ct_memory_stats *out);
void ct__ocl_pinned_empty_cache(void);
int ct__ocl_pinned_use(const void *p, size_t nbytes);

/* ---- synchronization, streams and events (event.c): the vtable's synchronize, stream_* and
 * event_* entries */
ct_status ct__ocl_synchronize(int index);
ct_status ct__ocl_stream_new(int index, void **out);
void ct__ocl_stream_free(int index, void *stream);
ct_status ct__ocl_stream_synchronize(int index, void *stream);
ct_status ct__ocl_stream_wait_event(int index, void *stream, void *event);
ct_status ct__ocl_event_record(int index, void *stream, void **out);
ct_status ct__ocl_event_synchronize(int index, void *event);
int ct__ocl_event_query(int index, void *event);
ct_status ct__ocl_event_elapsed_ms(int index, void *start, void *end, double *ms);
void ct__ocl_event_free(int index, void *event);

/* ---- copies (copy.c) */
ct_status ct__ocl_memcpy(int index, void *dst, const void *src, size_t nbytes, int dir, int non_blocking);

/* ---- launching (launch.c). A tensor operand as kernel arguments: its buffer and its element
 * offset from the buffer's start */
typedef struct {
  cl_mem mem;
  cl_long off;
  cl_int dt;
} ct__ocl_buf;
ct_status ct__ocl_buf_of(const ct_tensor *t, ct__ocl_buf *out);

/* the strided iterator: core's ct__strided laid out for the kernels (kernels/a_common.cl has the
 * device half) */
typedef struct {
  cl_long ndim;
  cl_long size[CT_MAX_DIMS];
  cl_long stride[4][CT_MAX_DIMS];
} ct__ocl_iter;
/* Merge dims of shape where every operand is contiguous across them; strides[k] NULL: zeros. */
void ct__ocl_iter_init(ct__ocl_iter *it, int ndim, const int64_t *shape, int nops, const int64_t *const *strides);

/* kernel `name` over n work-items with nargs arguments (sizes and values) */
typedef struct {
  size_t size;
  const void *value;
} ct__ocl_arg;
#define CT_OCL_ARG(x) ((ct__ocl_arg){sizeof(x), &(x)})
ct_status ct__ocl_launch(int index, const char *name, size_t n, int nargs, const ct__ocl_arg *args);
/* kernel `name` as ngroups work-groups of the largest power of two of work-items, at most
 * CT_OCL_GROUP_MAX (16 on a CPU device), that the kernel allows on the device
 * (CL_KERNEL_WORK_GROUP_SIZE): for kernels
 * that reduce within a work-group in a __local array of CT_OCL_GROUP_MAX (kernels/a_common.cl's
 * group_sum). The kernel reads its size with get_local_size(0). */
#define CT_OCL_GROUP_MAX 256
ct_status ct__ocl_launch_groups(int index, const char *name, size_t ngroups, int nargs, const ct__ocl_arg *args);
/* REAL, the kernels' compute type, for scalar arguments: a double where the device has fp64 */
typedef union {
  cl_double d;
  cl_float f;
} ct__ocl_real;
ct__ocl_arg ct__ocl_real_arg(int index, double v, ct__ocl_real *slot);

/* ---- the CLBlast GEMM (matmul.c), for matmul, conv2d and the fused conv: C (M, N) = op(A) op(B) +
 * beta C, row-major, in float32 or float64 (dt), on c's compute queue under ct__ocl_blas_lock,
 * offsets in elements. A failure names op: CT_ENOMEM with the allocator's figures when CLBlast
 * reports OpenCL's out of memory, else CT_EBACKEND. */
ct_status ct__ocl_gemm(ct__ocl_ctx *c, const char *op, ct_dtype dt, int ta, int tb, int64_t M, int64_t N, int64_t K,
                       cl_mem a, size_t aoff, size_t lda, cl_mem b, size_t boff, size_t ldb, double beta, cl_mem cm,
                       size_t coff, size_t ldc);

/* ---- conv.c's lowering, which conv_relu_pool.c shares: kernels/conv.cl's conv_geom, field for
 * field, for x (N, C, H, W), w (O, C/G, kH, kW) and a conv output of (Ho, Wo); n0 and nb (the
 * chunk of images) start at 0 */
typedef struct {
  cl_long C, H, W, kh, kw, Ho, Wo, sh, sw, ph, pw, dh, dw, n0, nb;
} ct__ocl_conv_geom;
ct__ocl_conv_geom ct__ocl_conv_geometry(const ct_tensor *x, const ct_tensor *w, int64_t Ho, int64_t Wo, const ct_conv2d_opts *o);
/* cols (C kH kW, nb L) of the chunk g.n0 .. g.n0 + g.nb - 1 of x, in cols' dtype. */
ct_status ct__ocl_im2col(int idx, const ct__ocl_buf *cols, const ct__ocl_buf *x, const ct__ocl_conv_geom *g, int64_t Kall);

/* One chunk of the backward from gyT (O, nb L), the chunk's conv output gradient: the GEMMs (op
 * names them in errors, dt is their precision) and col2im that take gyT to gw (through x's cols:
 * the chunk of n0 == 0 overwrites gw, later ones add) and to gx (through dcols). init resolves the
 * buffers: gw's side (x, cols, gw) only when gw is given, gx's (w, dcols, gx) only when gx is. */
typedef struct {
  ct__ocl_ctx *c;
  const char *op;
  ct_dtype dt;
  int64_t G, O;
  int want_gw, want_gx;
  ct__ocl_buf gyT, x, cols, gw, w, dcols, gx;
} ct__ocl_conv_grads;
ct_status ct__ocl_conv_grads_init(ct__ocl_conv_grads *b, ct__ocl_ctx *c, const char *op, ct_dtype dt, int64_t G, int64_t O,
                                  ct_tensor *gyT, ct_tensor *x, ct_tensor *cols, ct_tensor *gw, ct_tensor *w, ct_tensor *dcols,
                                  ct_tensor *gx);
ct_status ct__ocl_conv_backward_chunk(const ct__ocl_conv_grads *b, const ct__ocl_conv_geom *g);

/* A failed OpenCL call (cl_int) returns ct__ocl_call_error's status. */
#define CT_OCL_TRY(call, what, index)                                    \
  do {                                                                   \
    cl_int e_ = (call);                                                  \
    if (e_ != CL_SUCCESS) return ct__ocl_call_error((index), (what), e_); \
  } while (0)

#endif
