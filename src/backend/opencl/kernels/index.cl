/* src/backend/opencl/kernels/index.cl: index_select, gather and their backward (index_add,
 * scatter_add). Tensors are contiguous here (the launcher makes them so) and seen as
 * (outer, size along dim, inner). The backward kernels give each work-item every update of one
 * destination line, so no two work-items add into one element: no atomics, the CPU's order. */

/* out (outer, n, inner) = x (outer, xs, inner)[:, index[j], :]; one work-item per out element */
__kernel void index_select(__global uchar *out, long ooff, __global const uchar *x, long xoff, int dt, __global const long *index,
                           long ioff, long n, long xs, long inner) {
  long i = get_global_id(0);
  long in = i % inner, j = (i / inner) % n, o = i / (inner * n);
  long src = (o * xs + index[ioff + j]) * inner + in;
  st(out, ooff + i, dt, ld(x, xoff + src, dt));
}

/* gx (outer, gs, inner)[:, index[j], :] += gy (outer, n, inner)[:, j, :]; one work-item per (o, in) */
__kernel void index_add(__global uchar *gx, long gxoff, __global const uchar *gy, long gyoff, int dt, __global const long *index,
                        long ioff, long n, long gs, long inner) {
  long p = get_global_id(0), in = p % inner, o = p / inner;
  for (long j = 0; j < n; j++) {
    long d = gxoff + (o * gs + index[ioff + j]) * inner + in;
    st(gx, d, dt, ld(gx, d, dt) + ld(gy, gyoff + (o * n + j) * inner + in, dt));
  }
}

/* out = x.gather(dim, index): it's operands are out, x with dim's stride zeroed, index; xsd is x's
 * stride along dim. One work-item per out element. */
__kernel void gather(__global uchar *out, long ooff, __global const uchar *x, long xoff, int dt, __global const long *index,
                     long ioff, long xsd, ct_iter it) {
  long i = get_global_id(0), off[3];
  iter_offsets(&it, i, 3, off);
  st(out, ooff + off[0], dt, ld(x, xoff + off[1] + index[ioff + off[2]] * xsd, dt));
}

/* gx.scatter_add_(dim, index, gy): it runs over gy's shape with dim collapsed to one; operands gx
 * (dim's stride zeroed), gy, index. Each work-item walks the n positions of its line along dim
 * (strides gxsd, gysd, isd), so every add into one gx element comes from one work-item. */
__kernel void scatter_add(__global uchar *gx, long gxoff, __global const uchar *gy, long gyoff, int dt, __global const long *index,
                          long ioff, long n, long gxsd, long gysd, long isd, ct_iter it) {
  long p = get_global_id(0), off[3];
  iter_offsets(&it, p, 3, off);
  for (long j = 0; j < n; j++) {
    long d = gxoff + off[0] + index[ioff + off[2] + j * isd] * gxsd;
    st(gx, d, dt, ld(gx, d, dt) + ld(gy, gyoff + off[1] + j * gysd, dt));
  }
}
