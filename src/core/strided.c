/* src/core/strided.c: the dimension merging every backend's strided iterator starts from
 * (internal.h, ct__strided). Dropping size-1 dims and merging the dims across which every operand
 * is contiguous turns most element-wise calls into one long 1-D run, whatever the view. */
#include <string.h>
#include "core/internal.h"

void ct__strided_init(ct__strided *it, int ndim, const int64_t *shape, int nops, const int64_t *const *strides) {
  memset(it, 0, sizeof *it);
  int n = 0;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 1) continue; /* a size-1 dim never moves any operand */
    if (n > 0) {
      /* merge dim d into the previous kept dim when every operand is contiguous across them */
      int merge = 1;
      for (int k = 0; k < nops && merge; k++) merge = it->stride[k][n - 1] == (strides[k] ? strides[k][d] : 0) * shape[d];
      if (merge) {
        it->size[n - 1] *= shape[d];
        for (int k = 0; k < nops; k++) it->stride[k][n - 1] = strides[k] ? strides[k][d] : 0;
        continue;
      }
    }
    it->size[n] = shape[d];
    for (int k = 0; k < nops; k++) it->stride[k][n] = strides[k] ? strides[k][d] : 0;
    n++;
  }
  it->ndim = n;
}
