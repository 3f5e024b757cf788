/* src/backend/cpu/reduce.c: sum, max and min over the dims that out keeps as size 1.
 * Accumulates in double on every dtype (a reference-quality sum; float32 training does not
 * notice the cost next to the GEMMs): float16 and bfloat16 sums never stall at their ulp. */
#include <math.h>
#include "backend/cpu/cpu.h"
#include "backend/cpu/half.h"

ct_status ct__cpu_reduce(ct_reduce_op op, ct_tensor *out, ct_tensor *indices, ct_tensor *x) {
  int nd = x->ndim;
  int rd[CT_MAX_DIMS], nr = 0;
  int64_t rshape[CT_MAX_DIMS], rstride[CT_MAX_DIMS], rcount = 1;
  for (int d = 0; d < nd; d++)
    if (out->shape[d] == 1 && x->shape[d] != 1) {
      rd[nr] = d;
      rshape[nr] = x->shape[d];
      rstride[nr] = x->stride[d];
      rcount *= x->shape[d];
      nr++;
    }
  int64_t nout = ct_tensor_numel(out);
  size_t xes = ct_dtype_size(x->dtype), oes = ct_dtype_size(out->dtype);
  const char *xb = ct__ptr(x);
  char *ob = ct__ptr(out);
  int64_t *ib = indices ? ct__ptr(indices) : NULL;
  int f32 = x->dtype == CT_F32, lp = ct__lp_tag(x->dtype);
#pragma omp parallel for schedule(static) if (nout * rcount >= 32768 && nout > 1)
  for (int64_t j = 0; j < nout; j++) {
    /* the multi-index of out element j gives the base offset in x (reduced dims at 0) */
    int64_t rem = j, base = 0, obase = 0;
    for (int d = nd - 1; d >= 0; d--) {
      int64_t idx = rem % out->shape[d];
      rem /= out->shape[d];
      base += idx * x->stride[d];
      obase += idx * out->stride[d];
    }
    int64_t ridx[CT_MAX_DIMS] = {0}, off = base, best_i = 0;
    double acc = op == CT_REDUCE_SUM ? 0.0 : NAN;
    for (int64_t k = 0; k < rcount; k++) {
      double v = f32 ? *(const float *)(xb + off * 4) : lp ? ct__lp_load(xb + off * 2, lp) : ct__load(xb + off * (int64_t)xes, x->dtype);
      if (op == CT_REDUCE_SUM) acc += v;
      else if (k == 0 || isnan(v) || (!isnan(acc) && (op == CT_REDUCE_MAX ? v > acc : v < acc))) {
        if (!(k > 0 && isnan(acc))) acc = v, best_i = k; /* the first NaN wins, as in torch */
      }
      for (int r = nr - 1; r >= 0; r--) { /* advance the reduced multi-index */
        off += rstride[r];
        if (++ridx[r] < rshape[r]) break;
        off -= rstride[r] * rshape[r];
        ridx[r] = 0;
      }
    }
    ct__store(ob + obase * (int64_t)oes, out->dtype, acc);
    if (ib) ib[j] = best_i;
  }
  (void)rd;
  return CT_OK;
}
