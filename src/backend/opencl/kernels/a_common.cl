/* src/backend/opencl/kernels/a_common.cl: what every kernel file shares (first in the program, by
 * its name): typed loads and stores by runtime dtype tag, and the strided iterator.
 *
 * The host prepends a prelude (src/backend/opencl/program.c) that defines REAL (double where the
 * device has cl_khr_fp64, else float), the dtype tags DT_* with ct_dtype's values, CT_MAX_DIMS, the
 * op enums (CT_UNARY_*, CT_BINARY_*) and the ops.def formulas as functions. Buffers are passed as (__global uchar *base, long off): off
 * counts elements of the operand's dtype, since cuttle's tensors carry their offset in elements. */

/* Element i (from the buffer's start, in elements) of a buffer of dtype dt, as REAL. */
REAL ld(__global const uchar *p, long i, int dt) {
  switch (dt) {
    case DT_F32: return (REAL)((__global const float *)p)[i];
#ifdef CT_FP64
    case DT_F64: return ((__global const double *)p)[i];
#endif
    case DT_F16: return (REAL)vload_half(i, (__global const half *)p);
    case DT_BF16: return (REAL)as_float(((uint)((__global const ushort *)p)[i]) << 16);
    case DT_I32: return (REAL)((__global const int *)p)[i];
    case DT_I64: return (REAL)((__global const long *)p)[i];
    case DT_U8: return (REAL)p[i];
    case DT_BOOL: return p[i] != 0 ? (REAL)1 : (REAL)0;
  }
  return (REAL)0;
}

/* Conversions to the integer dtypes, as the CPU converts (src/core/dtype.c, where the rule and its
 * difference from PyTorch are written down):
 *  - from a floating value (REAL, st()): truncate toward zero, saturate at the dtype's bounds,
 *    NaN -> 0 (300.0 -> uchar 255, -1.0 -> 0, 1e10 -> int 2147483647), as ct__store. The bounds
 *    compare right whether REAL is double or float.
 *  - from an integer (int, long, uchar, bool; ld_int() and st_int()): wrap modulo 2^bits as
 *    ct__store_int and PyTorch (int 300 -> uchar 44, -1 -> uchar 255, long 2^40 + 5 -> int 5), by
 *    bit reinterpretation (as_ulong, as_int) and unsigned narrowing, which OpenCL C defines. */
long to_i64_sat(REAL v) {
  if (isnan(v)) return 0;
  if (v >= (REAL)9223372036854775808.0) return LONG_MAX;
  if (v <= (REAL)-9223372036854775808.0) return LONG_MIN;
  return (long)v;
}
int to_i32_sat(REAL v) {
  if (isnan(v)) return 0;
  if (v >= (REAL)2147483647.0) return INT_MAX;
  if (v <= (REAL)-2147483648.0) return INT_MIN;
  return (int)v;
}
uchar to_u8_sat(REAL v) {
  if (isnan(v)) return 0;
  if (v >= (REAL)255) return 255;
  if (v <= (REAL)0) return 0;
  return (uchar)v;
}

/* 1 for the integer dtypes (int32, int64, uint8, bool) */
int is_int_dt(int dt) { return dt == DT_I32 || dt == DT_I64 || dt == DT_U8 || dt == DT_BOOL; }

/* Element i of a buffer of integer dtype dt, as long, exactly (beyond 2^53 too). */
long ld_int(__global const uchar *p, long i, int dt) {
  switch (dt) {
    case DT_I32: return (long)((__global const int *)p)[i];
    case DT_I64: return ((__global const long *)p)[i];
    case DT_U8: return (long)p[i];
    case DT_BOOL: return p[i] != 0 ? 1L : 0L;
  }
  return 0;
}

/* bfloat16 bits of f, rounded to nearest even; a NaN stays a quiet NaN (as ct_f32_to_bf16). */
ushort f32_to_bf16(float f) {
  uint u = as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (ushort)(u >> 16);
}

/* Store v as element i of a buffer of dtype dt, converted as the CPU's ct__store converts. */
void st(__global uchar *p, long i, int dt, REAL v) {
  switch (dt) {
    case DT_F32: ((__global float *)p)[i] = (float)v; break;
#ifdef CT_FP64
    case DT_F64: ((__global double *)p)[i] = v; break;
#endif
    case DT_F16: vstore_half_rte((float)v, i, (__global half *)p); break;
    case DT_BF16: ((__global ushort *)p)[i] = f32_to_bf16((float)v); break;
    case DT_I32: ((__global int *)p)[i] = to_i32_sat(v); break;
    case DT_I64: ((__global long *)p)[i] = to_i64_sat(v); break;
    case DT_U8: p[i] = to_u8_sat(v); break;
    case DT_BOOL: p[i] = v != 0; break;
  }
}

