/* src/backend/opencl/attention.c: the launchers of the fused scaled dot-product attention
 * (core/kernels.def's attention and attention_backward; kernels/attention.cl), FlashAttention-2
 * (Dao 2023) with one work-item per row: the forward over the B H Tq query rows, the backward in two
 * passes, gq (and D_i) over the query rows, then gk and gv over the B H Tk key rows, so no gradient
 * element is summed by two work-items (deterministic, no atomics). float32 and float64 only:
 * ocl_supports (backend.c) answers no for the halves, which the front-end widens to float32 around
 * the kernels. Memory beyond the inputs and outputs: the backward's D_i, B H Tq elements. An
 * absent mask is passed as q's buffer with has_mask 0, a valid argument the kernels never read. */
#include "backend/opencl/opencl_backend.h"

/* kernels/attention.cl's at_geom, field for field (all 64-bit, so the layouts agree) */
typedef struct {
  cl_long B, H, Tq, Tk, D, Dv;
  cl_long causal, has_mask, dropout;
  cl_long ms[4];
  cl_ulong seed, offset;
} at_geom;

/* What every launch shares: the geometry, the mask's buffer (q's when absent) and the three REAL
 * scalars: scale, dropout's threshold and factor. The threshold is the composed op's comparison
 * (ct_rand's uniform < 1 - p in the inputs' dtype: (float)(1 - p) for float32), so the draws and
 * the decisions are the CPU's (src/backend/cpu/attention.c's geom_of). */
typedef struct {
  at_geom g;
  ct__ocl_buf mask;
  ct__ocl_real scale, keep_below, inv;
  ct__ocl_arg ascale, akeep, ainv;
} at_common;

/* The common part of both launches, or CT_EUNSUPPORTED for a dtype the kernels do not take. */
static ct_status common_of(at_common *c, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask, const ct__ocl_buf *qb,
                           const ct_attention_args *a) {
  if (q->dtype != CT_F32 && q->dtype != CT_F64)
    return ct__error(CT_EUNSUPPORTED, "attention: OpenCL's fused kernel takes float32 and float64, got %s",
                     ct_dtype_name(q->dtype));
  c->g = (at_geom){q->shape[0], q->shape[1], q->shape[2], k->shape[2], q->shape[3], v->shape[3], a->causal, mask != NULL,
                   a->dropout_p > 0, {0}, a->seed, a->offset};
  if (mask) {
    for (int d = 0; d < 4; d++) c->g.ms[d] = mask->stride[d];
    CT_TRY(ct__ocl_buf_of(mask, &c->mask));
  } else {
    c->mask = *qb;
  }
  double keep = q->dtype == CT_F64 ? 1.0 - a->dropout_p : (double)(float)(1.0 - a->dropout_p);
  int idx = q->device.index;
  c->ascale = ct__ocl_real_arg(idx, a->scale, &c->scale);
  c->akeep = ct__ocl_real_arg(idx, keep, &c->keep_below);
  c->ainv = ct__ocl_real_arg(idx, 1.0 / (1.0 - a->dropout_p), &c->inv);
  return CT_OK;
}

/* The forward: one work-item per query row, B H Tq in all, writing out and lse. */
ct_status ct__ocl_attention(ct_tensor *out, ct_tensor *lse, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask,
                            const ct_attention_args *a) {
  ct__ocl_buf ob, lb, qb, kb, vb;
  CT_TRY(ct__ocl_buf_of(out, &ob));
  CT_TRY(ct__ocl_buf_of(lse, &lb));
  CT_TRY(ct__ocl_buf_of(q, &qb));
  CT_TRY(ct__ocl_buf_of(k, &kb));
  CT_TRY(ct__ocl_buf_of(v, &vb));
  at_common c;
  CT_TRY(common_of(&c, q, k, v, mask, &qb, a));
  ct__ocl_arg args[] = {CT_OCL_ARG(ob.mem), CT_OCL_ARG(ob.off), CT_OCL_ARG(lb.mem),     CT_OCL_ARG(lb.off),
                        CT_OCL_ARG(qb.mem), CT_OCL_ARG(qb.off), CT_OCL_ARG(kb.mem),     CT_OCL_ARG(kb.off),
                        CT_OCL_ARG(vb.mem), CT_OCL_ARG(vb.off), CT_OCL_ARG(c.mask.mem), CT_OCL_ARG(c.mask.off),
                        CT_OCL_ARG(qb.dt),  CT_OCL_ARG(c.g),    c.ascale,               c.akeep,
                        c.ainv};
  return ct__ocl_launch(q->device.index, "attention", (size_t)(c.g.B * c.g.H * c.g.Tq), 17, args);
}

/* The two passes over the resolved buffers (gout, q, k, v, out, lse and the gradients), with D_i
 * in ds between them. */
