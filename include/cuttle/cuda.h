/* cuttle/cuda.h: what an accelerator (a CUDA GPU, an OpenCL device) adds to the runtime: memory
 * figures and the caching allocators, TensorFloat-32, pinned host memory, streams and events, and
 * the sync-debug mode. The names follow torch.cuda; everything but TF32 applies to OpenCL devices
 * too (an OpenCL stream is an in-order command queue, an event a marker on one).
 *
 * Every function here is callable in every build. For a device that does not exist (a GPU in a
 * build without CUTTLE_WITH_CUDA or on a machine without one) they fail with CT_EDEVICE and a
 * message that says so, the memory figures of a missing device are zeros, and pinned memory is
 * ordinary host memory where no backend pins (see "Pinned" below). The CPU is a device too: its
 * memory figures, cache, streams and events work everywhere (events on the CPU complete when
 * recorded and time with the monotonic clock).
 *
 * There is no current device and no current stream: every op runs on its device's compute stream,
 * in program order. A copy with CT_NON_BLOCKING from or to pinned memory runs on the device's copy
 * stream (queue), fenced by events both ways, so results never depend on it; ct_synchronize waits
 * for both streams. */
#ifndef CUTTLE_CUDA_H
#define CUTTLE_CUDA_H

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
 * Memory (torch.cuda.memory_allocated, memory_reserved, max_memory_allocated, empty_cache) */

typedef struct {
  size_t allocated;            /* bytes in blocks held by tensors now (after the allocator's rounding) */
  size_t reserved;             /* bytes obtained from the system / driver and not returned: allocated + cached */
  size_t peak_allocated;       /* the highest `allocated` since the start or ct_reset_peak_memory_stats */
  uint64_t num_device_mallocs; /* GPU: cudaMalloc (OpenCL: clCreateBuffer) calls (a cache hit makes none). CPU: 0 */
  /* CPU only (else 0): pinned host memory of ct_empty_pinned, summed over the backends that pin */
  size_t pinned_allocated;     /* bytes in pinned blocks held by tensors */
  size_t pinned_reserved;      /* bytes obtained from the drivers and not freed (held + cached) */
  uint64_t num_pinned_allocs;  /* cudaHostAlloc / pinned clCreateBuffer calls */
} ct_memory_stats;

/* Fill *out with the caching allocator's figures for device d, in bytes. A GPU whose context does
 * not exist yet (nothing allocated) reports zeros. Errors: CT_EINVAL (out NULL), CT_EDEVICE (d
 * does not exist on this machine: a GPU in a build without CUDA or on a machine without one; *out
 * is zeroed then). */
CT_API ct_status ct_memory_stats_get(ct_device d, ct_memory_stats *out);

/* Return the cached (free) blocks of device d to the system (cudaFree or clReleaseMemObject on a
 * device, free on the CPU, where every backend's pinned host cache is emptied too). Blocks held by tensors stay. Synchronizes a GPU
 * (cudaFree does). Errors: CT_EDEVICE (d does not exist). */
CT_API ct_status ct_empty_cache(ct_device d);

/* Make peak_allocated of device d equal to allocated now (torch.cuda.reset_peak_memory_stats).
 * Errors: CT_EDEVICE (d does not exist). */
CT_API ct_status ct_reset_peak_memory_stats(ct_device d);

/* ---------------------------------------------------------------------------------------------
 * TensorFloat-32 (torch.backends.cuda.matmul.allow_tf32, off by default). On: float32 matmul and
 * convolution on Ampere and later GPUs may use tensor cores with a 10-bit mantissa (about 1e-3
 * relative error, several times faster). Off: float32 results agree with the CPU to float32
 * rounding. Process-wide; has no effect on the CPU or without the CUDA backend (the switch is still
 * remembered). */
CT_API void ct_set_allow_tf32(int on);
/* 1 when TF32 is allowed, else 0. */
CT_API int ct_allow_tf32(void);