/* Store the integer v as element i of a buffer of dtype dt: an integer dtype wraps modulo 2^bits
 * (ct__store_int), bool is v != 0, a floating one converts v as st() does. */
void st_int(__global uchar *p, long i, int dt, long v) {
  switch (dt) {
    case DT_I32: ((__global int *)p)[i] = as_int((uint)as_ulong(v)); break;
    case DT_I64: ((__global long *)p)[i] = v; break;
    case DT_U8: p[i] = (uchar)as_ulong(v); break;
    case DT_BOOL: p[i] = v != 0; break;
    default: st(p, i, dt, (REAL)v); break;
  }
}

/* The integer path of the elementwise kernels (as the CPU's, src/backend/cpu/elementwise.c): the
 * ops with an integer result on integer operands, in long with the arithmetic done in ulong, so
 * overflow wraps (uchar 200 + 100 = 44 once stored) with no signed overflow. */
int int_unary_op(int op) { return op == CT_UNARY_NEG || op == CT_UNARY_ABS || op == CT_UNARY_RELU; }
long int_unary(int op, long x) {
  if (op == CT_UNARY_NEG || (op == CT_UNARY_ABS && x < 0)) return as_long(0UL - as_ulong(x));
  if (op == CT_UNARY_ABS) return x;
  return x > 0 ? x : 0L; /* relu */
}
int int_binary_op(int op) { return op != CT_BINARY_DIV; }
/* a ** b as PyTorch's integer pow: by squaring, wrapping; b < 0 gives 1, +-1 or 0 */
long int_pow(long a, long b) {
  if (b < 0) return a == 1 ? 1L : a == -1 ? ((as_ulong(b) & 1UL) ? -1L : 1L) : 0L;
  ulong r = 1, base = as_ulong(a), e = as_ulong(b);
  for (; e; e >>= 1, base *= base)
    if (e & 1UL) r *= base;
  return as_long(r);
}
long int_binary(int op, long a, long b) {
  switch (op) {
    case CT_BINARY_ADD: return as_long(as_ulong(a) + as_ulong(b));
    case CT_BINARY_SUB: return as_long(as_ulong(a) - as_ulong(b));
    case CT_BINARY_MUL: return as_long(as_ulong(a) * as_ulong(b));
    case CT_BINARY_POW: return int_pow(a, b);
    case CT_BINARY_MAXIMUM: return a >= b ? a : b;
    case CT_BINARY_MINIMUM: return a <= b ? a : b;
    case CT_BINARY_EQ: return a == b;
    case CT_BINARY_NE: return a != b;
    case CT_BINARY_LT: return a < b;
    case CT_BINARY_LE: return a <= b;
    case CT_BINARY_GT: return a > b;
    case CT_BINARY_GE: return a >= b;
  }
  return 0;
}

/* The strided iterator: up to 4 operands over ndim merged dims (host: ct__ocl_iter_init). Linear
 * index i of the output's shape gives each operand's element offset (without its base offset). */
typedef struct {
  long ndim;
  long size[CT_MAX_DIMS];
  long stride[4][CT_MAX_DIMS];
} ct_iter;

void iter_offsets(const ct_iter *it, long i, int nops, long *off) {
  for (int k = 0; k < nops; k++) off[k] = 0;
  for (int d = (int)it->ndim - 1; d >= 0; d--) {
    long idx = i % it->size[d];
    i /= it->size[d];
    for (int k = 0; k < nops; k++) off[k] += idx * it->stride[k][d];
  }
}

/* The sum of v over the work-group, every work-item getting it: a tree in red (CT_OCL_GROUP_MAX
 * REALs of __local memory, declared by the kernel, as OpenCL 1.2 wants), the work-group's size a
 * power of two (ct__ocl_launch_groups). Every work-item of the group must call it; the first
 * barrier lets the readers of a previous sum in red finish before it is overwritten. */
REAL group_sum(REAL v, __local REAL *red) {
  int l = (int)get_local_id(0), L = (int)get_local_size(0);
  barrier(CLK_LOCAL_MEM_FENCE);
  red[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int o = L / 2; o > 0; o >>= 1) {
    if (l < o) red[l] += red[l + o];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  return red[0];
}
