/* src/dist/process_group.c: the MPI process group, its collectives, and the bounded wait.
 *
 * The group is MPI_COMM_WORLD. The all-reduces on CPU tensors work on the tensor's own memory
 * (MPI_IN_PLACE); a tensor on another device is copied to the host with ct_to, reduced there and
 * copied back with ct_copy_, both counted in the copy ledger. ct_dist_broadcast packs its whole list
 * into one host staging buffer and sends it with one broadcast per 256 MiB chunk, as torch's
 * _broadcast_coalesced (at its definition below). Counts above INT_MAX / 2 elements are sent in
 * chunks, since MPI's counts are int. Built without MPI (CUTTLE_WITH_MPI undefined), the
 * functions that need MPI fail with CT_EUNSUPPORTED and say how to get it.
 *
 * Faults end the job, they never hang it (issue 10). Collectives are numbered in the order they
 * start (#1, #2, ...), the same on every rank since every rank starts the same collectives in the
 * same order, and every wait is bounded by ct_dist_timeout() seconds. To name the ranks that never
 * arrived when a wait runs out, a rank that has waited longer than a grace period (a tenth of the
 * timeout, at most 0.1 s) tells every other rank the number of the last collective it started, an
 * int64 MPI_Isend on a duplicate of MPI_COMM_WORLD (the control communicator, so announcements
 * never match data), and reads theirs. A collective that completes within the grace period sends
 * nothing; a longer wait (a rank slow by more than 0.1 s, rank 0 writing a checkpoint while the
 * others wait, or a fault) costs world - 1 messages of 8 bytes. An earlier version announced every
 * collective, eagerly: 10 us of a 28 us all-reduce of 4 KiB. At the deadline, a rank whose last
 * announced collective is below the one waited for is named as never arrived: "ct_ddp_sync_grads:
 * all-reduce of bucket 2 (collective #17) timed out after 60 s on rank 0: rank 1 of 3 never arrived
 * (dead or stuck); ending the job". A rank that did arrive but left early (a broadcast's root is
 * done once it has sent) and never waited long has announced nothing, and may be named with the
 * missing one. An MPI error (a peer's connection lost) is reported the same way.
 *
 * Two ways of waiting:
 * - Non-blocking collectives (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather, MPI_Ibarrier), completed
 *   by polling MPI_Test against the deadline: DDP's buckets, which overlap backward, the start-up
 *   checks and the broadcasts. A timeout returns CT_EBACKEND, and the group is broken: a
 *   collective that MPI never completed cannot be cancelled, so every later collective and
 *   ct_dist_finalize fail at once with CT_EBACKEND and the reason, and the program should end the
 *   job with ct_dist_abort (MPI_Abort), which makes mpirun end the ranks still running.
 * - Blocking MPI_Allreduce, for ct_dist_all_reduce_sum and _mean, where Open MPI's blocking
 *   algorithms (the tuned component) are as fast as its non-blocking ones (libnbc) or faster. A
 *   watchdog thread makes the announcements while the call blocks, and at the deadline it prints
 *   the same error and ends the job with MPI_Abort itself, since nothing can make a blocking MPI
 *   call return: PyTorch's NCCL watchdog ends the process the same way. This needs
 *   MPI_THREAD_MULTIPLE and a thread; without them these all-reduces are non-blocking too. */
#include "dist/dist_internal.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
  int initialized, finalized;
  int rank, world, local_rank;
  double timeout;
  int broken;          /* a collective timed out or failed: nothing more can be done on the group */
  char why[640];       /* the error that broke it */
  int64_t seq;         /* the number of the last collective started */
#ifdef CUTTLE_WITH_MPI
  MPI_Comm ctl;        /* announcements of arrival */
  int64_t *seen;       /* (world) the last collective each rank announced it had reached */
  /* One announcement in flight per peer at most: told[p] is the collective number being (or last)
   * sent to p, from its own slot since MPI reads the buffer until the send completes; sent[p] and
   * got[p] count the announcements sent to and received from p, for ct_dist_finalize. */
  int64_t *told, *sent, *got;
  MPI_Request *sends;  /* (world) the announcement in flight to each peer, or MPI_REQUEST_NULL */
  pthread_mutex_t ann; /* the announcement state: the waiting thread and the watchdog both use it */
  int multiple;        /* MPI gave MPI_THREAD_MULTIPLE: the progress thread and the watchdog may run */
  int quiet;           /* ct_dist_finalize has taken the counts of announcements sent: send no more */
#endif
} g = {.world = 1, .timeout = 60.0
#ifdef CUTTLE_WITH_MPI
       , .ann = PTHREAD_MUTEX_INITIALIZER
#endif
};

#ifdef CUTTLE_WITH_MPI
/* The progress thread (ct_ddp_opts.progress_thread). Open MPI moves a non-blocking collective on
 * only inside MPI calls, and backward can spend tens of milliseconds in one convolution without
 * any: a bucket's all-reduce started by a gradient hook then sits still until the next hook. While
 * DDP has all-reduces in flight (ct__dist_progress_begin/end) this thread calls MPI_Iprobe on a tag
 * nobody sends, which runs Open MPI's progress engine without touching the collectives' requests
 * (two threads may not use one request at once), every 100 microseconds: the asynchronous progress
 * Open MPI 4.1 does not offer over TCP. It needs MPI_THREAD_MULTIPLE; without it there is no
 * thread. It pays only where a core is free for it: with every core busy computing (2 ranks on 2
 * cores here) it slowed the cnn's step by 2 to 5 ms (`cuttle bench ddp-overlap`, docs/perf-history.md). */
#define TAG_PROGRESS 0x7e57
static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_t thread;
  int started, active, quit;
} prog = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static void *progress_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&prog.lock);
  while (!prog.quit) {
    if (!prog.active) {
      pthread_cond_wait(&prog.wake, &prog.lock);
      continue;
    }
    pthread_mutex_unlock(&prog.lock);
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, TAG_PROGRESS, g.ctl, &flag, &st);
    nanosleep(&(struct timespec){0, 100000}, NULL);
    pthread_mutex_lock(&prog.lock);
  }
  pthread_mutex_unlock(&prog.lock);
  return NULL;
}

