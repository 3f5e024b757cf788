/* src/backend/cpu/elementwise.c: copy, fill, unary, binary, where and their backward kernels.
 *
 * Three paths per kernel: a float32 path when every operand is f32 (the training hot path), a
 * half path when every operand is float16 (or every one bfloat16), with the conversions inlined
 * (half.h), and a reference path for every dtype that loads each element as a double and stores it
 * back (ct__load/ct__store). The half path computes exactly as the reference path does: in double,
 * rounded through float32, so the two agree bit for bit; over contiguous operands it runs in
 * blocks converted to float32 and back (half.h's CT_LP_BLOCK), so that its loops vectorize.
 * Casts between float32 and the halves have inlined loops too, contiguous ones their own. The
 * formulas come from src/core/ops.def.
 *
 * Integer operands (int32, int64, uint8, bool) take an integer path where the result is an
 * integer: casts between integer dtypes, neg/abs/relu, add/sub/mul/pow/maximum/minimum and the
 * comparisons. Elements are loaded exactly as int64 (no rounding through double beyond 2^53),
 * arithmetic is done in uint64_t and the result is stored with ct__store_int, so overflow wraps
 * modulo 2^bits as in PyTorch (uint8 200 + 100 = 44, int32 300 -> uint8 44) with no signed
 * overflow in C. Float -> integer stays ct__store's saturating rule (src/core/dtype.c). */
#include <math.h>
#include <string.h>
#include "backend/cpu/cpu.h"
#include "backend/cpu/iter.h"
#include "backend/cpu/half.h"

typedef struct {
  int op;
  ct_dtype dt[CT_ITER_MAX];
  double value;
  int f32; /* every operand is float32 */
  int lp;  /* every operand is float16 (CT_LP_F16) or every one bfloat16 (CT_LP_BF16), else 0 */
  int ints; /* every operand is an integer dtype (int32, int64, uint8, bool) */
} ew_ctx;

/* ---- the integer path: int64 values, wrapping arithmetic in uint64_t */

/* a ** b as PyTorch's integer pow: by squaring, wrapping; a negative exponent gives 1 / a^|b|
 * truncated (1 for a == 1, +-1 for a == -1, else 0), as torch's powi on CUDA. */
static int64_t int_pow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? (((uint64_t)b & 1u) ? -1 : 1) : 0;
  uint64_t r = 1, base = (uint64_t)a, e = (uint64_t)b;
  for (; e; e >>= 1, base *= base)
    if (e & 1u) r *= base;
  return ct__wrap_i64(r);
}

/* 1 when unary op has an integer result on integer operands (the front-end gives the others a
 * float32 output) */
static int int_unary_op(int op) { return op == CT_UNARY_NEG || op == CT_UNARY_ABS || op == CT_UNARY_RELU; }
static int64_t int_unary(int op, int64_t x) {
  switch (op) {
    case CT_UNARY_NEG: return ct__wrap_i64(0u - (uint64_t)x);
    case CT_UNARY_ABS: return x < 0 ? ct__wrap_i64(0u - (uint64_t)x) : x; /* abs(INT64_MIN) wraps to itself */
    default: return x > 0 ? x : 0; /* relu */
  }
}

/* every binary op but true division has an integer result on integer operands */
static int int_binary_op(int op) { return op != CT_BINARY_DIV; }
static int64_t int_binary(int op, int64_t a, int64_t b) {
  switch (op) {
    case CT_BINARY_ADD: return ct__wrap_i64((uint64_t)a + (uint64_t)b);
    case CT_BINARY_SUB: return ct__wrap_i64((uint64_t)a - (uint64_t)b);
    case CT_BINARY_MUL: return ct__wrap_i64((uint64_t)a * (uint64_t)b);
    case CT_BINARY_POW: return int_pow(a, b);
    case CT_BINARY_MAXIMUM: return a >= b ? a : b;
    case CT_BINARY_MINIMUM: return a <= b ? a : b;
    case CT_BINARY_EQ: return a == b;
    case CT_BINARY_NE: return a != b;
    case CT_BINARY_LT: return a < b;
    case CT_BINARY_LE: return a <= b;
    case CT_BINARY_GT: return a > b;
    case CT_BINARY_GE: return a >= b;
    default: return 0;
  }
}