/* ---------------------------------------------------------------------------------------------
 * Pinned (page-locked) host memory. A copy to or from it can be asynchronous (CT_NON_BLOCKING) and
 * runs at full PCIe / NVLink speed; a copy from pageable memory is staged by the driver and blocks.
 * The memory comes from a cache (cudaHostAlloc costs milliseconds): a freed block is handed out
 * again, but only after every copy queued on it has finished.
 *
 * Which backend pins: the CUDA backend (cudaHostAlloc, with a GPU) and the OpenCL backend (a
 * CL_MEM_ALLOC_HOST_PTR buffer mapped into the host, from opencl:0's context, with an OpenCL device)
 * both pin. Pinned memory belongs to the backend that made it: a copy is asynchronous only between
 * memory a backend pinned and that backend's devices, because only its cache knows when its queued
 * copies end. A copy between memory pinned by one backend and a device of another is blocking (and
 * counted as a pageable copy in the ledger). ct_empty_pinned_for picks the backend of a device;
 * ct_empty_pinned, for memory not meant for one device yet, the first that pins in registry order
 * (CUDA before OpenCL), so with both a GPU and an OpenCL device it is CUDA's. Where no backend
 * pins, these functions return ordinary CPU tensors. */

/* A new contiguous CPU tensor of shape (ndim entries) and dtype dt, uninitialized, whose storage is
 * pinned (see above; by the first backend that pins). Ownership as for ct_empty (the caller's, or
 * the open scope's). Errors: those of ct_empty (CT_EINVAL for a bad shape, CT_EDTYPE), CT_ENOMEM
 * (the message gives the pinned bytes requested and held), CT_EBACKEND (a driver error). */
CT_API ct_tensor *ct_empty_pinned(int ndim, const int64_t *shape, ct_dtype dt);

/* As ct_empty_pinned, pinned by the backend of device d, so that copies between the tensor and d
 * (and d's other devices of the same kind) can be asynchronous; d the CPU means ct_empty_pinned. An
 * ordinary CPU tensor when d's backend cannot pin. Errors: those of ct_empty_pinned, CT_EDEVICE (d
 * does not exist). */
CT_API ct_tensor *ct_empty_pinned_for(ct_device d, int ndim, const int64_t *shape, ct_dtype dt);

/* 1 when ct_empty_pinned_for(d, ...) gives pinned memory (for the CPU: when ct_empty_pinned does),
 * else 0 (also for a device that does not exist). */
CT_API int ct_device_can_pin(ct_device d);

/* 1 when t is a CPU tensor whose storage is pinned, else 0 (also for NULL). */
CT_API int ct_tensor_is_pinned(const ct_tensor *t);

/* t itself (one more reference) when it is already pinned, else a contiguous pinned copy of t
 * (same shape and dtype, pinned as ct_empty_pinned; where nothing pins an ordinary contiguous copy) that shares
 * nothing with t. The copy is not recorded by autograd. NULL returns NULL. Errors: CT_EDEVICE (t
 * is not a CPU tensor), those of ct_empty_pinned. */
CT_API ct_tensor *ct_pin_memory(ct_tensor *t);

/* ---------------------------------------------------------------------------------------------
 * Streams and events (torch.cuda.Stream / torch.cuda.Event, kept small). cuttle's own ops always
 * run on their device's compute stream; a ct_stream is a second queue on a device for the caller's
 * own CUDA work (ct_stream_native), ordered against cuttle's work with events. On the CPU a stream
 * is a token: work is never queued, events complete when recorded. */

typedef struct ct_stream ct_stream;
typedef struct ct_event ct_event;

/* A new stream on device d (cudaStreamNonBlocking: it does not wait for the legacy default stream).
 * The caller frees it with ct_stream_free. Errors (NULL): CT_EDEVICE (d does not exist),
 * CT_EBACKEND, CT_ENOMEM. */