void ct__dist_progress_begin(void) {
  if (!g.initialized || !g.multiple) return;
  pthread_mutex_lock(&prog.lock);
  if (!prog.started && pthread_create(&prog.thread, NULL, progress_main, NULL) == 0) prog.started = 1;
  prog.active++;
  pthread_cond_signal(&prog.wake);
  pthread_mutex_unlock(&prog.lock);
}

void ct__dist_progress_end(void) {
  if (!g.initialized || !g.multiple) return;
  pthread_mutex_lock(&prog.lock);
  if (prog.active > 0) prog.active--;
  pthread_mutex_unlock(&prog.lock);
}

/* Stop the thread before MPI_Finalize. */
static void progress_stop(void) {
  pthread_mutex_lock(&prog.lock);
  int started = prog.started;
  prog.quit = 1, prog.active = 0;
  pthread_cond_signal(&prog.wake);
  pthread_mutex_unlock(&prog.lock);
  if (started) pthread_join(prog.thread, NULL);
  prog.started = 0, prog.quit = 0;
}
#else
void ct__dist_progress_begin(void) {}
void ct__dist_progress_end(void) {}
#endif

int ct_dist_rank(void) { return g.initialized ? g.rank : 0; }
int ct_dist_world_size(void) { return g.initialized ? g.world : 1; }
int ct_dist_local_rank(void) { return g.initialized ? g.local_rank : 0; }
int ct__dist_initialized(void) { return g.initialized; }
int64_t ct__dist_collectives_started(void) { return g.seq; }

double ct__dist_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ct_status ct_dist_set_timeout(double seconds) {
  if (!(seconds > 0) || isinf(seconds))
    return ct__error(CT_EINVAL, "ct_dist_set_timeout: the timeout must be a finite number of seconds > 0; got %g", seconds);
  g.timeout = seconds;
  return CT_OK;
}

double ct_dist_timeout(void) { return g.timeout; }

ct_status ct__dist_need_init(const char *op) {
#ifdef CUTTLE_WITH_MPI
  if (!g.initialized)
    return ct__error(CT_EINVAL, "%s: the process group is not initialized; call ct_dist_init first (under mpirun)", op);
  if (g.broken)
    return ct__error(CT_EBACKEND, "%s: the process group is unusable since an earlier collective failed (%s); end the job "
                                  "with ct_dist_abort", op, g.why);
  return CT_OK;
#else
  return ct__error(CT_EUNSUPPORTED, "%s: cuttle was built without MPI; apt-get install libopenmpi-dev openmpi-bin "
                                    "(scripts/deps.sh does it) and rebuild", op);
#endif
}

/* Check a list of tensors given to a collective; CT_OK or the error, naming op.
 * floating: 0 any dtype and any strides (the broadcast, which packs the tensors in row-major order
 * and copies back elementwise), 1 float32/float64, 2 float32/float64/int64, both contiguous only
 * (the all-reduces work on the tensor's own memory). */
static ct_status check_list(const char *op, ct_tensor *const *ts, int n, int floating) {
  if (n < 0 || (n > 0 && !ts)) return ct__error(CT_EINVAL, "%s: need a list ts of n >= 0 tensors; got ts=%p, n=%d", op, (const void *)ts, n);
  for (int i = 0; i < n; i++) {
    if (!ts[i]) return ct__error(CT_EINVAL, "%s: tensor %d of %d is NULL", op, i, n);
    ct_dtype dt = ct_tensor_dtype(ts[i]);
    if (floating == 1 && dt != CT_F32 && dt != CT_F64)
      return ct__error(CT_EDTYPE, "%s: tensor %d is %s; the mean is taken of float32 or float64 tensors", op, i, ct_dtype_name(dt));
    if (floating == 2 && dt != CT_F32 && dt != CT_F64 && dt != CT_I64)
      return ct__error(CT_EDTYPE, "%s: tensor %d is %s; the sum is taken of float32, float64 or int64 tensors", op, i, ct_dtype_name(dt));
    if (floating && !ct_tensor_is_contiguous(ts[i]))
      return ct__error(CT_ESHAPE, "%s: tensor %d is not contiguous; pass ct_contiguous(t) and copy the result back", op, i);
  }
  return ct__dist_need_init(op);
}

#ifdef CUTTLE_WITH_MPI

#define TAG_ARRIVED 1

struct ct__dist_op {
  int64_t seq;
  char what[96];
  int nreq;
  MPI_Request *req; /* (nreq) one per chunk */
  double t0, t1;    /* started; seen complete (0 before) */
  int done;
};

/* Break the group with the pending error's message, and return its status. */
static ct_status break_group(ct_status s) {
  if (!g.initialized) return s;
  g.broken = 1;
  snprintf(g.why, sizeof g.why, "%s", ct_last_error());
  return s;
}

static ct_status mpi_error(const char *op, const char *call, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
  return ct__error(CT_EBACKEND, "%s: %s failed on rank %d of %d: %s", op, call, g.rank, g.world, msg);
}

/* Waiting longer than this before announcing: a tenth of the timeout, at most 0.1 s. */
static double grace(void) { return g.timeout / 10 < 0.1 ? g.timeout / 10 : 0.1; }

/* Receive the announcements that have arrived (with g.ann held). Errors are ignored: this only
 * informs a message. */