/* ---- copy and fill */
static void copy_body(void *c, int64_t n, char **p, const int64_t *s) {
  ew_ctx *x = c;
  if (x->dt[0] == x->dt[1]) {
    size_t es = ct_dtype_size(x->dt[0]);
    if (s[0] == (int64_t)es && s[1] == (int64_t)es) {
      memcpy(p[0], p[1], (size_t)n * es);
      return;
    }
    for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * s[0], p[1] + i * s[1], es);
    return;
  }
  int lp0 = ct__lp_tag(x->dt[0]), lp1 = ct__lp_tag(x->dt[1]);
  if (lp0 && x->dt[1] == CT_F32 && s[0] == 2 && s[1] == 4) { /* autocast's weight casts: contiguous */
    ct__f32_to_lp_n(p[0], (const float *)p[1], n, lp0);
    return;
  }
  if (lp1 && x->dt[0] == CT_F32 && s[0] == 4 && s[1] == 2) { /* and their gradients back */
    ct__lp_to_f32_n((float *)p[0], p[1], n, lp1);
    return;
  }
  if (lp0 && x->dt[1] == CT_F32) { /* float32 -> half: the casts in and out of a half op */
    for (int64_t i = 0; i < n; i++) ct__lp_store(p[0] + i * s[0], lp0, *(const float *)(p[1] + i * s[1]));
    return;
  }
  if (lp1 && x->dt[0] == CT_F32) {
    for (int64_t i = 0; i < n; i++) *(float *)(p[0] + i * s[0]) = (float)ct__lp_load(p[1] + i * s[1], lp1);
    return;
  }
  if (ct__dtype_is_int(x->dt[0]) && ct__dtype_is_int(x->dt[1])) { /* integer -> integer wraps */
    for (int64_t i = 0; i < n; i++) ct__store_int(p[0] + i * s[0], x->dt[0], ct__load_int(p[1] + i * s[1], x->dt[1]));
    return;
  }
  for (int64_t i = 0; i < n; i++) ct__store(p[0] + i * s[0], x->dt[0], ct__load(p[1] + i * s[1], x->dt[1]));
}

ct_status ct__cpu_copy(ct_tensor *dst, ct_tensor *src) {
  ct_iter it;
  ct_tensor *ts[2] = {dst, src};
  ct_iter_init(&it, 2, ts, dst->ndim, dst->shape);
  ew_ctx c = {.dt = {dst->dtype, src->dtype}};
  ct_iter_run_split(&it, copy_body, &c);
  return CT_OK;
}

static void fill_body(void *c, int64_t n, char **p, const int64_t *s) {
  ew_ctx *x = c;
  char elem[8];
  size_t es = ct_dtype_size(x->dt[0]);
  ct__store(elem, x->dt[0], x->value);
  for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * s[0], elem, es);
}

ct_status ct__cpu_fill(ct_tensor *dst, double value) {
  ct_iter it;
  ct_iter_init(&it, 1, &dst, dst->ndim, dst->shape);
  ew_ctx c = {.dt = {dst->dtype}, .value = value};
  ct_iter_run_split(&it, fill_body, &c);
  return CT_OK;
}

