/* src/io/summary_writer.c: TensorBoard event files (cuttle/tensorboard.h has the semantics).
 *
 * Each event is an Event message (src/io/tensorboard.proto, TensorBoard's definitions) packed by
 * protobuf-c and framed as a TFRecord (src/io/tfrecord.c) into the writer's pending buffer, which
 * goes to the file in one fwrite when it holds max_queue events, when flush_secs have passed, or at
 * flush and close. The layout of each kind of event is the one PyTorch's SummaryWriter writes
 * (torch/utils/tensorboard/writer.py and summary.py: scalar(), text(), and the purge_step events of
 * SummaryWriter._get_file_writer). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "cuttle/tensorboard.h"
#include "io/tfrecord.h"
#include "tensorboard.pb-c.h"

struct ct_summary_writer {
  pthread_mutex_t lock;
  FILE *f; /* NULL once closed */
  char *path;
  int max_queue;
  double flush_secs;
  uint8_t *pending; /* framed records not yet written */
  size_t npending, cap;
  int queued;        /* events in pending */
  double last_write; /* monotonic seconds of the last write to the file */
};

static double now_wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double now_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* mkdir -p: every missing directory of path. */
static ct_status make_dirs(const char *op, const char *dir) {
  char *p = ct__strdup(dir, "a directory path");
  if (!p) return ct_last_status();
  ct_status s = CT_OK;
  for (char *q = p + 1;; q++) {
    if (*q != '/' && *q != '\0') continue;
    char c = *q;
    *q = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
      s = ct__error(CT_EIO, "%s: cannot make the directory %s: %s", op, p, strerror(errno));
      break;
    }
    *q = c;
    if (c == '\0') break;
  }
  struct stat st;
  if (s == CT_OK && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
    s = ct__error(CT_EIO, "%s: %s is not a directory", op, dir);
  free(p);
  return s;
}

/* Write the pending records to the file and flush it; the caller holds the lock. */
static ct_status write_pending(ct_summary_writer *w, const char *op) {
  ct_status s = CT_OK;
  if (w->npending && fwrite(w->pending, 1, w->npending, w->f) != w->npending)
    s = ct__error(CT_EIO, "%s: writing %zu bytes to %s failed: %s (%d event(s) lost)", op, w->npending, w->path,
                  strerror(errno), w->queued);
  if (s == CT_OK && fflush(w->f) != 0)
    s = ct__error(CT_EIO, "%s: flushing %s failed: %s (%d event(s) lost)", op, w->path, strerror(errno), w->queued);
  w->npending = 0;
  w->queued = 0;
  w->last_write = now_mono();
  return s;
}

/* Pack ev, frame it into the pending buffer, and write the buffer when it is due (force: now);
 * the caller holds the lock. */
static ct_status add_event(ct_summary_writer *w, const char *op, Tensorboard__Event *ev, int force) {
  size_t len = tensorboard__event__get_packed_size(ev);
  size_t need = w->npending + 12 + len + 4;
  if (need > w->cap) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < need) cap *= 2;
    uint8_t *p = ct__realloc(w->pending, cap, "a summary writer's event buffer");
    if (!p) return ct_last_status();
    w->pending = p, w->cap = cap;
  }
  uint8_t *at = w->pending + w->npending;
  size_t packed = tensorboard__event__pack(ev, at + 12);
  CT_ASSERT(packed == len);
  ct__tfrecord_frame(at + 12, len, at, at + 12 + len);
  w->npending = need;
  w->queued++;
  if (force || w->queued >= w->max_queue || now_mono() - w->last_write >= w->flush_secs) return write_pending(w, op);
  return CT_OK;
}

static ct_status add_simple(ct_summary_writer *w, const char *op, Tensorboard__Event *ev, int force) {
  pthread_mutex_lock(&w->lock);
  ct_status s = w->f ? add_event(w, op, ev, force)
                     : ct__error(CT_EINVAL, "%s: the writer of %s is closed", op, w->path);
  pthread_mutex_unlock(&w->lock);
  return s;
}

static int writers_made;  /* PyTorch's _global_uid: the <n> of the file name */