static void drain(void) {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    MPI_Message msg;
    /* a matched probe: the message probed is the one received, whatever other threads do */
    if (MPI_Improbe(MPI_ANY_SOURCE, TAG_ARRIVED, g.ctl, &flag, &msg, &st) != MPI_SUCCESS || !flag) return;
    int64_t v = 0;
    if (MPI_Mrecv(&v, 1, MPI_INT64_T, &msg, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
    g.got[st.MPI_SOURCE]++;
    if (v > g.seen[st.MPI_SOURCE]) g.seen[st.MPI_SOURCE] = v;
  }
}

/* Tell every other rank that this one has reached collective #seq, and read what they said (with
 * g.ann held). A peer whose previous announcement is still in flight is told on a later call: the
 * waits call this until they end. Errors are ignored: a lost announcement can only make a timeout's
 * message name a rank that did arrive. */
static void announce(int64_t seq) {
  drain();
  g.seen[g.rank] = seq;
  if (g.quiet) return;
  for (int p = 0; p < g.world; p++) {
    if (p == g.rank || g.told[p] >= seq) continue;
    int flag = 1;
    if (g.sends[p] != MPI_REQUEST_NULL) MPI_Test(&g.sends[p], &flag, MPI_STATUS_IGNORE);
    if (!flag) continue;
    g.told[p] = seq;
    if (MPI_Isend(&g.told[p], 1, MPI_INT64_T, p, TAG_ARRIVED, g.ctl, &g.sends[p]) == MPI_SUCCESS) g.sent[p]++;
    else g.sends[p] = MPI_REQUEST_NULL;
  }
}

int64_t ct__dist_announcements_sent(void) {
  pthread_mutex_lock(&g.ann);
  int64_t n = 0;
  for (int p = 0; g.sent && p < g.world; p++) n += g.sent[p];
  pthread_mutex_unlock(&g.ann);
  return n;
}

ct_status ct_dist_init(void) {
  if (g.initialized) return CT_OK;
  if (g.finalized) return ct__error(CT_EUNSUPPORTED, "ct_dist_init: the process group was finalized; MPI cannot be initialized twice in a process");
  int flag = 0, rc = MPI_Initialized(&flag), provided = 0;
  if (rc == MPI_SUCCESS && !flag) {
    /* DDP's buckets are non-blocking all-reduces, which Open MPI runs with libnbc; its default
     * algorithm ran 1.5x to 2.7x slower than Rabenseifner's (reduce-scatter, then all-gather) from
     * 64 KiB up on this machine, and as fast below (docs/perf-history.md, "DDP's buckets"). Open MPI reads
     * its parameters from the environment at MPI_Init; a value the user set wins (setenv does not
     * overwrite), other MPIs ignore the variable, and child processes inherit it. setenv is not
     * thread-safe: ct_dist_init belongs at the start of main, as MPI_Init does. Open MPI 4.1.1 gave
     * wrong sums with this algorithm (open-mpi/ompi#9385); Debian 12's 4.1.4 summed 1 to 40
     * doubles exactly on 2 to 8 ranks, in place and not, so the choice is made from 4.1.4 on only
     * (MPI_Get_library_version may be called before MPI_Init). */
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, major = 0, minor = 0, patch = 0;
    MPI_Get_library_version(lib, &len);
    if (sscanf(lib, "Open MPI v%d.%d.%d", &major, &minor, &patch) == 3 && major * 10000 + minor * 100 + patch >= 40104)
      setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
    /* MULTIPLE for the watchdog and the progress thread; the collectives stay on the calling thread */
    rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return ct__error(CT_EBACKEND, "ct_dist_init: MPI_Init_thread failed with error %d", rc);
  } else if (rc == MPI_SUCCESS)
    MPI_Query_thread(&provided);
  g.multiple = provided >= MPI_THREAD_MULTIPLE;
  if (rc != MPI_SUCCESS) return ct__error(CT_EBACKEND, "ct_dist_init: MPI_Initialized failed with error %d", rc);
  /* Errors come back as codes, so cuttle reports them instead of MPI aborting the job. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g.world);
  /* MPI_Comm_dup is itself a blocking collective: a rank that never starts hangs the others here,
   * before the bounded waits exist; mpirun's own start-up handles ranks that fail to launch. */
  rc = MPI_Comm_dup(MPI_COMM_WORLD, &g.ctl);
  if (rc != MPI_SUCCESS) return mpi_error("ct_dist_init", "MPI_Comm_dup", rc);
  MPI_Comm_set_errhandler(g.ctl, MPI_ERRORS_RETURN);
  int64_t *counters = ct__calloc((size_t)g.world * 4, sizeof *counters, "ct_dist_init: the arrival counters");
  g.sends = counters ? ct__calloc((size_t)g.world, sizeof *g.sends, "ct_dist_init: the announcements") : NULL;
  if (!g.sends) {
    free(counters);
    MPI_Comm_free(&g.ctl);
    return ct_last_status();
  }
  g.seen = counters, g.told = counters + g.world, g.sent = counters + 2 * g.world, g.got = counters + 3 * g.world;
  for (int p = 0; p < g.world; p++) g.sends[p] = MPI_REQUEST_NULL;
  const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  g.local_rank = lr ? atoi(lr) : 0;
  g.seq = 0, g.broken = 0, g.why[0] = 0, g.quiet = 0;
  g.initialized = 1;
  return CT_OK;
}

void ct_dist_abort(int code) {
  if (g.initialized) MPI_Abort(MPI_COMM_WORLD, code);
}

/* The ranks that have not reached collective seq, as "rank 1 of 3" or "ranks 1, 2 of 4"; n gets
 * their count. */
static void missing(int64_t seq, char *out, size_t cap, int *n) {
  pthread_mutex_lock(&g.ann);
  announce(seq); /* the others may be waiting to name this rank, too */
  drain();
  int k = 0;
  size_t len = 0;
  for (int p = 0; p < g.world; p++)
    if (g.seen[p] < seq) k++;
  *n = k;
  len += (size_t)snprintf(out, cap, "%s ", k == 1 ? "rank" : "ranks");
  for (int p = 0, i = 0; p < g.world && len < cap; p++)
    if (g.seen[p] < seq) {
      if (i < 16) len += (size_t)snprintf(out + len, cap - len, "%s%d", i ? ", " : "", p);
      else if (i == 16) len += (size_t)snprintf(out + len, cap - len, ", ...");
      i++;
    }
  if (len < cap) snprintf(out + len, cap - len, " of %d", g.world);
  pthread_mutex_unlock(&g.ann);
}

static ct_status op_failed(ct__dist_op *h, const char *op, const char *how) {
  char who[200];
  int n = 0;
  missing(h->seq, who, sizeof who, &n);
  if (n > 0)
    ct__error(CT_EBACKEND, "%s: %s (collective #%lld) %s on rank %d: %s never arrived (dead or stuck); ending the job",
              op, h->what, (long long)h->seq, how, g.rank, who);
  else
    ct__error(CT_EBACKEND, "%s: %s (collective #%lld) %s on rank %d: every rank arrived but it did not complete (a rank "
              "died during it, or the network failed); ending the job", op, h->what, (long long)h->seq, how, g.rank);
  return break_group(CT_EBACKEND);
}

/* A new op, numbered, with room for nreq requests; NULL on CT_ENOMEM, which breaks the group: this
 * rank would otherwise skip a collective the others start, and its next one would be matched
 * against theirs. */
static ct__dist_op *op_new(int nreq, const char *what) {
  ct__dist_op *h = ct__calloc(1, sizeof *h + (size_t)nreq * sizeof(MPI_Request), "a collective's state");
  if (!h) return break_group(ct_last_status()), NULL;
  h->req = (MPI_Request *)(h + 1);
  for (int i = 0; i < nreq; i++) h->req[i] = MPI_REQUEST_NULL;
  snprintf(h->what, sizeof h->what, "%s", what);
  h->seq = ++g.seq;
  h->t0 = ct__dist_now();
  return h;
}

ct_status ct__dist_test(ct__dist_op *h, int *done, const char *op) {
  *done = h->done;
  if (h->done) return CT_OK;
  int flag = 0, rc = MPI_Testall(h->nreq, h->req, &flag, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    char how[MPI_MAX_ERROR_STRING + 32];
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
    snprintf(how, sizeof how, "failed (%s)", msg);
    return op_failed(h, op, how);
  }
  if (flag) h->done = 1, h->t1 = ct__dist_now();
  *done = h->done;
  return CT_OK;
}

ct_status ct__dist_wait(ct__dist_op *h, const char *op) {
  if (!h->done && g.broken) return ct__dist_need_init(op); /* it will not complete now: fail at once */
  double start = ct__dist_now(), deadline = start + g.timeout, quiet = start + grace();
  for (long spins = 0;; spins++) {
    int done = 0;
    ct_status s = ct__dist_test(h, &done, op);
    if (s != CT_OK || done) return s;
    double now = ct__dist_now();
    if (now > quiet && (spins & 63) == 0) { /* waiting long: something may be wrong, say where this rank is */
      pthread_mutex_lock(&g.ann);
      announce(g.seq);
      pthread_mutex_unlock(&g.ann);
    }
    if (now > deadline) {
      char how[64];
      snprintf(how, sizeof how, "timed out after %g s", g.timeout);
      return op_failed(h, op, how);
    }
    /* Poll without sleeping, yielding the core between polls (the ranks may share cores): Open MPI
     * moves a non-blocking collective on only inside MPI calls, one round per call, so a sleep
     * between polls adds to every round (a 50 us sleep made 256 KiB all-reduces 15x slower than
     * MPI_Allreduce, which spins the same way; `cuttle bench allreduce`, docs/perf-history.md). */
    sched_yield();
  }
}

double ct__dist_op_seconds(const ct__dist_op *h) { return h && h->done ? h->t1 - h->t0 : 0; }
int ct__dist_op_done(const ct__dist_op *h) { return h && h->done; }

int ct__dist_op_release(ct__dist_op *h) {
  if (!h) return 1;
  if (!h->done) return 0; /* MPI still holds its buffer: leave both (the job is ending) */
  free(h);
  return 1;
}

static MPI_Datatype mpi_type(ct_dtype dt) { return dt == CT_F64 ? MPI_DOUBLE : dt == CT_I64 ? MPI_INT64_T : MPI_FLOAT; }

#define CHUNK (INT_MAX / 2)

ct_status ct__dist_iallreduce_sum(void *buf, int64_t count, ct_dtype dt, const char *op, const char *what,
                                  ct__dist_op **out) {
  *out = NULL;
  ct_status s = ct__dist_need_init(op);
  if (s != CT_OK) return s;
  int nreq = (int)((count + CHUNK - 1) / CHUNK);
  ct__dist_op *h = op_new(nreq > 0 ? nreq : 1, what);
  if (!h) return ct_last_status();
  h->nreq = nreq;
  size_t esize = ct_dtype_size(dt);
  for (int i = 0; i < nreq; i++) {
    int64_t off = (int64_t)i * CHUNK, n = count - off < CHUNK ? count - off : CHUNK;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + (size_t)off * esize, (int)n, mpi_type(dt), MPI_SUM, MPI_COMM_WORLD,
                            &h->req[i]);
    if (rc != MPI_SUCCESS) {
      /* the chunks started are in flight: keep h (and so the buffer) alive */
      h->nreq = i;
      if (i == 0) free(h);
      return break_group(mpi_error(op, "MPI_Iallreduce", rc));
    }
  }
  *out = h;
  return CT_OK;
}

