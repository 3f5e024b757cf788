/* src/dist/process_group.c: the MPI process group and the two collectives DDP needs.
 *
 * The group is MPI_COMM_WORLD. Collectives on CPU tensors work on the tensor's own memory
 * (MPI_IN_PLACE); a tensor on another device is copied to the host with ct_to, reduced there and
 * copied back with ct_copy_, both counted in the copy ledger. Counts above INT_MAX elements are
 * sent in chunks, since MPI's counts are int. Built without MPI (CUTTLE_WITH_MPI undefined), the
 * functions that need MPI fail with CT_EUNSUPPORTED and say how to get it. */
#include "dist/dist_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static struct {
  int initialized, finalized;
  int rank, world, local_rank;
} g = {0, 0, 0, 1, 0};

int ct_dist_rank(void) { return g.initialized ? g.rank : 0; }
int ct_dist_world_size(void) { return g.initialized ? g.world : 1; }
int ct_dist_local_rank(void) { return g.initialized ? g.local_rank : 0; }
int ct__dist_initialized(void) { return g.initialized; }

ct_status ct__dist_need_init(const char *op) {
#ifdef CUTTLE_WITH_MPI
  if (!g.initialized)
    return ct__error(CT_EINVAL, "%s: the process group is not initialized; call ct_dist_init first (under mpirun)", op);
  return CT_OK;
#else
  return ct__error(CT_EUNSUPPORTED, "%s: cuttle was built without MPI; apt-get install libopenmpi-dev openmpi-bin "
                                    "(scripts/deps.sh does it) and rebuild", op);
#endif
}

/* Check a list of tensors given to a collective; CT_OK or the error, naming op. */
static ct_status check_list(const char *op, ct_tensor *const *ts, int n, int floating) {
  if (n < 0 || (n > 0 && !ts)) return ct__error(CT_EINVAL, "%s: need a list ts of n >= 0 tensors; got ts=%p, n=%d", op, (const void *)ts, n);
  for (int i = 0; i < n; i++) {
    if (!ts[i]) return ct__error(CT_EINVAL, "%s: tensor %d of %d is NULL", op, i, n);
    ct_dtype dt = ct_tensor_dtype(ts[i]);
    if (floating && dt != CT_F32 && dt != CT_F64)
      return ct__error(CT_EDTYPE, "%s: tensor %d is %s; the mean is taken of float32 or float64 tensors", op, i, ct_dtype_name(dt));
    if (!ct_tensor_is_contiguous(ts[i]))
      return ct__error(CT_ESHAPE, "%s: tensor %d is not contiguous; pass ct_contiguous(t) and copy the result back", op, i);
  }
  return ct__dist_need_init(op);
}

#ifdef CUTTLE_WITH_MPI

static ct_status mpi_error(const char *op, const char *call, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
  return ct__error(CT_EBACKEND, "%s: %s failed on rank %d of %d: %s", op, call, g.rank, g.world, msg);
}