CT_API ct_stream *ct_stream_new(ct_device d);
/* Release s; work already queued on it still runs. NULL is allowed. */
CT_API void ct_stream_free(ct_stream *s);
/* The device of s (s not NULL). */
CT_API ct_device ct_stream_device(const ct_stream *s);
/* The backend's stream handle: a cudaStream_t for a GPU, a cl_command_queue (in order, profiling on)
 * for an OpenCL device, NULL for the CPU (or s NULL). Borrowed: it lives as long as s. */
CT_API void *ct_stream_native(ct_stream *s);
/* Wait until all work queued on s has finished (a synchronization point, counted in the ledger).
 * Errors: CT_EINVAL (s NULL), CT_EBACKEND. */
CT_API ct_status ct_stream_synchronize(ct_stream *s);
/* Make all work queued on s after this call wait until e has completed; s NULL means the compute
 * stream of e's device (so cuttle's ops wait for work recorded on another stream). The host does
 * not wait. Errors: CT_EINVAL (e NULL), CT_EDEVICE (s and e live on different kinds of device, or
 * on two different OpenCL devices, whose contexts cannot share events: wait on the host with
 * ct_event_synchronize), CT_EBACKEND. */
CT_API ct_status ct_stream_wait_event(ct_stream *s, ct_event *e);

/* A new event recorded on the compute stream of device d, after all work queued there so far (on a
 * GPU that includes the non-blocking copies, which the compute stream waits for). The caller frees
 * it with ct_event_free. Errors (NULL): CT_EDEVICE (d does not exist), CT_EBACKEND, CT_ENOMEM. */
CT_API ct_event *ct_event_record(ct_device d);
/* The same on stream s. Errors (NULL): CT_EINVAL (s NULL), CT_EBACKEND, CT_ENOMEM. */
CT_API ct_event *ct_stream_record_event(ct_stream *s);
/* Release e (also before it completed). NULL is allowed. */
CT_API void ct_event_free(ct_event *e);
/* Block the host until e has completed (an explicit synchronization point, counted in the ledger;
 * never reported by the sync-debug mode). Errors: CT_EINVAL (e NULL), CT_EBACKEND. */
CT_API ct_status ct_event_synchronize(ct_event *e);
/* 1 when e has completed, 0 when its work is still queued, a negative ct_status on error
 * (CT_EINVAL for NULL, CT_EBACKEND). Never blocks. */
CT_API int ct_event_query(ct_event *e);
/* The milliseconds of device time between start and end (recorded in that order on one device),
 * into *ms. Waits for end first (a synchronization point). Resolution: about 0.5 us on a GPU, the
 * monotonic clock on the CPU, the device's profiling clock on OpenCL (the end of the work before
 * each event). Errors: CT_EINVAL (a NULL argument), CT_EDEVICE (the two events are
 * on different devices), CT_EBACKEND. */
CT_API ct_status ct_event_elapsed_ms(ct_event *start, ct_event *end, double *ms);

/* ---------------------------------------------------------------------------------------------
 * Graphs (torch.cuda.CUDAGraph and torch.cuda.graph, kept small): record the ops of a region once,
 * then launch them all with one call. A small network's training step is bound by the host's time
 * to launch its kernels; a replay costs one launch. The region's semantics are PyTorch's:
 *  - capture_begin/capture_end on device d record every op run on d between them (on d's compute
 *    stream, which all threads share: no other thread may use d meanwhile, or its work is recorded
 *    too and never runs on its own); nothing runs then. ct_device_graph_replay runs the recorded
 *    kernels again, on the same addresses, with the values those addresses hold at replay time.
 *  - So the inputs are "static": tensors made before the capture whose contents the caller
 *    overwrites (ct_copy_) before each replay; the outputs are tensors made inside the capture and
 *    kept, overwritten by each replay. Memory made inside the capture belongs to the graph's private
 *    pool until ct_device_graph_free (freed tensors included: the graph reuses their addresses).
 *  - Host values are frozen at capture: scalars, shapes, an optimizer's learning rate, random
 *    numbers' seeds and offsets (dropout draws the same mask at every replay). An optimizer made with
 *    ct_optim_opts.capturable keeps its step count on the device, so Adam's bias corrections advance.
 *  - Inside a capture every synchronization of d fails (ct_item, ct_to_host, ct_from_host,
 *    ct_synchronize, a copy to or from the host, ct_stream_synchronize, ct_event_synchronize,
 *    ct_event_query and ct_event_elapsed_ms on d, ct_empty_cache) with CT_EINVAL naming the op;
 *    the capture then lacks that op, so capture_end fails, naming it. Warm the region up first (run
 *    it eagerly once or twice) so that library handles, cuDNN's algorithm choices and the
 *    allocator's blocks exist.
 * One capture at a time in the process. Only the CUDA backend captures; elsewhere these calls fail
 * with CT_EUNSUPPORTED. */