/* Wait for h and release it; a failed wait keeps it (MPI may still write its buffer). */
static ct_status wait_release(ct__dist_op *h, const char *op) {
  ct_status s = ct__dist_wait(h, op);
  if (s == CT_OK) ct__dist_op_release(h);
  return s;
}

/* The watchdog of the blocking MPI_Allreduce. A thread of its own, started on first use, that
 * wakes every grace() / 2 seconds (at most 50 ms) and looks at the collective the calling thread is
 * blocked in. Arming and disarming are one atomic store each, with no lock, no clock read and no
 * signal: a shared-memory all-reduce of 4 KiB takes about 1.5 us, and a lock round trip and a clock
 * read cost a tenth of that. So the thread times a wait from the first tick that sees it, and the
 * deadline is late by one tick at most. Past the grace period it announces the collective for the
 * blocked thread; past the deadline it names the ranks that never arrived (or says that every rank
 * did and a rank stopped during it), and ends the job with MPI_Abort, as PyTorch's NCCL watchdog
 * ends the process: nothing makes a blocking MPI call return. */
static struct {
  pthread_mutex_t lock; /* the thread's sleep and quit flag */
  pthread_cond_t wake;
  pthread_t thread;
  int started, quit;
  _Atomic int64_t seq;     /* the collective being waited for; 0 when disarmed */
  const char *_Atomic op;  /* the public function, a string literal; set before seq */
  _Atomic double limit;    /* ct_dist_timeout() when armed (set before seq) */
} dog = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *watchdog_main(void *arg) {
  (void)arg;
  int64_t watched = 0; /* the collective seen blocked at the last tick, and since when */
  double since = 0;
  pthread_mutex_lock(&dog.lock);
  while (!dog.quit) {
    int64_t seq = atomic_load(&dog.seq);
    double now = ct__dist_now(), limit = atomic_load(&dog.limit), grace = limit / 10 < 0.1 ? limit / 10 : 0.1;
    if (seq != watched) watched = seq, since = now;
    else if (seq > 0 && now - since > limit) {
      const char *op = atomic_load(&dog.op);
      char who[200];
      int n = 0;
      missing(seq, who, sizeof who, &n);
      if (atomic_load(&dog.seq) != seq) continue; /* it completed meanwhile: nothing to end */
      if (n > 0)
        fprintf(stderr, "cuttle: %s: all-reduce (collective #%lld) timed out after %g s on rank %d: %s never arrived "
                        "(dead or stuck); ending the job\n", op, (long long)seq, limit, g.rank, who);
      else
        fprintf(stderr, "cuttle: %s: all-reduce (collective #%lld) did not complete within %g s on rank %d although "
                        "every rank arrived (a rank stopped during it); ending the job\n", op, (long long)seq, limit,
                g.rank);
      fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    } else if (seq > 0 && now - since > grace) {
      pthread_mutex_lock(&g.ann);
      announce(seq);
      pthread_mutex_unlock(&g.ann);
    }
    struct timespec ts; /* the condition waits on CLOCK_MONOTONIC: a wall clock stepped back does not stall it */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + grace / 2;
    ts.tv_sec = (time_t)t, ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&dog.wake, &dog.lock, &ts);
  }
  pthread_mutex_unlock(&dog.lock);
  return NULL;
}