/* ---- unary: out = f(x); backward: out = g * f'(x, y) */
static void unary_body(void *c, int64_t n, char **p, const int64_t *s) {
  ew_ctx *k = c;
  if (k->op == CT_UNARY_RELU && k->f32 && s[0] == 4 && s[1] == 4) {
    const float *xp = (const float *)p[1];
    float *op = (float *)p[0];
    for (int64_t i = 0; i < n; i++) op[i] = !(xp[i] <= 0) ? xp[i] : 0.0f; /* NaN passes, as in torch */
    return;
  }
  if (k->ints && int_unary_op(k->op)) {
    for (int64_t i = 0; i < n; i++)
      ct__store_int(p[0] + i * s[0], k->dt[0], int_unary(k->op, ct__load_int(p[1] + i * s[1], k->dt[1])));
    return;
  }
  switch (k->op) {
#define CT_UNARY(E, name, fwd, deriv)                                        \
  case CT_UNARY_##E:                                                         \
    if (k->f32 && s[0] == 4 && s[1] == 4) { /* contiguous: vectorizable */   \
      const float *xp = (const float *)p[1];                                 \
      float *yp = (float *)p[0];                                             \
      for (int64_t i = 0; i < n; i++) {                                      \
        double x = xp[i];                                                    \
        yp[i] = (float)(fwd);                                                \
      }                                                                      \
    } else if (k->f32)                                                       \
      for (int64_t i = 0; i < n; i++) {                                      \
        double x = *(const float *)(p[1] + i * s[1]);                        \
        *(float *)(p[0] + i * s[0]) = (float)(fwd);                          \
      }                                                                      \
    else if (k->lp && s[0] == 2 && s[1] == 2) {                              \
      float xb[CT_LP_BLOCK], yb[CT_LP_BLOCK];                                \
      for (int64_t i0 = 0; i0 < n; i0 += CT_LP_BLOCK) {                      \
        int64_t m = n - i0 < CT_LP_BLOCK ? n - i0 : CT_LP_BLOCK;             \
        ct__lp_to_f32_n(xb, p[1] + 2 * i0, m, k->lp);                        \
        for (int64_t i = 0; i < m; i++) {                                    \
          double x = xb[i];                                                  \
          yb[i] = (float)(fwd);                                              \
        }                                                                    \
        ct__f32_to_lp_n(p[0] + 2 * i0, yb, m, k->lp);                        \
      }                                                                      \
    } else if (k->lp)                                                        \
      for (int64_t i = 0; i < n; i++) {                                      \
        double x = ct__lp_load(p[1] + i * s[1], k->lp);                      \
        ct__lp_store(p[0] + i * s[0], k->lp, fwd);                           \
      }                                                                      \
    else                                                                     \
      for (int64_t i = 0; i < n; i++) {                                      \
        double x = ct__load(p[1] + i * s[1], k->dt[1]);                      \
        ct__store(p[0] + i * s[0], k->dt[0], fwd);                           \
      }                                                                      \
    break;
#include "core/ops.def"
  }
}

