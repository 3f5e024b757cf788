/* examples/dlpack_logits.c: a cuttle model's logits handed to code that knows only DLPack.
 *
 *   PyTorch:  logits = model(x); probs = numpy.from_dlpack(logits)      (no copy)
 *   cuttle:   DLManagedTensor *m = ct_to_dlpack(logits);  consumer(m);  (the consumer calls m->deleter)
 * predict() below includes nothing of cuttle: it reads a DLTensor by its device, dtype, shape and
 * strides, as NumPy, PyTorch, CuPy or JAX would, and releases it through the deleter. Here it takes
 * the argmax of each row of the logits of an untrained mlp on random images, and the program checks
 * that it agrees with ct_argmax and read cuttle's own memory (tests/CMakeLists.txt runs it). */
#include <dlpack/dlpack.h> /* Debian's libdlpack-dev */
#include <stdio.h>
#include "cuttle.h"

/* The consumer: the class (argmax) of each row of a 2-D float32 tensor in host memory, any strides,
 * into classes (rows entries); takes m over and calls its deleter. Returns the rows, or -1 for a
 * tensor it cannot read. */
static int64_t predict(DLManagedTensor *m, int64_t *classes, int64_t max_rows) {
  const DLTensor *t = &m->dl_tensor;
  int64_t rows = -1;
  if ((t->device.device_type == kDLCPU || t->device.device_type == kDLCUDAHost) && t->ndim == 2 &&
      t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1 && t->shape[0] <= max_rows) {
    int64_t s0 = t->strides ? t->strides[0] : t->shape[1], s1 = t->strides ? t->strides[1] : 1;
    const float *x = (const float *)((const char *)t->data + t->byte_offset);
    rows = t->shape[0];
    for (int64_t i = 0; i < rows; i++) {
      int64_t best = 0;
      for (int64_t j = 1; j < t->shape[1]; j++)
        if (x[i * s0 + j * s1] > x[i * s0 + best * s1]) best = j;
      classes[i] = best;
    }
  }
  if (m->deleter) m->deleter(m);
  return rows;
}

int main(void) {
  ct_generator gen = ct_generator_new(7);
  ct_module *net = ct_model_new("mlp", CT_DEVICE_CPU, &gen);
  ct_scope_begin();
  ct_tensor *x = ct_randn(4, (int64_t[]){8, 1, 28, 28}, 0, 1, CT_F32, CT_DEVICE_CPU, &gen);
  ct_no_grad_begin();
  ct_tensor *logits = ct_module_forward(net, x);
  ct_no_grad_end();
  ct_tensor *want = ct_argmax(logits, 1, 0);
  DLManagedTensor *m = ct_to_dlpack(logits);
  if (!m || !want) {
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }
  char shape[64], dev[32];
  printf("logits: %s %s on %s\n", ct_shape_str(logits, shape, sizeof shape), ct_dtype_name(ct_tensor_dtype(logits)),
         ct_device_str(ct_tensor_device(logits), dev, sizeof dev));
  int same_memory = m->dl_tensor.data == ct_tensor_data(logits) && m->dl_tensor.byte_offset == 0;
  printf("the consumer reads cuttle's memory: %s\n", same_memory ? "yes" : "no");
  int64_t classes[8];
  int64_t rows = predict(m, classes, 8); /* m is the consumer's now, and released */
  const int64_t *cuttle = ct_tensor_data(want);
  int agree = 0;
  for (int64_t i = 0; i < rows; i++) {
    printf("image %lld: class %lld (ct_argmax: %lld)\n", (long long)i, (long long)classes[i], (long long)cuttle[i]);
    agree += classes[i] == cuttle[i];
  }
  printf("predictions agree with ct_argmax: %d of %lld\n", agree, (long long)rows);
  ct_scope_end();
  ct_module_free(net);
  return same_memory && rows == 8 && agree == 8 ? 0 : 1;
}