/* 1 when armed, 0 when the thread could not start (the caller then takes the non-blocking path).
 * Only the thread making the collectives calls it, so dog.started needs no lock. */
static int watchdog_arm(int64_t seq, const char *op) {
  if (!dog.started) {
    pthread_condattr_t a;
    int ok = pthread_condattr_init(&a) == 0;
    ok = ok && pthread_condattr_setclock(&a, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&dog.wake, &a) == 0;
    if (ok && pthread_create(&dog.thread, NULL, watchdog_main, NULL) == 0) dog.started = 1;
    else if (ok) pthread_cond_destroy(&dog.wake);
    pthread_condattr_destroy(&a);
  }
  if (!dog.started) return 0;
  atomic_store(&dog.op, op);
  atomic_store(&dog.limit, g.timeout);
  atomic_store(&dog.seq, seq);
  return 1;
}

static void watchdog_disarm(void) { atomic_store(&dog.seq, 0); }

static void watchdog_stop(void) {
  pthread_mutex_lock(&dog.lock);
  int started = dog.started;
  dog.quit = 1;
  atomic_store(&dog.seq, 0);
  pthread_cond_signal(&dog.wake);
  pthread_mutex_unlock(&dog.lock);
  if (started) pthread_join(dog.thread, NULL);
  if (started) pthread_cond_destroy(&dog.wake);
  dog.started = 0, dog.quit = 0;
}

/* ct_dist_all_reduce_sum and _mean call the blocking MPI_Allreduce under the watchdog, at every
 * size: Open MPI's blocking all-reduce (the tuned component) was never slower than its non-blocking
 * one (libnbc) on this machine, 1.2x to 1.3x faster from 4 to 64 KiB and, before ct_dist_init chose
 * libnbc's algorithm, 1.5x to 2.7x faster from 64 KiB up (`cuttle bench allreduce`, docs/perf-history.md).
 * DDP's buckets stay non-blocking: they overlap backward. */
static ct_status allreduce_blocking(void *buf, int64_t count, ct_dtype dt, const char *op) {
  if (!watchdog_arm(g.seq + 1, op)) { /* no thread to bound the call: the non-blocking path, bounded by polling */
    ct__dist_op *h;
    ct_status s = ct__dist_iallreduce_sum(buf, count, dt, op, "all-reduce", &h);
    return s == CT_OK ? wait_release(h, op) : s;
  }
  g.seq++;
  size_t esize = ct_dtype_size(dt);
  int rc = MPI_SUCCESS;
  for (int64_t off = 0; off < count && rc == MPI_SUCCESS; off += CHUNK) {
    int64_t n = count - off < CHUNK ? count - off : CHUNK;
    rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + (size_t)off * esize, (int)n, mpi_type(dt), MPI_SUM, MPI_COMM_WORLD);
  }
  watchdog_disarm();
  return rc == MPI_SUCCESS ? CT_OK : break_group(mpi_error(op, "MPI_Allreduce", rc));
}

ct_status ct__dist_break(ct_status s) { return break_group(s); }

ct_status ct__dist_allreduce_sum(void *buf, int64_t count, ct_dtype dt, const char *op) {
  ct_status s = ct__dist_need_init(op);
  if (s != CT_OK) return s;
  if (g.multiple) return allreduce_blocking(buf, count, dt, op);
  ct__dist_op *h;
  s = ct__dist_iallreduce_sum(buf, count, dt, op, "all-reduce", &h);
  return s == CT_OK ? wait_release(h, op) : s;
}

