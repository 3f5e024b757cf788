/* src/nn/memory_format.c: a module's 4-D parameters and buffers to a memory format, in place
 * (model.to(memory_format=torch.channels_last)). As ct_module_to does for devices, each tensor
 * keeps its handle and takes the converted copy's storage and strides, so an optimizer built
 * before the conversion still holds the module's parameters. */
#include "autograd/node.h"
#include "nn/module.h"
#include "ops/memory_format.h"

ct_status ct_module_to_memory_format(ct_module *m, ct_memory_format fmt) {
  if (!m) return ct__null_status("module_to_memory_format", "m");
  if (fmt != CT_CONTIGUOUS_FORMAT && fmt != CT_CHANNELS_LAST)
    return ct__error(CT_EINVAL, "module_to_memory_format: invalid memory format %d (pass CT_CONTIGUOUS_FORMAT or "
                     "CT_CHANNELS_LAST)", (int)fmt);
  int n = ct_module_named_tensors(m, 1, NULL, 0);
  if (n < 0) return ct__error_prefix("module_to_memory_format");
  ct_named_tensor *nt = ct__calloc((size_t)(n ? n : 1), sizeof *nt, "module_to_memory_format's list of tensors");
  ct_tensor **conv = nt ? ct__calloc((size_t)(n ? n : 1), sizeof *conv, "module_to_memory_format's list of copies") : NULL;
  if (!conv) return free(nt), CT_ENOMEM;
  ct_module_named_tensors(m, 1, nt, n);
  ct_status s = CT_OK;
  for (int i = 0; i < n && s == CT_OK; i++) { /* first every copy, so that a failure changes nothing */
    ct_tensor *t = nt[i].tensor;
    if (t->ndim != 4 || ct_tensor_suggest_memory_format(t) == fmt) continue;
    /* always a copy with fmt's own strides: a weight with one input channel is dense in both
     * formats, and only its strides say which one it is in */
    ct_tensor *c = ct__alloc_format(4, t->shape, t->dtype, t->device, fmt);
    if (c && CT_KERNEL_CALL(t->storage->backend, copy, __func__, t, c, t) != CT_OK) ct_tensor_free(c), c = NULL;
    conv[i] = c;
    if (!c) s = ct__error_prefix("module_to_memory_format (tensor %s)", nt[i].name);
  }
  for (int i = 0; i < n; i++) {
    ct_tensor *t = nt[i].tensor, *c = conv[i];
    if (!c) continue;
    if (s == CT_OK) ct__module_swap_storage(t, c); /* c, freed below, takes t's old storage */
    ct_tensor_free(c);
  }
  free(nt);
  free(conv);
  return s;
}