static void unary_bw_body(void *c, int64_t n, char **p, const int64_t *s) {
  ew_ctx *k = c;
  if (k->op == CT_UNARY_RELU && k->f32 && s[0] == 4 && s[1] == 4 && s[2] == 4) {
    /* the hottest backward of a CNN: a select, not a multiply by a data-dependent branch */
    const float *restrict gp = (const float *)p[1], *restrict xp = (const float *)p[2];
    float *restrict op = (float *)p[0];
    for (int64_t i = 0; i < n; i++) {
      float g = gp[i]; /* loaded unconditionally, so the loop vectorizes into a blend */
      op[i] = !(xp[i] <= 0) ? g : 0.0f;
    }
    return;
  }
  /* operands: out, g, x, y */
  switch (k->op) {
#define CT_UNARY(E, name, fwd, deriv)                                                     \
  case CT_UNARY_##E:                                                                      \
    if (k->f32 && s[0] == 4 && s[1] == 4 && s[2] == 4 && s[3] == 4) {                    \
      const float *gp = (const float *)p[1], *xp = (const float *)p[2], *yp = (const float *)p[3]; \
      float *op = (float *)p[0];                                                          \
      for (int64_t i = 0; i < n; i++) {                                                   \
        double g = gp[i], x = xp[i], y = yp[i];                                           \
        (void)x, (void)y;                                                                 \
        op[i] = (float)(g * (deriv));                                                     \
      }                                                                                   \
      break;                                                                              \
    }                                                                                     \
    if (k->f32) {                                                                         \
      for (int64_t i = 0; i < n; i++) {                                                   \
        double g = *(const float *)(p[1] + i * s[1]);                                     \
        double x = *(const float *)(p[2] + i * s[2]);                                     \
        double y = *(const float *)(p[3] + i * s[3]);                                     \
        (void)x, (void)y;                                                                 \
        *(float *)(p[0] + i * s[0]) = (float)(g * (deriv));                               \
      }                                                                                   \
      break;                                                                              \
    }                                                                                     \
    if (k->lp && s[0] == 2 && s[1] == 2 && s[2] == 2 && s[3] == 2) {                    \
      float gb[CT_LP_BLOCK], xb[CT_LP_BLOCK], yb[CT_LP_BLOCK], ob[CT_LP_BLOCK];           \
      for (int64_t i0 = 0; i0 < n; i0 += CT_LP_BLOCK) {                                   \
        int64_t m = n - i0 < CT_LP_BLOCK ? n - i0 : CT_LP_BLOCK;                          \
        ct__lp_to_f32_n(gb, p[1] + 2 * i0, m, k->lp);                                     \
        ct__lp_to_f32_n(xb, p[2] + 2 * i0, m, k->lp);                                     \
        ct__lp_to_f32_n(yb, p[3] + 2 * i0, m, k->lp);                                     \
        for (int64_t i = 0; i < m; i++) {                                                 \
          double g = gb[i], x = xb[i], y = yb[i];                                         \
          (void)x, (void)y;                                                               \
          ob[i] = (float)(g * (deriv));                                                   \
        }                                                                                 \
        ct__f32_to_lp_n(p[0] + 2 * i0, ob, m, k->lp);                                     \
      }                                                                                   \
      break;                                                                              \
    }                                                                                     \
    if (k->lp) {                                                                          \
      for (int64_t i = 0; i < n; i++) {                                                   \
        double g = ct__lp_load(p[1] + i * s[1], k->lp);                                   \
        double x = ct__lp_load(p[2] + i * s[2], k->lp);                                   \
        double y = ct__lp_load(p[3] + i * s[3], k->lp);                                   \
        (void)x, (void)y;                                                                 \
        ct__lp_store(p[0] + i * s[0], k->lp, g * (deriv));                                \
      }                                                                                   \
      break;                                                                              \
    }                                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                     \
      double g = ct__load(p[1] + i * s[1], k->dt[1]);                                     \
      double x = ct__load(p[2] + i * s[2], k->dt[2]);                                     \
      double y = ct__load(p[3] + i * s[3], k->dt[3]);                                     \
      (void)x, (void)y;                                                                   \
      ct__store(p[0] + i * s[0], k->dt[0], g * (deriv));                                  \
    }                                                                                     \
    break;
#include "core/ops.def"
  }
}

static ct_status run(int n, ct_tensor *const *ts, int op, ct_iter_body body) {
  ct_iter it;
  ct_iter_init(&it, n, ts, ts[0]->ndim, ts[0]->shape);
  ew_ctx c = {.op = op, .f32 = 1, .lp = ct__lp_tag(ts[0]->dtype), .ints = 1};
  for (int i = 0; i < n; i++) {
    c.dt[i] = ts[i]->dtype, c.f32 &= ts[i]->dtype == CT_F32, c.lp = ts[i]->dtype == ts[0]->dtype ? c.lp : 0;
    c.ints &= ct__dtype_is_int(ts[i]->dtype);
  }
  ct_iter_run_split(&it, body, &c);
  return CT_OK;
}

ct_status ct__cpu_unary(ct_unary_op op, ct_tensor *out, ct_tensor *x) {
  return run(2, (ct_tensor *[]){out, x}, op, unary_body);
}

ct_status ct__cpu_unary_backward(ct_unary_op op, ct_tensor *out, ct_tensor *g, ct_tensor *x, ct_tensor *y) {
  return run(4, (ct_tensor *[]){out, g, x, y}, op, unary_bw_body);
}