ct_summary_writer *ct_summary_writer_new_opts(const char *dir, const ct_summary_writer_opts *o) {
  const char *op = "ct_summary_writer_new";
  ct_summary_writer_opts d = o ? *o : (ct_summary_writer_opts){0};
  if (!dir || !*dir) CT_FAIL_NULL(CT_EINVAL, "%s: dir is %s; name the log directory (TensorBoard's --logdir or a folder in it)", op, dir ? "\"\"" : "NULL");
  if (d.max_queue < 0 || d.flush_secs < 0 || !(d.flush_secs == d.flush_secs) || d.purge_step < 0)
    CT_FAIL_NULL(CT_EINVAL, "%s: max_queue %d, flush_secs %g and purge_step %lld must not be negative (0: the default)", op,
                 d.max_queue, d.flush_secs, (long long)d.purge_step);
  const char *suffix = d.filename_suffix ? d.filename_suffix : "";
  if (strchr(suffix, '/')) CT_FAIL_NULL(CT_EINVAL, "%s: filename_suffix \"%s\" holds a '/'", op, suffix);
  if (make_dirs(op, dir) != CT_OK) return NULL;

  char host[256] = "localhost";
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = '\0';
  double wall = now_wall();
  int n = __atomic_fetch_add(&writers_made, 1, __ATOMIC_RELAXED);
  char *path = NULL;
  if (asprintf(&path, "%s/events.out.tfevents.%010lld.%s.%d.%d%s", dir, (long long)wall, host, (int)getpid(), n, suffix) < 0)
    CT_FAIL_NULL(CT_ENOMEM, "%s: out of memory for the event file's path", op);
  ct_summary_writer *w = ct__calloc(1, sizeof *w, "a summary writer");
  if (!w) {
    free(path);
    return NULL;
  }
  w->path = path;
  w->max_queue = d.max_queue ? d.max_queue : 10;
  w->flush_secs = d.flush_secs ? d.flush_secs : 120;
  w->last_write = now_mono();
  pthread_mutex_init(&w->lock, NULL);
  w->f = fopen(path, "wbx");
  if (!w->f) {
    ct__error(CT_EIO, "%s: cannot create the event file %s: %s", op, path, strerror(errno));
    ct_summary_writer_free(w);
    return NULL;
  }
  /* the file's first event, written at once (EventFileWriter does too), and purge_step's pair */
  Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
  ev.wall_time = wall;
  ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
  ev.file_version = "brain.Event:2";
  ct_status s = add_simple(w, op, &ev, d.purge_step == 0);
  if (s == CT_OK && d.purge_step > 0) {
    ev.step = d.purge_step;
    s = add_simple(w, op, &ev, 0);
    Tensorboard__SessionLog log = TENSORBOARD__SESSION_LOG__INIT;
    log.status = TENSORBOARD__SESSION_LOG__SESSION_STATUS__START;
    Tensorboard__Event start = TENSORBOARD__EVENT__INIT;
    start.wall_time = wall;
    start.step = d.purge_step;
    start.what_case = TENSORBOARD__EVENT__WHAT_SESSION_LOG;
    start.session_log = &log;
    if (s == CT_OK) s = add_simple(w, op, &start, 1);
  }
  if (s != CT_OK) {
    ct_summary_writer_free(w);
    return NULL;
  }
  return w;
}

ct_summary_writer *ct_summary_writer_new(const char *dir) { return ct_summary_writer_new_opts(dir, NULL); }

const char *ct_summary_writer_path(const ct_summary_writer *w) {
  return w ? w->path : ct__null_arg("ct_summary_writer_path", "w");
}

/* The checks every add makes; the event's wall time into *wall. */
static ct_status check_add(const char *op, ct_summary_writer *w, const char *tag, double wall_time, double *wall) {
  if (!w) return ct__null_status(op, "w");
  if (!tag || !*tag) return ct__error(CT_EINVAL, "%s: tag is %s; name the series (\"train/loss\")", op, tag ? "\"\"" : "NULL");
  if (!isfinite(wall_time) || wall_time < 0)
    return ct__error(CT_EINVAL, "%s: wall_time %g must be seconds since the epoch, or 0 for now", op, wall_time);
  *wall = wall_time ? wall_time : now_wall();
  return CT_OK;
}

