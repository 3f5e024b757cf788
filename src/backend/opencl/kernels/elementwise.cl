/* src/backend/opencl/kernels/elementwise.cl: copy, fill, unary, binary, their backward kernels and
 * where, one work-item per output element, every operand strided with its own dtype. The formulas
 * (unary_fwd, unary_deriv, binary_fwd, binary_deriv) come from src/core/ops.def through the
 * prelude, so the CPU and the device compute the same expressions (in REAL). Integer operands with
 * an integer result take the integer path of a_common.cl (ld_int, int_unary / int_binary, st_int):
 * exact and wrapping, as the CPU's. */

/* dst = src bit for bit (same dtype, esize bytes per element), any strides */
__kernel void copy_bits(__global uchar *dst, long doff, __global const uchar *src, long soff, int esize, ct_iter it) {
  long i = get_global_id(0), off[2];
  iter_offsets(&it, i, 2, off);
  long d = doff + off[0], s = soff + off[1];
  switch (esize) {
    case 1: dst[d] = src[s]; break;
    case 2: ((__global ushort *)dst)[d] = ((__global const ushort *)src)[s]; break;
    case 4: ((__global uint *)dst)[d] = ((__global const uint *)src)[s]; break;
    default: ((__global ulong *)dst)[d] = ((__global const ulong *)src)[s]; break;
  }
}

/* dst = (dtype of dst) src, any strides and dtypes */
__kernel void copy_convert(__global uchar *dst, long doff, int ddt, __global const uchar *src, long soff, int sdt, ct_iter it) {
  long i = get_global_id(0), off[2];
  iter_offsets(&it, i, 2, off);
  if (is_int_dt(ddt) && is_int_dt(sdt)) st_int(dst, doff + off[0], ddt, ld_int(src, soff + off[1], sdt)); /* wraps */
  else st(dst, doff + off[0], ddt, ld(src, soff + off[1], sdt));
}

/* dst = value, any strides */
__kernel void fill(__global uchar *dst, long doff, int ddt, REAL value, ct_iter it) {
  long i = get_global_id(0), off[1];
  iter_offsets(&it, i, 1, off);
  st(dst, doff + off[0], ddt, value);
}

__kernel void unary(int op, __global uchar *out, long ooff, int odt, __global const uchar *x, long xoff, int xdt, ct_iter it) {
  long i = get_global_id(0), off[2];
  iter_offsets(&it, i, 2, off);
  if (int_unary_op(op) && is_int_dt(odt) && is_int_dt(xdt)) st_int(out, ooff + off[0], odt, int_unary(op, ld_int(x, xoff + off[1], xdt)));
  else st(out, ooff + off[0], odt, unary_fwd(op, ld(x, xoff + off[1], xdt)));
}

/* out = g * op'(x, y); has_y 0: y = op(x) is recomputed */
__kernel void unary_backward(int op, __global uchar *out, long ooff, int odt, __global const uchar *g, long goff, int gdt,
                             __global const uchar *x, long xoff, int xdt, __global const uchar *y, long yoff, int ydt,
                             int has_y, ct_iter it) {
  long i = get_global_id(0), off[4];
  iter_offsets(&it, i, 4, off);
  REAL xv = ld(x, xoff + off[2], xdt);
  REAL yv = has_y ? ld(y, yoff + off[3], ydt) : unary_fwd(op, xv);
  st(out, ooff + off[0], odt, ld(g, goff + off[1], gdt) * unary_deriv(op, xv, yv));
}

__kernel void binary(int op, __global uchar *out, long ooff, int odt, __global const uchar *a, long aoff, int adt,
                     __global const uchar *b, long boff, int bdt, ct_iter it) {
  long i = get_global_id(0), off[3];
  iter_offsets(&it, i, 3, off);
  if (int_binary_op(op) && is_int_dt(odt) && is_int_dt(adt) && is_int_dt(bdt))
    st_int(out, ooff + off[0], odt, int_binary(op, ld_int(a, aoff + off[1], adt), ld_int(b, boff + off[2], bdt)));
  else st(out, ooff + off[0], odt, binary_fwd(op, ld(a, aoff + off[1], adt), ld(b, boff + off[2], bdt)));
}

__kernel void binary_backward(int op, int wrt, __global uchar *out, long ooff, int odt, __global const uchar *g, long goff,
                              int gdt, __global const uchar *a, long aoff, int adt, __global const uchar *b, long boff,
                              int bdt, ct_iter it) {
  long i = get_global_id(0), off[4];
  iter_offsets(&it, i, 4, off);
  REAL av = ld(a, aoff + off[2], adt), bv = ld(b, boff + off[3], bdt);
  REAL y = binary_fwd(op, av, bv);
  st(out, ooff + off[0], odt, ld(g, goff + off[1], gdt) * binary_deriv(op, wrt, av, bv, y));
}

/* out = cond ? a : b; a, b and out of one dtype are copied bit for bit (esize > 0), else converted */
__kernel void where_(__global uchar *out, long ooff, int odt, __global const uchar *c, long coff, int cdt,
                     __global const uchar *a, long aoff, int adt, __global const uchar *b, long boff, int bdt, ct_iter it) {
  long i = get_global_id(0), off[4];
  iter_offsets(&it, i, 4, off);
  int pick_a = ld(c, coff + off[1], cdt) != 0;
  if (odt == adt && odt == bdt && (odt == DT_I64 || odt == DT_F64)) {
    ((__global ulong *)out)[ooff + off[0]] =
        pick_a ? ((__global const ulong *)a)[aoff + off[2]] : ((__global const ulong *)b)[boff + off[3]];
    return;
  }
  int sdt = pick_a ? adt : bdt;
  __global const uchar *src = pick_a ? a : b;
  long s = pick_a ? aoff + off[2] : boff + off[3];
  if (is_int_dt(odt) && is_int_dt(sdt)) st_int(out, ooff + off[0], odt, ld_int(src, s, sdt)); /* wraps */
  else st(out, ooff + off[0], odt, ld(src, s, sdt));
}