/* ---- binary: out = f(a, b); backward: out = g * df/da or g * df/db */
static void binary_body(void *c, int64_t n, char **p, const int64_t *s) {
  ew_ctx *k = c;
  if (k->ints && int_binary_op(k->op)) {
    for (int64_t i = 0; i < n; i++) {
      int64_t a = ct__load_int(p[1] + i * s[1], k->dt[1]), b = ct__load_int(p[2] + i * s[2], k->dt[2]);
      ct__store_int(p[0] + i * s[0], k->dt[0], int_binary(k->op, a, b));
    }
    return;
  }
  switch (k->op) {
#define CT_BINARY(E, name, fwd, da, db)                                                  \
  case CT_BINARY_##E:                                                                    \
    if (k->f32 && s[0] == 4 && s[1] == 4 && (s[2] == 4 || s[2] == 0)) {                  \
      const float *ap = (const float *)p[1], *bp = (const float *)p[2];                  \
      float *op = (float *)p[0];                                                         \
      if (s[2] == 0) {                                                                   \
        double b = bp[0];                                                                \
        for (int64_t i = 0; i < n; i++) {                                                \
          double a = ap[i];                                                              \
          op[i] = (float)(fwd);                                                          \
        }                                                                                \
      } else                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                \
          double a = ap[i], b = bp[i];                                                   \
          op[i] = (float)(fwd);                                                          \
        }                                                                                \
    } else if (k->f32)                                                                   \
      for (int64_t i = 0; i < n; i++) {                                                  \
        double a = *(const float *)(p[1] + i * s[1]), b = *(const float *)(p[2] + i * s[2]); \
        *(float *)(p[0] + i * s[0]) = (float)(fwd);                                      \
      }                                                                                  \
    else if (k->lp && s[0] == 2 && s[1] == 2 && (s[2] == 2 || s[2] == 0)) {             \
      float ab[CT_LP_BLOCK], bb[CT_LP_BLOCK], ob[CT_LP_BLOCK];                           \
      for (int64_t i0 = 0; i0 < n; i0 += CT_LP_BLOCK) {                                  \
        int64_t m = n - i0 < CT_LP_BLOCK ? n - i0 : CT_LP_BLOCK;                         \
        ct__lp_to_f32_n(ab, p[1] + 2 * i0, m, k->lp);                                    \
        ct__lp_to_f32_n(bb, p[2] + (s[2] ? 2 * i0 : 0), s[2] ? m : 1, k->lp);            \
        if (s[2] == 0) {                                                                 \
          double b = bb[0];                                                              \
          for (int64_t i = 0; i < m; i++) {                                              \
            double a = ab[i];                                                            \
            ob[i] = (float)(fwd);                                                        \
          }                                                                              \
        } else                                                                           \
          for (int64_t i = 0; i < m; i++) {                                              \
            double a = ab[i], b = bb[i];                                                 \
            ob[i] = (float)(fwd);                                                        \
          }                                                                              \
        ct__f32_to_lp_n(p[0] + 2 * i0, ob, m, k->lp);                                    \
      }                                                                                  \
    } else if (k->lp)                                                                    \
      for (int64_t i = 0; i < n; i++) {                                                  \
        double a = ct__lp_load(p[1] + i * s[1], k->lp), b = ct__lp_load(p[2] + i * s[2], k->lp); \
        ct__lp_store(p[0] + i * s[0], k->lp, fwd);                                       \
      }                                                                                  \
    else                                                                                 \
      for (int64_t i = 0; i < n; i++) {                                                  \
        double a = ct__load(p[1] + i * s[1], k->dt[1]), b = ct__load(p[2] + i * s[2], k->dt[2]); \
        ct__store(p[0] + i * s[0], k->dt[0], fwd);                                       \
      }                                                                                  \
    break;
#define CT_COMPARE(E, name, pred)                                                        \
  case CT_BINARY_##E:                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                    \
      double a = ct__load(p[1] + i * s[1], k->dt[1]), b = ct__load(p[2] + i * s[2], k->dt[2]); \
      ct__store(p[0] + i * s[0], k->dt[0], (double)(pred));                              \
    }                                                                                    \
    break;
#include "core/ops.def"
  }
}

typedef struct {
  ew_ctx e;
  int wrt;
} bw_ctx;