/* An event at step and wall whose summary holds the one value v. */
static ct_status add_value(ct_summary_writer *w, const char *op, Tensorboard__Summary__Value *v, int64_t step, double wall) {
  Tensorboard__Summary__Value *vs[1] = {v};
  Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
  sum.n_value = 1;
  sum.value = vs;
  Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
  ev.wall_time = wall;
  ev.step = step;
  ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
  ev.summary = &sum;
  return add_simple(w, op, &ev, 0);
}

ct_status ct_summary_writer_add_scalar(ct_summary_writer *w, const char *tag, double value, int64_t step, double wall_time) {
  const char *op = "ct_summary_writer_add_scalar";
  double wall = 0;
  if (check_add(op, w, tag, wall_time, &wall) != CT_OK) return ct_last_status();
  Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
  v.tag = (char *)tag;
  v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
  v.simple_value = (float)value;
  return add_value(w, op, &v, step, wall);
}

ct_status ct_summary_writer_add_text(ct_summary_writer *w, const char *tag, const char *text, int64_t step, double wall_time) {
  const char *op = "ct_summary_writer_add_text";
  double wall = 0;
  if (check_add(op, w, tag, wall_time, &wall) != CT_OK) return ct_last_status();
  if (!text) return ct__null_status(op, "text");
  char *full = NULL;
  if (asprintf(&full, "%s/text_summary", tag) < 0) return ct__error(CT_ENOMEM, "%s: out of memory for the tag", op);
  /* the text plugin's metadata: plugin "text", content TextPluginData(version=0) serialized, which
   * is empty (proto3 writes no default value) */
  Tensorboard__SummaryMetadata__PluginData pd = TENSORBOARD__SUMMARY_METADATA__PLUGIN_DATA__INIT;
  pd.plugin_name = "text";
  Tensorboard__SummaryMetadata md = TENSORBOARD__SUMMARY_METADATA__INIT;
  md.plugin_data = &pd;
  Tensorboard__TensorShapeProto__Dim dim = TENSORBOARD__TENSOR_SHAPE_PROTO__DIM__INIT;
  dim.size = 1;
  Tensorboard__TensorShapeProto__Dim *dims[1] = {&dim};
  Tensorboard__TensorShapeProto shape = TENSORBOARD__TENSOR_SHAPE_PROTO__INIT;
  shape.n_dim = 1;
  shape.dim = dims;
  ProtobufCBinaryData str = {strlen(text), (uint8_t *)text};
  Tensorboard__TensorProto tp = TENSORBOARD__TENSOR_PROTO__INIT;
  tp.dtype = TENSORBOARD__DATA_TYPE__DT_STRING;
  tp.tensor_shape = &shape;
  tp.n_string_val = 1;
  tp.string_val = &str;
  Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
  v.tag = full;
  v.metadata = &md;
  v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_TENSOR;
  v.tensor = &tp;
  ct_status s = add_value(w, op, &v, step, wall);
  free(full);
  return s;
}

ct_status ct_summary_writer_flush(ct_summary_writer *w) {
  const char *op = "ct_summary_writer_flush";
  if (!w) return ct__null_status(op, "w");
  pthread_mutex_lock(&w->lock);
  ct_status s = w->f ? write_pending(w, op) : ct__error(CT_EINVAL, "%s: the writer of %s is closed", op, w->path);
  pthread_mutex_unlock(&w->lock);
  return s;
}

ct_status ct_summary_writer_close(ct_summary_writer *w) {
  const char *op = "ct_summary_writer_close";
  if (!w) return ct__null_status(op, "w");
  pthread_mutex_lock(&w->lock);
  ct_status s = CT_OK;
  if (w->f) {
    s = write_pending(w, op);
    if (fclose(w->f) != 0 && s == CT_OK) s = ct__error(CT_EIO, "%s: closing %s failed: %s", op, w->path, strerror(errno));
    w->f = NULL;
  }
  pthread_mutex_unlock(&w->lock);
  return s;
}

void ct_summary_writer_free(ct_summary_writer *w) {
  if (!w) return;
  if (w->f) {
    /* keep a pending error of the caller's: the close's own error is dropped, as documented */
    ct_status before = ct_last_status();
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    if (ct_summary_writer_close(w) != CT_OK) {
      if (before != CT_OK) ct__error(before, "%s", msg);
      else ct_clear_error();
    }
  }
  pthread_mutex_destroy(&w->lock);
  free(w->pending);
  free(w->path);
  free(w);
}
