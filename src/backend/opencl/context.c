/* src/backend/opencl/context.c: the per-device contexts of the OpenCL backend (layer 1 of the
 * folder, opencl_backend.h: it calls device.c only).
 *
 * A context holds what cuttle keeps for one device: a cl_context, an in-order compute queue (every
 * kernel, CLBlast call and blocking copy, so that work is ordered without events), a copy queue for
 * the non-blocking copies from and to pinned host memory (ordered against the compute queue by
 * events, copy.c), and the program and its kernels (built by program.c). The caching allocator of
 * the device is allocator.c's, which keeps its own table. Both queues are created with profiling
 * on, so that events can be timed. Contexts are created on first use, one per device, under one
 * lock, and live until the process ends; the table of them is the backend's only state besides the
 * device list (device.c) and the allocators. Also here: the exit guard and the CLBlast lock. */
#include "backend/opencl/opencl_backend.h"

static ct__ocl_ctx *ctx_table[CT_OCL_MAX_DEVICES];
static pthread_mutex_t ctx_table_lock = PTHREAD_MUTEX_INITIALIZER;

static void ctx_destroy(ct__ocl_ctx *c) {
  if (c->compute) clReleaseCommandQueue(c->compute);
  if (c->copy) clReleaseCommandQueue(c->copy);
  if (c->context) clReleaseContext(c->context);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

static ct__ocl_ctx *ctx_create(int index) {
  const ct__ocl_devinfo *d = ct__ocl_devinfo_get(index);
  ct__ocl_ctx *c = calloc(1, sizeof *c);
  if (!c) CT_FAIL_NULL(CT_ENOMEM, "opencl:%d: out of host memory for the device context", index);
  c->index = index;
  c->info = d;
  pthread_mutex_init(&c->lock, NULL);
  cl_int e;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform, 0};
  const char *what = "clCreateContext";
  c->context = clCreateContext(props, 1, &d->device, NULL, NULL, &e);
  /* profiling on: events recorded on these queues are timed (ct_event_elapsed_ms, event.c) */
  const cl_command_queue_properties qp = CL_QUEUE_PROFILING_ENABLE;
  if (e == CL_SUCCESS) what = "clCreateCommandQueue", c->compute = clCreateCommandQueue(c->context, d->device, qp, &e);
  if (e == CL_SUCCESS) c->copy = clCreateCommandQueue(c->context, d->device, qp, &e);
  if (e != CL_SUCCESS) {
    ct__error(CT_EBACKEND, "opencl:%d (%s): %s failed while creating the device context: %s", index, d->name, what,
              ct__ocl_errstr(e));
    ctx_destroy(c);
    return NULL;
  }
  return c;
}

ct__ocl_ctx *ct__ocl_ctx_peek(int index) {
  if (index < 0 || index >= CT_OCL_MAX_DEVICES) return NULL;
  pthread_mutex_lock(&ctx_table_lock);
  ct__ocl_ctx *c = ctx_table[index];
  pthread_mutex_unlock(&ctx_table_lock);
  return c;
}

/* Work still queued when the process exits would run while the driver's static destructors do:
 * PoCL compiles each kernel lazily, on its worker threads, when the kernel first runs, with an LLVM
 * whose statics exit is tearing down ("Failed to create kernel compiler pass", then SIGSEGV). So
 * every queue is finished at exit, by a handler that must run before those destructors. atexit
 * handlers run in reverse order of registration, and LLVM registers many of its statics only
 * during its first compilation, so the handler is registered after the process's first kernel has
 * run to completion (ct__ocl_exit_guard), not when the driver is loaded. The table is read without
 * its lock, as a thread that held it would never give it back during exit. */
static void finish_at_exit(void) {
  for (int i = 0; i < CT_OCL_MAX_DEVICES; i++) {
    ct__ocl_ctx *c = ctx_table[i];
    if (!c) continue;
    clFinish(c->compute);
    clFinish(c->copy);
  }
}

void ct__ocl_exit_guard(ct__ocl_ctx *c) {
  static int registered;
  if (__atomic_load_n(&registered, __ATOMIC_ACQUIRE)) return;
  clFinish(c->compute); /* once per process: the first kernel, and the compiler with it, has run */
  if (!__atomic_exchange_n(&registered, 1, __ATOMIC_ACQ_REL)) atexit(finish_at_exit);
}

ct__ocl_ctx *ct__ocl_ctx_get(int index) {
  int n = ct__ocl_device_count();
  if (index < 0 || index >= n)
    CT_FAIL_NULL(CT_EDEVICE, "opencl:%d does not exist: this machine has %d OpenCL device%s", index, n, n == 1 ? "" : "s");
  pthread_mutex_lock(&ctx_table_lock);
  if (!ctx_table[index]) ctx_table[index] = ctx_create(index);
  ct__ocl_ctx *c = ctx_table[index];
  pthread_mutex_unlock(&ctx_table_lock);
  return c;
}

static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER; /* opencl_backend.h says why */

void ct__ocl_blas_lock(ct__ocl_ctx *c) {
  pthread_mutex_lock(&c->lock);
  pthread_mutex_lock(&blas_lock);
}

void ct__ocl_blas_unlock(ct__ocl_ctx *c) {
  pthread_mutex_unlock(&blas_lock);
  pthread_mutex_unlock(&c->lock);
}

