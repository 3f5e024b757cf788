/* src/backend/opencl/event.c: synchronization, streams and events of the OpenCL backend (the
 * vtable's synchronize, stream_* and event_* entries, behind ct_synchronize, ct_stream_new,
 * ct_event_record and friends in cuttle/cuda.h). Layer 3 of the folder (opencl_backend.h): it calls
 * context.c, device.c and allocator.c's ct__ocl_call_error.
 *
 * ct_synchronize finishes both queues of the device's context, the compute queue and the copy
 * queue.
 *
 * A stream is an in-order command queue of the device's context, created with profiling on (as the
 * context's compute and copy queues are), so that events can be timed; its handle is the
 * cl_command_queue itself (ct_stream_native gives it to the caller for their own OpenCL work). The
 * stream NULL is the device's compute queue, where every cuttle op runs and which waits for every
 * non-blocking copy (copy.c), so an event recorded there follows all of cuttle's work.
 *
 * An event is a marker (clEnqueueMarkerWithWaitList with no wait list: in an in-order queue it
 * completes after everything queued before it); its handle is the cl_event. Waiting on another
 * queue is a barrier with the event in its wait list. OpenCL allows that only within one context,
 * and each device has its own context here, so a stream cannot wait for an event of another
 * OpenCL device: that is CT_EDEVICE, and the caller waits on the host (ct_event_synchronize).
 * Every enqueue is followed by clFlush, so that a queried event makes progress without a wait.
 *
 * Timing: the milliseconds between the CL_PROFILING_COMMAND_END of the two markers, i.e. between
 * the moments all work queued before each had finished. */
#include "backend/opencl/opencl_backend.h"

/* The queue of stream (NULL: the compute queue of device index), or NULL with the error set. */
static cl_command_queue queue_of(int index, void *stream) {
  if (stream) return (cl_command_queue)stream;
  ct__ocl_ctx *c = ct__ocl_ctx_get(index);
  return c ? c->compute : NULL;
}

ct_status ct__ocl_synchronize(int index) {
  ct__ocl_ctx *c = ct__ocl_ctx_get(index);
  if (!c) return ct_last_status();
  CT_OCL_TRY(clFinish(c->compute), "clFinish (compute queue)", index);
  CT_OCL_TRY(clFinish(c->copy), "clFinish (copy queue)", index);
  return CT_OK;
}

ct_status ct__ocl_stream_new(int index, void **out) {
  *out = NULL;
  ct__ocl_ctx *c = ct__ocl_ctx_get(index);
  if (!c) return ct_last_status();
  cl_int e;
  cl_command_queue q = clCreateCommandQueue(c->context, c->info->device, CL_QUEUE_PROFILING_ENABLE, &e);
  CT_OCL_TRY(e, "clCreateCommandQueue (a new stream)", index);
  *out = q;
  return CT_OK;
}

void ct__ocl_stream_free(int index, void *stream) {
  (void)index;
  /* the queue is deleted once the work already queued on it has run (OpenCL's rule) */
  if (stream) clReleaseCommandQueue((cl_command_queue)stream);
}

ct_status ct__ocl_stream_synchronize(int index, void *stream) {
  cl_command_queue q = queue_of(index, stream);
  if (!q) return ct_last_status();
  CT_OCL_TRY(clFinish(q), "clFinish (stream synchronize)", index);
  return CT_OK;
}

ct_status ct__ocl_stream_wait_event(int index, void *stream, void *event) {
  cl_command_queue q = queue_of(index, stream);
  if (!q) return ct_last_status();
  cl_event ev = (cl_event)event;
  cl_context qc = NULL, ec = NULL;
  CT_OCL_TRY(clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof qc, &qc, NULL), "clGetCommandQueueInfo", index);
  CT_OCL_TRY(clGetEventInfo(ev, CL_EVENT_CONTEXT, sizeof ec, &ec, NULL), "clGetEventInfo", index);
  if (qc != ec)
    return ct__error(CT_EDEVICE,
                     "ct_stream_wait_event: the event was recorded on another OpenCL device than opencl:%d; each OpenCL "
                     "device has its own context and a queue can only wait for events of its own, so wait on the host "
                     "with ct_event_synchronize instead",
                     index);
  CT_OCL_TRY(clEnqueueBarrierWithWaitList(q, 1, &ev, NULL), "clEnqueueBarrierWithWaitList", index);
  CT_OCL_TRY(clFlush(q), "clFlush", index);
  return CT_OK;
}

ct_status ct__ocl_event_record(int index, void *stream, void **out) {
  *out = NULL;
  cl_command_queue q = queue_of(index, stream);
  if (!q) return ct_last_status();
  cl_event ev;
  CT_OCL_TRY(clEnqueueMarkerWithWaitList(q, 0, NULL, &ev), "clEnqueueMarkerWithWaitList", index);
  cl_int e = clFlush(q);
  if (e != CL_SUCCESS) {
    clReleaseEvent(ev);
    CT_OCL_TRY(e, "clFlush", index);
  }
  *out = ev;
  return CT_OK;
}

ct_status ct__ocl_event_synchronize(int index, void *event) {
  cl_event ev = (cl_event)event;
  CT_OCL_TRY(clWaitForEvents(1, &ev), "clWaitForEvents", index);
  return CT_OK;
}

int ct__ocl_event_query(int index, void *event) {
  cl_int st;
  CT_OCL_TRY(clGetEventInfo((cl_event)event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL), "clGetEventInfo", index);
  if (st < 0) return ct__error(CT_EBACKEND, "opencl:%d: the work before the event failed: %s", index, ct__ocl_errstr(st));
  return st == CL_COMPLETE;
}

ct_status ct__ocl_event_elapsed_ms(int index, void *start, void *end, double *ms) {
  cl_event ev[2] = {(cl_event)start, (cl_event)end};
  CT_OCL_TRY(clWaitForEvents(2, ev), "clWaitForEvents", index);
  cl_ulong t[2];
  for (int i = 0; i < 2; i++)
    CT_OCL_TRY(clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof t[i], &t[i], NULL),
               "clGetEventProfilingInfo (CL_PROFILING_COMMAND_END)", index);
  *ms = ((double)t[1] - (double)t[0]) * 1e-6;
  return CT_OK;
}

void ct__ocl_event_free(int index, void *event) {
  (void)index;
  if (event) clReleaseEvent((cl_event)event);
}
