/* src/backend/opencl/kernels/reduce.cl: sum, max and min over the reduced dims, one work-item per
 * output element, accumulating in REAL in the CPU's order (so float64 sums match it exactly). Max
 * and min keep the first extreme and the first NaN, as torch and the CPU backend do.
 * it: operand 0 the output's strides, operand 1 x's, over the kept dims; rit: x's reduced dims. */
__kernel void reduce(int op, __global uchar *out, long ooff, int odt, __global long *idx, long ioff, int has_idx,
                     __global const uchar *x, long xoff, int xdt, ct_iter it, ct_iter rit, long rcount) {
  long j = get_global_id(0), off[2];
  iter_offsets(&it, j, 2, off);
  REAL acc = op == 0 ? (REAL)0 : (REAL)NAN;
  long best = 0;
  for (long k = 0; k < rcount; k++) {
    long r[1];
    iter_offsets(&rit, k, 1, r);
    REAL v = ld(x, xoff + off[1] + r[0], xdt);
    if (op == 0) acc += v;
    else if (k == 0 || isnan(v) || (!isnan(acc) && (op == 1 ? v > acc : v < acc))) {
      if (!(k > 0 && isnan(acc))) acc = v, best = k;
    }
  }
  st(out, ooff + off[0], odt, acc);
  if (has_idx) idx[ioff + j] = best;
}