typedef struct ct_device_graph ct_device_graph;

/* 1 when device d exists and its backend can capture graphs (a CUDA device), else 0. */
CT_API int ct_device_can_capture(ct_device d);
/* Start capturing the ops the calling thread runs on d. Errors: CT_EDEVICE (d does not exist),
 * CT_EUNSUPPORTED (d cannot capture), CT_EINVAL (a capture already runs; the profiler is in
 * CT_PROFILE_SYNC), CT_ENOMEM, CT_EBACKEND (cudaStreamBeginCapture failed). */
CT_API ct_status ct_device_graph_capture_begin(ct_device d);
/* Stop capturing on d and return the executable graph (the caller frees it with
 * ct_device_graph_free). Always ends the capture, also when it fails: NULL with CT_EINVAL when cuttle
 * refused an op inside it (the message names the first) or no capture runs on d, CT_EBACKEND when
 * the driver could not capture an op (the message says so), CT_ENOMEM. */
CT_API ct_device_graph *ct_device_graph_capture_end(ct_device d);
/* Queue the whole graph on its device's compute stream, after the work queued so far; the host does
 * not wait. Errors: CT_EINVAL (g NULL, or a capture runs on the device), CT_EBACKEND. */
CT_API ct_status ct_device_graph_replay(ct_device_graph *g);
/* Release g and give its pool's memory back to the device's cache (tensors made in the capture and
 * still alive keep theirs). A replay still running completes first. NULL is allowed. */
CT_API void ct_device_graph_free(ct_device_graph *g);

/* ---------------------------------------------------------------------------------------------
 * Sync-debug (torch.cuda.set_sync_debug_mode). An implicit synchronization is a call that blocks
 * the host on a device other than the CPU (a CUDA GPU, an OpenCL device; "GPU" below) without
 * asking to: ct_item and ct_to_host of a GPU tensor, ct_to from or to
 * pageable host memory (or without CT_NON_BLOCKING), copies between two GPUs (staged through the
 * host), ct_from_host onto a GPU. Explicit waits (ct_synchronize, ct_event_synchronize,
 * ct_stream_synchronize) are never reported. CPU-only work has no synchronizations. */
enum {
  CT_SYNC_DEBUG_OFF = 0,   /* the default */
  CT_SYNC_DEBUG_WARN = 1,  /* print "cuttle: warning: <op> synchronized ..." to stderr, each time */
  CT_SYNC_DEBUG_ERROR = 2, /* fail the op instead: it returns CT_EINVAL (or NULL / NAN) before it
                              blocks, with a message naming the op and the synchronization */
};
/* Set the process-wide mode (one of the values above; the environment variable
 * CUTTLE_SYNC_DEBUG=0/1/2 sets the initial one). Errors: CT_EINVAL for another value. */
CT_API ct_status ct_set_sync_debug_mode(int mode);
CT_API int ct_get_sync_debug_mode(void);

#ifdef __cplusplus
}
#endif
#endif