ct_status ct__dist_allreduce_i64(int64_t *vals, int n, int max, const char *op) {
  ct_status s = ct__dist_need_init(op);
  if (s != CT_OK) return s;
  ct__dist_op *h = op_new(1, max ? "all-reduce (max)" : "all-reduce (min)");
  if (!h) return ct_last_status();
  h->nreq = 1;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, vals, n, MPI_INT64_T, max ? MPI_MAX : MPI_MIN, MPI_COMM_WORLD, &h->req[0]);
  if (rc != MPI_SUCCESS) return free(h), break_group(mpi_error(op, "MPI_Iallreduce", rc));
  return wait_release(h, op);
}

ct_status ct__dist_allgather_i64(const int64_t *mine, int n, int64_t *all, const char *op, const char *what) {
  ct_status s = ct__dist_need_init(op);
  if (s != CT_OK) return s;
  ct__dist_op *h = op_new(1, what);
  if (!h) return ct_last_status();
  h->nreq = 1;
  int rc = MPI_Iallgather(mine, n, MPI_INT64_T, all, n, MPI_INT64_T, MPI_COMM_WORLD, &h->req[0]);
  if (rc != MPI_SUCCESS) return free(h), break_group(mpi_error(op, "MPI_Iallgather", rc));
  return wait_release(h, op);
}

/* Broadcast nbytes bytes of buf from root, in place, and wait (bounded). *busy becomes 1 when it
 * fails leaving MPI a request on buf (a chunk started but never seen complete): the caller must then
 * keep buf allocated, since MPI may still write it (the group is broken and the job ends). */
static ct_status bcast_bytes(void *buf, size_t nbytes, int root, const char *op, int *busy) {
  *busy = 0;
  ct_status s = ct__dist_need_init(op);
  if (s != CT_OK) return s;
  int nreq = (int)((nbytes + (size_t)CHUNK - 1) / (size_t)CHUNK);
  char what[64];
  snprintf(what, sizeof what, "broadcast from rank %d", root);
  ct__dist_op *h = op_new(nreq > 0 ? nreq : 1, what);
  if (!h) return ct_last_status();
  for (int i = 0; i < nreq; i++) {
    size_t off = (size_t)i * CHUNK, n = nbytes - off < (size_t)CHUNK ? nbytes - off : (size_t)CHUNK;
    int rc = MPI_Ibcast((char *)buf + off, (int)n, MPI_BYTE, root, MPI_COMM_WORLD, &h->req[i]);
    if (rc != MPI_SUCCESS) {
      h->nreq = i;
      if (i == 0) free(h);
      else *busy = 1;
      return break_group(mpi_error(op, "MPI_Ibcast", rc));
    }
    h->nreq = i + 1;
  }
  s = wait_release(h, op);
  if (s != CT_OK) *busy = 1;
  return s;
}

ct_status ct_dist_finalize(void) {
  if (!g.initialized) return CT_OK;
  if (g.broken)
    return ct__error(CT_EBACKEND, "ct_dist_finalize: the process group is unusable since an earlier collective failed "
                                  "(%s); MPI cannot be finalized cleanly: end the job with ct_dist_abort", g.why);
  /* No blocking all-reduce is left to guard, and the watchdog must not announce or receive while
   * the counts below are taken. */
  watchdog_stop();
  /* A barrier (bounded like every collective), then every announcement sent and received, so
   * that MPI_Finalize finds no message pending on the control communicator: each rank learns how
   * many the others sent it (an all-to-all of the counts) and receives until it has them all. */
  ct__dist_op *h = op_new(1, "barrier");
  if (!h) return ct_last_status();
  h->nreq = 1;
  int rc = MPI_Ibarrier(MPI_COMM_WORLD, &h->req[0]);
  if (rc != MPI_SUCCESS) return free(h), break_group(mpi_error("ct_dist_finalize", "MPI_Ibarrier", rc));
  ct_status s = wait_release(h, "ct_dist_finalize");
  int64_t *expect = s == CT_OK ? ct__calloc((size_t)g.world * 2, sizeof *expect, "ct_dist_finalize: the counts") : NULL;
  if (!expect) return s == CT_OK ? break_group(ct_last_status()) : s;
  /* From here on nothing is announced (a wait past the grace period below would otherwise send
   * announcements that the counts do not include), and the counts sent are a copy, which MPI reads
   * while the all-to-all is in flight. */
  pthread_mutex_lock(&g.ann);
  g.quiet = 1;
  int64_t *sent = expect + g.world;
  memcpy(sent, g.sent, (size_t)g.world * sizeof *sent);
  pthread_mutex_unlock(&g.ann);
  h = op_new(1, "all-to-all of the announcement counts");
  if (!h) return free(expect), ct_last_status();
  h->nreq = 1;
  rc = MPI_Ialltoall(sent, 1, MPI_INT64_T, expect, 1, MPI_INT64_T, MPI_COMM_WORLD, &h->req[0]);
  if (rc != MPI_SUCCESS) return free(h), free(expect), break_group(mpi_error("ct_dist_finalize", "MPI_Ialltoall", rc));
  s = wait_release(h, "ct_dist_finalize");
  if (s != CT_OK) return s; /* MPI may still write the counts: they stay allocated (the job ends) */
  double deadline = ct__dist_now() + g.timeout;
  int all = 0, late = -1; /* late: a peer whose announcements have not all come, or -2: a send of ours */
  while (!all && ct__dist_now() < deadline) {
    drain();
    all = 1, late = -1;
    for (int p = 0; p < g.world; p++) {
      int flag = 0;
      if (g.sends[p] != MPI_REQUEST_NULL) MPI_Test(&g.sends[p], &flag, MPI_STATUS_IGNORE);
      if (g.sends[p] != MPI_REQUEST_NULL) all = 0, late = -2;
      if (g.got[p] < expect[p]) all = 0, late = p;
    }
    if (!all) nanosleep(&(struct timespec){0, 100000}, NULL);
  }
  if (!all) {
    if (late >= 0)
      ct__error(CT_EBACKEND, "ct_dist_finalize: rank %d received %lld of the %lld arrival announcements rank %d sent "
                "it, within %g s; MPI cannot be finalized cleanly: end the job with ct_dist_abort", g.rank,
                (long long)g.got[late], (long long)expect[late], late, g.timeout);
    else
      ct__error(CT_EBACKEND, "ct_dist_finalize: an arrival announcement of rank %d was not delivered within %g s; MPI "
                "cannot be finalized cleanly: end the job with ct_dist_abort", g.rank, g.timeout);
    free(expect);
    return break_group(CT_EBACKEND);
  }
  free(expect);
  progress_stop();
  MPI_Comm_free(&g.ctl);
  rc = MPI_Finalize();
  free(g.seen), free(g.sends);
  g.seen = g.told = g.sent = g.got = NULL, g.sends = NULL;
  g.initialized = 0, g.finalized = 1;
  g.rank = 0, g.world = 1, g.local_rank = 0;
  if (rc != MPI_SUCCESS) return ct__error(CT_EBACKEND, "ct_dist_finalize: MPI_Finalize failed with error %d", rc);
  return CT_OK;
}