static void binary_bw_body(void *c, int64_t n, char **p, const int64_t *s) {
  bw_ctx *k = c;
  const ct_dtype *dt = k->e.dt;
  switch (k->e.op) {
#define CT_BINARY(E, name, fwd, da, db)                                                   \
  case CT_BINARY_##E:                                                                     \
    if (k->e.f32) {                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                   \
        double g = *(const float *)(p[1] + i * s[1]);                                     \
        double a = *(const float *)(p[2] + i * s[2]), b = *(const float *)(p[3] + i * s[3]); \
        double y = (fwd);                                                                 \
        (void)y;                                                                          \
        *(float *)(p[0] + i * s[0]) = (float)(k->wrt == 0 ? g * (da) : g * (db));         \
      }                                                                                   \
      break;                                                                              \
    }                                                                                     \
    if (k->e.lp) {                                                                        \
      for (int64_t i = 0; i < n; i++) {                                                   \
        double g = ct__lp_load(p[1] + i * s[1], k->e.lp);                                 \
        double a = ct__lp_load(p[2] + i * s[2], k->e.lp), b = ct__lp_load(p[3] + i * s[3], k->e.lp); \
        double y = (fwd);                                                                 \
        (void)y;                                                                          \
        ct__lp_store(p[0] + i * s[0], k->e.lp, k->wrt == 0 ? g * (da) : g * (db));        \
      }                                                                                   \
      break;                                                                              \
    }                                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                     \
      double g = ct__load(p[1] + i * s[1], dt[1]);                                        \
      double a = ct__load(p[2] + i * s[2], dt[2]), b = ct__load(p[3] + i * s[3], dt[3]);  \
      double y = (fwd);                                                                   \
      (void)y;                                                                            \
      ct__store(p[0] + i * s[0], dt[0], k->wrt == 0 ? g * (da) : g * (db));               \
    }                                                                                     \
    break;
#include "core/ops.def"
    default:
      break;
  }
}

ct_status ct__cpu_binary(ct_binary_op op, ct_tensor *out, ct_tensor *a, ct_tensor *b) {
  return run(3, (ct_tensor *[]){out, a, b}, op, binary_body);
}

ct_status ct__cpu_binary_backward(ct_binary_op op, int wrt, ct_tensor *out, ct_tensor *g, ct_tensor *a, ct_tensor *b) {
  ct_tensor *ts[4] = {out, g, a, b};
  ct_iter it;
  ct_iter_init(&it, 4, ts, out->ndim, out->shape);
  bw_ctx c = {.e.op = op, .e.f32 = 1, .e.lp = ct__lp_tag(out->dtype), .wrt = wrt};
  for (int i = 0; i < 4; i++)
    c.e.dt[i] = ts[i]->dtype, c.e.f32 &= ts[i]->dtype == CT_F32, c.e.lp = ts[i]->dtype == out->dtype ? c.e.lp : 0;
  ct_iter_run_split(&it, binary_bw_body, &c);
  return CT_OK;
}

static void where_body(void *c, int64_t n, char **p, const int64_t *s) {
  ew_ctx *k = c;
  size_t es = ct_dtype_size(k->dt[0]);
  for (int64_t i = 0; i < n; i++) {
    int cond = ct__load(p[1] + i * s[1], k->dt[1]) != 0;
    const char *src = cond ? p[2] + i * s[2] : p[3] + i * s[3];
    ct_dtype sdt = k->dt[cond ? 2 : 3];
    if (sdt == k->dt[0]) memcpy(p[0] + i * s[0], src, es);
    else if (ct__dtype_is_int(sdt) && ct__dtype_is_int(k->dt[0])) ct__store_int(p[0] + i * s[0], k->dt[0], ct__load_int(src, sdt));
    else ct__store(p[0] + i * s[0], k->dt[0], ct__load(src, sdt));
  }
}

ct_status ct__cpu_where(ct_tensor *out, ct_tensor *cond, ct_tensor *a, ct_tensor *b) {
  return run(4, (ct_tensor *[]){out, cond, a, b}, 0, where_body);
}
