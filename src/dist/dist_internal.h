/* src/dist/dist_internal.h: what the files of src/dist share. Only this folder includes mpi.h. */
#ifndef CT_DIST_INTERNAL_H
#define CT_DIST_INTERNAL_H

#include <stdint.h>
#include "core/internal.h"
#include "cuttle/dist.h"
#ifdef CUTTLE_WITH_MPI
#include <mpi.h>
#endif

/* 1 between ct_dist_init and ct_dist_finalize. */
int ct__dist_initialized(void);
/* CT_OK when the group is joined; else CT_EINVAL naming op (CT_EUNSUPPORTED without MPI). */
ct_status ct__dist_need_init(const char *op);
/* Sum count float32 or float64 values (dt) of buf over the ranks, in place; errors name op. */
ct_status ct__dist_allreduce_sum(void *buf, int64_t count, ct_dtype dt, const char *op);
/* Reduce n int64 values in place with MPI_MAX (max nonzero) or MPI_MIN; errors name op. */
ct_status ct__dist_allreduce_i64(int64_t *vals, int n, int max, const char *op);
/* Without MPI both fail as ct__dist_need_init does. */

#endif