ct_status ct_dist_init(void) {
  if (g.initialized) return CT_OK;
  if (g.finalized) return ct__error(CT_EUNSUPPORTED, "ct_dist_init: the process group was finalized; MPI cannot be initialized twice in a process");
  int flag = 0, rc = MPI_Initialized(&flag);
  if (rc == MPI_SUCCESS && !flag) {
    int provided = 0;
    rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return ct__error(CT_EBACKEND, "ct_dist_init: MPI_Init_thread failed with error %d", rc);
  }
  if (rc != MPI_SUCCESS) return ct__error(CT_EBACKEND, "ct_dist_init: MPI_Initialized failed with error %d", rc);
  /* Errors come back as codes, so cuttle reports them instead of MPI aborting the job. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g.world);
  const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  g.local_rank = lr ? atoi(lr) : 0;
  g.initialized = 1;
  return CT_OK;
}

ct_status ct_dist_finalize(void) {
  if (!g.initialized) return CT_OK;
  MPI_Barrier(MPI_COMM_WORLD);
  int rc = MPI_Finalize();
  g.initialized = 0, g.finalized = 1;
  g.rank = 0, g.world = 1, g.local_rank = 0;
  if (rc != MPI_SUCCESS) return ct__error(CT_EBACKEND, "ct_dist_finalize: MPI_Finalize failed with error %d", rc);
  return CT_OK;
}

ct_status ct__dist_allreduce_sum(void *buf, int64_t count, ct_dtype dt, const char *op) {
  MPI_Datatype type = dt == CT_F64 ? MPI_DOUBLE : MPI_FLOAT;
  size_t esize = ct_dtype_size(dt);
  for (int64_t off = 0; off < count;) {
    int chunk = count - off > INT_MAX / 2 ? INT_MAX / 2 : (int)(count - off);
    int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + (size_t)off * esize, chunk, type, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_error(op, "MPI_Allreduce", rc);
    off += chunk;
  }
  return CT_OK;
}

static ct_status bcast_bytes(void *buf, size_t nbytes, int root, const char *op) {
  for (size_t off = 0; off < nbytes;) {
    int chunk = nbytes - off > (size_t)INT_MAX / 2 ? INT_MAX / 2 : (int)(nbytes - off);
    int rc = MPI_Bcast((char *)buf + off, chunk, MPI_BYTE, root, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_error(op, "MPI_Bcast", rc);
    off += (size_t)chunk;
  }
  return CT_OK;
}

ct_status ct__dist_allreduce_i64(int64_t *vals, int n, int max, const char *op) {
  int rc = MPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_INT64_T, max ? MPI_MAX : MPI_MIN, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? CT_OK : mpi_error(op, "MPI_Allreduce", rc);
}

/* Run fn on a host view of t: t itself on the CPU, else a host copy written back afterwards. */
typedef ct_status (*host_fn)(ct_tensor *h, void *ctx);
static ct_status through_host(ct_tensor *t, host_fn fn, void *ctx, int write_back) {
  if (ct_tensor_device(t).kind == CT_CPU) return fn(t, ctx);
  ct_tensor *h = ct_to(t, CT_DEVICE_CPU, CT_COPY);
  if (!h) return ct_last_status();
  ct__untrack(h);
  ct_status s = fn(h, ctx);
  if (s == CT_OK && write_back) s = ct_copy_(t, h);
  ct_tensor_free(h);
  return s;
}

static ct_status mean_host(ct_tensor *h, void *ctx) {
  (void)ctx;
  int64_t n = ct_tensor_numel(h);
  ct_status s = ct__dist_allreduce_sum(ct_tensor_data(h), n, ct_tensor_dtype(h), "ct_dist_all_reduce_mean");
  if (s != CT_OK) return s;
  if (ct_tensor_dtype(h) == CT_F64) {
    double *p = ct_tensor_data(h), inv = 1.0 / g.world;
    for (int64_t i = 0; i < n; i++) p[i] *= inv;
  } else {
    float *p = ct_tensor_data(h), inv = 1.0f / (float)g.world;
    for (int64_t i = 0; i < n; i++) p[i] *= inv;
  }
  return CT_OK;
}

ct_status ct_dist_all_reduce_mean(ct_tensor *const *ts, int n) {
  ct_status s = check_list("ct_dist_all_reduce_mean", ts, n, 1);
  for (int i = 0; s == CT_OK && i < n; i++) s = through_host(ts[i], mean_host, NULL, 1);
  return s;
}

static ct_status bcast_host(ct_tensor *h, void *ctx) {
  size_t nbytes = (size_t)ct_tensor_numel(h) * ct_dtype_size(ct_tensor_dtype(h));
  return bcast_bytes(ct_tensor_data(h), nbytes, *(int *)ctx, "ct_dist_broadcast");
}

ct_status ct_dist_broadcast(ct_tensor *const *ts, int n, int root) {
  ct_status s = check_list("ct_dist_broadcast", ts, n, 0);
  if (s == CT_OK && (root < 0 || root >= g.world))
    return ct__error(CT_EINVAL, "ct_dist_broadcast: root %d is outside [0, %d)", root, g.world);
  for (int i = 0; s == CT_OK && i < n; i++) s = through_host(ts[i], bcast_host, &root, 1);
  return s;
}

#else /* built without MPI */

ct_status ct_dist_init(void) { return ct__dist_need_init("ct_dist_init"); }
ct_status ct_dist_finalize(void) { return CT_OK; }
ct_status ct__dist_allreduce_sum(void *buf, int64_t count, ct_dtype dt, const char *op) { return ct__dist_need_init(op); }
ct_status ct__dist_allreduce_i64(int64_t *vals, int n, int max, const char *op) { return ct__dist_need_init(op); }

/* check_list ends with ct__dist_need_init, which fails here with CT_EUNSUPPORTED. */
ct_status ct_dist_all_reduce_mean(ct_tensor *const *ts, int n) { return check_list("ct_dist_all_reduce_mean", ts, n, 1); }
ct_status ct_dist_broadcast(ct_tensor *const *ts, int n, int root) { return check_list("ct_dist_broadcast", ts, n, 0); }

#endif