static ct_status backward_passes(const at_common *c, int idx, const ct__ocl_buf *gq, const ct__ocl_buf *gk, const ct__ocl_buf *gv,
                                 const ct__ocl_buf *ds, const ct__ocl_buf *go, const ct__ocl_buf *q, const ct__ocl_buf *k,
                                 const ct__ocl_buf *v, const ct__ocl_buf *o, const ct__ocl_buf *l) {
  const at_geom *g = &c->g;
  ct__ocl_arg qa[] = {CT_OCL_ARG(gq->mem),     CT_OCL_ARG(gq->off),     CT_OCL_ARG(ds->mem), CT_OCL_ARG(ds->off),
                      CT_OCL_ARG(go->mem),     CT_OCL_ARG(go->off),     CT_OCL_ARG(q->mem),  CT_OCL_ARG(q->off),
                      CT_OCL_ARG(k->mem),      CT_OCL_ARG(k->off),      CT_OCL_ARG(v->mem),  CT_OCL_ARG(v->off),
                      CT_OCL_ARG(o->mem),      CT_OCL_ARG(o->off),      CT_OCL_ARG(l->mem),  CT_OCL_ARG(l->off),
                      CT_OCL_ARG(c->mask.mem), CT_OCL_ARG(c->mask.off), CT_OCL_ARG(q->dt),   CT_OCL_ARG(*g),
                      c->ascale,               c->akeep,                c->ainv};
  CT_TRY(ct__ocl_launch(idx, "attention_backward_q", (size_t)(g->B * g->H * g->Tq), 23, qa));
  ct__ocl_arg kva[] = {CT_OCL_ARG(gk->mem),     CT_OCL_ARG(gk->off),     CT_OCL_ARG(gv->mem), CT_OCL_ARG(gv->off),
                       CT_OCL_ARG(ds->mem),     CT_OCL_ARG(ds->off),     CT_OCL_ARG(go->mem), CT_OCL_ARG(go->off),
                       CT_OCL_ARG(q->mem),      CT_OCL_ARG(q->off),      CT_OCL_ARG(k->mem),  CT_OCL_ARG(k->off),
                       CT_OCL_ARG(v->mem),      CT_OCL_ARG(v->off),      CT_OCL_ARG(l->mem),  CT_OCL_ARG(l->off),
                       CT_OCL_ARG(c->mask.mem), CT_OCL_ARG(c->mask.off), CT_OCL_ARG(q->dt),   CT_OCL_ARG(*g),
                       c->ascale,               c->akeep,                c->ainv};
  return ct__ocl_launch(idx, "attention_backward_kv", (size_t)(g->B * g->H * g->Tk), 23, kva);
}

/* The backward: D_i into a temporary of B H Tq elements (the second pass needs every row's), then
 * the two passes; each gradient is written whole, zeros included, as kernels.def asks. */
ct_status ct__ocl_attention_backward(ct_tensor *gq, ct_tensor *gk, ct_tensor *gv, ct_tensor *gout, ct_tensor *q, ct_tensor *k,
                                     ct_tensor *v, ct_tensor *out, ct_tensor *lse, ct_tensor *mask, const ct_attention_args *a) {
  ct__ocl_buf gqb, gkb, gvb, gob, qb, kb, vb, ob, lb, dsb;
  CT_TRY(ct__ocl_buf_of(gq, &gqb));
  CT_TRY(ct__ocl_buf_of(gk, &gkb));
  CT_TRY(ct__ocl_buf_of(gv, &gvb));
  CT_TRY(ct__ocl_buf_of(gout, &gob));
  CT_TRY(ct__ocl_buf_of(q, &qb));
  CT_TRY(ct__ocl_buf_of(k, &kb));
  CT_TRY(ct__ocl_buf_of(v, &vb));
  CT_TRY(ct__ocl_buf_of(out, &ob));
  CT_TRY(ct__ocl_buf_of(lse, &lb));
  at_common c;
  CT_TRY(common_of(&c, q, k, v, mask, &qb, a));
  ct__be_tmp ds = {0};
  int64_t rows = c.g.B * c.g.H * c.g.Tq > 0 ? c.g.B * c.g.H * c.g.Tq : 1; /* a buffer even for no rows */
  CT_TRY(ct__be_tmp_new(&ds, q->device, 1, &rows, q->dtype));
  ct_status s = ct__ocl_buf_of(&ds.t, &dsb);
  if (s == CT_OK) s = backward_passes(&c, q->device.index, &gqb, &gkb, &gvb, &dsb, &gob, &qb, &kb, &vb, &ob, &lb);
  ct__be_tmp_free(&ds); /* the queue is in order: whoever gets the buffer next runs after the passes */
  return s;
}