/* Run fn on a host view of t: t itself on the CPU, else a host copy written back afterwards. */
typedef ct_status (*host_fn)(ct_tensor *h, void *ctx);
static ct_status through_host(ct_tensor *t, host_fn fn, void *ctx, int write_back) {
  if (ct_tensor_device(t).kind == CT_CPU) {
    ct_status s = fn(t, ctx);
    if (s == CT_OK && write_back) ct__bump_version(t); /* written in place (ct_copy_ counts the other path) */
    return s;
  }
  ct_tensor *h = ct_to(t, CT_DEVICE_CPU, CT_COPY);
  if (!h) return ct_last_status();
  ct__untrack(h);
  int was_broken = g.broken;
  ct_status s = fn(h, ctx);
  /* A collective that failed in its wait (a timeout, a lost rank) broke the group and left its
   * request on h's memory, which MPI may still write: h is kept, as bcast_bytes keeps its buffer
   * (the job ends). A group broken before started nothing on h. */
  if (s != CT_OK && g.broken && !was_broken) return s;
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

static ct_status sum_host(ct_tensor *h, void *ctx) {
  (void)ctx;
  return ct__dist_allreduce_sum(ct_tensor_data(h), ct_tensor_numel(h), ct_tensor_dtype(h), "ct_dist_all_reduce_sum");
}

ct_status ct_dist_all_reduce_sum(ct_tensor *const *ts, int n) {
  ct_status s = check_list("ct_dist_all_reduce_sum", ts, n, 2);
  for (int i = 0; s == CT_OK && i < n; i++) s = through_host(ts[i], sum_host, NULL, 1);
  return s;
}

/* ct_dist_broadcast, coalesced as torch's _broadcast_coalesced (torch/csrc/distributed/c10d/comm.cpp,
 * which DDP's _sync_buffers and _sync_module_states call): the list's bytes, in list order and each
 * tensor in row-major order, are packed into one host staging buffer and sent with one broadcast
 * per chunk of at most bcast_chunk bytes (torch: buckets of 250 MB), then unpacked on the ranks
 * other than the root. ct_ddp_forward broadcasts every BatchNorm buffer before a forward:
 * resnet18's 60 small tensors (38 KB) were 60 broadcasts, each a round of MPI latency, and are now
 * one. Broadcast is bytewise, so unlike torch's buckets (one dtype and device each) a chunk mixes
 * dtypes and devices; every rank cuts the list into the same chunks, since the chunks depend only
 * on the sizes, which every rank must give alike. Packing and unpacking in row-major order also
 * takes strided tensors, as torch's flatten_dense_tensors and copy_ do.
 * A tensor larger than a chunk is sent alone, in place when it is a contiguous CPU tensor (no
 * staging copy of a large tensor), else through a host copy of its own.
 *
 * Only the non-root ranks write: the root's tensors keep their values, and their version counters
 * (torch's root copies the flat buffer back into its own tensors and so bumps their _version; the
 * values do not change, and cuttle counts a write only where one is made). A non-root's CPU tensor
 * written by memcpy gets ct__bump_version, one written by ct_copy_ (strided, or on a device) gets it
 * from ct_copy_. */
static size_t bcast_chunk = (size_t)256 << 20;

size_t ct__dist_set_broadcast_chunk(size_t bytes) {
  size_t old = bcast_chunk;
  bcast_chunk = bytes > 0 ? bytes : (size_t)256 << 20;
  return old;
}

static size_t nbytes_of(ct_tensor *t) { return (size_t)ct_tensor_numel(t) * ct_dtype_size(ct_tensor_dtype(t)); }
static int host_dense(ct_tensor *t) { return ct_tensor_device(t).kind == CT_CPU && ct_tensor_is_contiguous(t); }

/* Write the row-major bytes of t (nbytes_of(t) of them) into dst. */
static ct_status pack(ct_tensor *t, char *dst) {
  if (!nbytes_of(t)) return CT_OK; /* an empty tensor's data may be NULL, which memcpy must not get */
  if (!host_dense(t)) return ct_to_host(t, dst, nbytes_of(t), ct_tensor_dtype(t)); /* strided or on a device */
  memcpy(dst, ct_tensor_data(t), nbytes_of(t));
  return CT_OK;
}

/* Write the row-major bytes at src into t (an empty t is not written, nor counted as written). */
static ct_status unpack(ct_tensor *t, const char *src) {
  if (!nbytes_of(t)) return CT_OK;
  if (host_dense(t)) {
    memcpy(ct_tensor_data(t), src, nbytes_of(t));
    ct__bump_version(t);
    return CT_OK;
  }
  ct_tensor *h = ct_from_host(src, ct_tensor_ndim(t), ct_tensor_shape(t), ct_tensor_dtype(t), CT_DEVICE_CPU);
  if (!h) return ct_last_status();
  ct__untrack(h);
  ct_status s = ct_copy_(t, h); /* to the device, or into the strides; counted in the ledger, bumps the version */
  ct_tensor_free(h);
  return s;
}

/* A tensor of more than bcast_chunk bytes, alone. */
static ct_status bcast_large(ct_tensor *t, int root, const char *op) {
  int busy = 0, mine = g.rank == root;
  if (host_dense(t)) { /* in place */
    ct_status s = bcast_bytes(ct_tensor_data(t), nbytes_of(t), root, op, &busy);
    if (s == CT_OK && !mine) ct__bump_version(t);
    return s;
  }
  /* the root's row-major copy on the host, or room for it */
  ct_tensor *h = mine ? ct_to(t, CT_DEVICE_CPU, CT_COPY)
                      : ct_empty(ct_tensor_ndim(t), ct_tensor_shape(t), ct_tensor_dtype(t), CT_DEVICE_CPU);
  if (!h) return break_group(ct_last_status()); /* this rank skips a collective the others start */
  ct__untrack(h);
  ct_status s = bcast_bytes(ct_tensor_data(h), nbytes_of(t), root, op, &busy);
  if (s == CT_OK && !mine) s = ct_copy_(t, h);
  if (!busy) ct_tensor_free(h); /* else MPI may still write it: kept (the group is broken) */
  return s;
}

ct_status ct_dist_broadcast(ct_tensor *const *ts, int n, int root) {
  const char *op = "ct_dist_broadcast";
  ct_status s = check_list(op, ts, n, 0);
  if (s == CT_OK && (root < 0 || root >= g.world))
    return ct__error(CT_EINVAL, "ct_dist_broadcast: root %d is outside [0, %d)", root, g.world);
  if (s != CT_OK) return s;
  /* The staging buffer holds any chunk: at most bcast_chunk bytes, and no more than the tensors
   * that go through it. left: the bytes not yet sent, to know whether a failure skips collectives. */
  size_t cap = 0, left = 0;
  for (int i = 0; i < n; i++) {
    size_t b = nbytes_of(ts[i]);
    left += b;
    if (b <= bcast_chunk) cap += b;
  }
  if (cap > bcast_chunk) cap = bcast_chunk;
  char *stage = cap ? ct__malloc(cap, "ct_dist_broadcast: the staging buffer") : NULL;
  if (cap && !stage) return break_group(ct_last_status());
  int mine = g.rank == root, busy = 0;
  for (int i = 0; s == CT_OK && i < n;) {
    size_t b = nbytes_of(ts[i]);
    if (b > bcast_chunk) {
      s = bcast_large(ts[i++], root, op);
      left -= b;
      if (s != CT_OK && left > 0 && !g.broken) s = break_group(s); /* the chunks left would be skipped */
      continue;
    }
    /* the chunk: tensors [i, j), in list order, while they fit */
    int j = i;
    size_t total = 0;
    for (; j < n && nbytes_of(ts[j]) <= bcast_chunk && total + nbytes_of(ts[j]) <= bcast_chunk; j++)
      total += nbytes_of(ts[j]);
    left -= total;
    size_t off = 0;
    for (int k = i; mine && s == CT_OK && k < j; off += nbytes_of(ts[k++])) s = pack(ts[k], stage + off);
    if (s != CT_OK) {
      s = break_group(s); /* this rank skips a collective the others start */
      break;
    }
    if (total > 0) s = bcast_bytes(stage, total, root, op, &busy); /* empty tensors: no collective on any rank */
    off = 0;
    for (int k = i; !mine && s == CT_OK && k < j; off += nbytes_of(ts[k++])) s = unpack(ts[k], stage + off);
    /* an unpack that failed after the collective leaves this rank in step, unless chunks remain */
    if (s != CT_OK && left > 0 && !g.broken) s = break_group(s);
    i = j;
  }
  if (!busy) free(stage); /* else MPI may still write it: kept (the group is broken) */
  return s;
}

#else /* built without MPI */

ct_status ct__dist_break(ct_status s) { return s; }

struct ct__dist_op {
  int unused;
};

ct_status ct_dist_init(void) { return ct__dist_need_init("ct_dist_init"); }
ct_status ct_dist_finalize(void) { return CT_OK; }
int64_t ct__dist_announcements_sent(void) { return 0; }
void ct_dist_abort(int code) { (void)code; }
ct_status ct__dist_iallreduce_sum(void *buf, int64_t count, ct_dtype dt, const char *op, const char *what,
                                  ct__dist_op **out) {
  (void)buf, (void)count, (void)dt, (void)what;
  *out = NULL;
  return ct__dist_need_init(op);
}
ct_status ct__dist_test(ct__dist_op *h, int *done, const char *op) { (void)h, *done = 0; return ct__dist_need_init(op); }
ct_status ct__dist_wait(ct__dist_op *h, const char *op) { (void)h; return ct__dist_need_init(op); }
double ct__dist_op_seconds(const ct__dist_op *h) { (void)h; return 0; }
int ct__dist_op_done(const ct__dist_op *h) { (void)h; return 0; }
int ct__dist_op_release(ct__dist_op *h) { (void)h; return 1; }
ct_status ct__dist_allreduce_sum(void *buf, int64_t count, ct_dtype dt, const char *op) {
  (void)buf, (void)count, (void)dt;
  return ct__dist_need_init(op);
}
ct_status ct__dist_allreduce_i64(int64_t *vals, int n, int max, const char *op) {
  (void)vals, (void)n, (void)max;
  return ct__dist_need_init(op);
}
ct_status ct__dist_allgather_i64(const int64_t *mine, int n, int64_t *all, const char *op, const char *what) {
  (void)mine, (void)n, (void)all, (void)what;
  return ct__dist_need_init(op);
}

/* check_list ends with ct__dist_need_init, which fails here with CT_EUNSUPPORTED. */
ct_status ct_dist_all_reduce_mean(ct_tensor *const *ts, int n) { return check_list("ct_dist_all_reduce_mean", ts, n, 1); }
ct_status ct_dist_all_reduce_sum(ct_tensor *const *ts, int n) { return check_list("ct_dist_all_reduce_sum", ts, n, 2); }
ct_status ct_dist_broadcast(ct_tensor *const *ts, int n, int root) { (void)root; return check_list("ct_dist_broadcast", ts, n, 0); }
size_t ct__dist_set_broadcast_chunk(size_t bytes) { (void)bytes; return 0; }

#endif
