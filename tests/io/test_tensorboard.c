/* tests/io/test_tensorboard.c: the summary writer (cuttle/tensorboard.h) and its TFRecord framing,
 * read back in C with the framing reader (src/io/tfrecord.c) and protobuf-c's unpacker of the same
 * message definitions:
 *  - CRC-32C against RFC 3720's test vectors (appendix B.4) and the "123456789" check value, and
 *    TFRecord's mask;
 *  - the events a writer puts in its file: file_version first, scalars (tag, float32 value, step,
 *    wall time), text as TensorBoard's text plugin expects it, purge_step's pair of events;
 *  - the file name (PyTorch's pattern) and the directory made with its parents;
 *  - buffering: max_queue, flush_secs, flush and close;
 *  - adds from several threads;
 *  - errors, each with its message; the reader's refusal of truncated and corrupt records.
 * tests/io/test_interop_tensorboard.c checks the same files with TensorBoard's own reader and
 * against PyTorch's SummaryWriter. */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "io/tfrecord.h"
#include "tensorboard.pb-c.h"

static void test_crc32c(void **state) {
  (void)state;
  uint8_t buf[32];
  memset(buf, 0, 32);
  assert_int_equal(ct__crc32c(0, buf, 32), 0x8A9136AAu); /* RFC 3720 B.4: 32 bytes of zeros */
  memset(buf, 0xff, 32);
  assert_int_equal(ct__crc32c(0, buf, 32), 0x62A8AB43u); /* 32 bytes of ones */
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
  assert_int_equal(ct__crc32c(0, buf, 32), 0x46DD794Eu); /* incrementing */
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
  assert_int_equal(ct__crc32c(0, buf, 32), 0x113FDB5Cu); /* decrementing */
  assert_int_equal(ct__crc32c(0, "123456789", 9), 0xE3069283u); /* the CRC catalogue's check value */
  assert_int_equal(ct__crc32c(ct__crc32c(0, "1234", 4), "56789", 5), 0xE3069283u); /* continued */
  uint32_t c = ct__crc32c(0, "123456789", 9);
  assert_int_equal(ct__crc32c_masked("123456789", 9), (((c >> 15) | (c << 17)) + 0xa282ead8u));
}

/* The whole file at path (its size into *n). */
static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)sz + 1);
  assert_int_equal(fread(b, 1, (size_t)sz, f), (size_t)sz);
  fclose(f);
  *n = (size_t)sz;
  return b;
}

/* Every event of the file at path, unpacked (NULL-terminated; free with free_events). */
static Tensorboard__Event **read_events(const char *path, int *count) {
  size_t n, pos = 0, len;
  uint8_t *b = slurp(path, &n);
  const uint8_t *rec;
  Tensorboard__Event **ev = calloc(1, sizeof *ev);
  int k = 0, r;
  while ((r = ct__tfrecord_next(b, n, &pos, &rec, &len)) == 1) {
    ev = realloc(ev, (size_t)(k + 2) * sizeof *ev);
    ev[k] = tensorboard__event__unpack(NULL, len, rec);
    assert_non_null(ev[k]);
    ev[++k] = NULL;
  }
  if (r != 0) fail_msg("%s: %s", path, ct_last_error());
  free(b);
  *count = k;
  return ev;
}

static void free_events(Tensorboard__Event **ev) {
  for (int i = 0; ev[i]; i++) tensorboard__event__free_unpacked(ev[i], NULL);
  free(ev);
}

static off_t file_size(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return st.st_size;
}

static void test_events_written(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  char logdir[4096];
  snprintf(logdir, sizeof logdir, "%s/runs/a/b", dir); /* made with its parents */
  ct_summary_writer *w = ct_assert_nonnull(ct_summary_writer_new(logdir));
  const char *path = ct_summary_writer_path(w);
  /* events.out.tfevents.<10 digits>.<host>.<pid>.<n> */
  char host[256];
  gethostname(host, sizeof host);
  const char *base = strrchr(path, '/') + 1;
  assert_int_equal(strncmp(path, logdir, strlen(logdir)), 0);
  long long t;
  int pid, n, used = 0;
  char hostpart[300];
  assert_int_equal(sscanf(base, "events.out.tfevents.%10lld.%299[^\n]%n", &t, hostpart, &used), 2);
  assert_int_equal(base[20 + 10], '.');
  char want_tail[400];
  char *dot = strrchr(hostpart, '.');
  *dot = '\0';
  n = atoi(dot + 1);
  dot = strrchr(hostpart, '.');
  *dot = '\0';
  pid = atoi(dot + 1);
  assert_string_equal(hostpart, host);
  assert_int_equal(pid, getpid());
  assert_true(llabs(t - (long long)time(NULL)) < 60);
  snprintf(want_tail, sizeof want_tail, ".%d.%d", pid, n);
  printf("event file: %s\n", base);

  for (int s = 0; s < 5; s++) ct_assert_ok(ct_summary_writer_add_scalar(w, "train/loss", 1.0 / (s + 1), s, 1700000000.5 + s));
  ct_assert_ok(ct_summary_writer_add_scalar(w, "train/lr", 1e-3, 4, 0)); /* wall time: now */
  ct_assert_ok(ct_summary_writer_add_text(w, "options", "| option | value |\n|---|---|\n| lr | 0.001 |", 0, 1700000000.0));
  ct_assert_ok(ct_summary_writer_close(w));
  ct_assert_ok(ct_summary_writer_close(w)); /* a second close does nothing */

  int count;
  Tensorboard__Event **ev = read_events(path, &count);
  assert_int_equal(count, 8);
  assert_int_equal(ev[0]->what_case, TENSORBOARD__EVENT__WHAT_FILE_VERSION);
  assert_string_equal(ev[0]->file_version, "brain.Event:2");
  assert_int_equal(ev[0]->step, 0);
  assert_true(fabs(ev[0]->wall_time - (double)time(NULL)) < 60);
  for (int s = 0; s < 5; s++) {
    Tensorboard__Event *e = ev[1 + s];
    assert_int_equal(e->what_case, TENSORBOARD__EVENT__WHAT_SUMMARY);
    assert_int_equal(e->step, s);
    assert_true(e->wall_time == 1700000000.5 + s);
    assert_int_equal(e->summary->n_value, 1);
    Tensorboard__Summary__Value *v = e->summary->value[0];
    assert_string_equal(v->tag, "train/loss");
    assert_int_equal(v->value_case, TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE);
    assert_true(v->simple_value == (float)(1.0 / (s + 1)));
    assert_null(v->metadata);
  }
  assert_true(fabs(ev[6]->wall_time - (double)time(NULL)) < 60);
  assert_true(ev[6]->summary->value[0]->simple_value == 1e-3f);
  Tensorboard__Summary__Value *tv = ev[7]->summary->value[0];
  assert_string_equal(tv->tag, "options/text_summary");
  assert_non_null(tv->metadata);
  assert_string_equal(tv->metadata->plugin_data->plugin_name, "text");
  assert_int_equal(tv->metadata->plugin_data->content.len, 0);
  assert_int_equal(tv->value_case, TENSORBOARD__SUMMARY__VALUE__VALUE_TENSOR);
  assert_int_equal(tv->tensor->dtype, TENSORBOARD__DATA_TYPE__DT_STRING);
  assert_int_equal(tv->tensor->tensor_shape->n_dim, 1);
  assert_int_equal(tv->tensor->tensor_shape->dim[0]->size, 1);
  assert_int_equal(tv->tensor->n_string_val, 1);
  assert_int_equal(tv->tensor->string_val[0].len, strlen("| option | value |\n|---|---|\n| lr | 0.001 |"));
  assert_memory_equal(tv->tensor->string_val[0].data, "| option | value |", 18);
  free_events(ev);

  /* a second writer in the same directory gets the next number and the suffix */
  ct_summary_writer *w2 = ct_assert_nonnull(ct_summary_writer_new_opts(logdir, &(ct_summary_writer_opts){.filename_suffix = ".rank0"}));
  const char *p2 = ct_summary_writer_path(w2);
  assert_int_equal(strcmp(p2 + strlen(p2) - 6, ".rank0"), 0);
  assert_true(strcmp(p2, path) != 0);
  ct_summary_writer_free(w2);
  ct_summary_writer_free(w);
  ct_test_rmdir(dir);
}

static void test_buffering(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  ct_summary_writer *w = ct_assert_nonnull(ct_summary_writer_new_opts(dir, &(ct_summary_writer_opts){.max_queue = 3}));
  const char *path = ct_summary_writer_path(w);
  off_t start = file_size(path);
  assert_true(start > 0); /* the file_version event is written at once */
  ct_assert_ok(ct_summary_writer_add_scalar(w, "x", 1, 1, 0));
  ct_assert_ok(ct_summary_writer_add_scalar(w, "x", 2, 2, 0));
  assert_int_equal(file_size(path), start); /* waiting in memory */
  ct_assert_ok(ct_summary_writer_add_scalar(w, "x", 3, 3, 0));
  off_t three = file_size(path);
  assert_true(three > start); /* the third made max_queue */
  ct_assert_ok(ct_summary_writer_add_scalar(w, "x", 4, 4, 0));
  assert_int_equal(file_size(path), three);
  ct_assert_ok(ct_summary_writer_flush(w));
  assert_true(file_size(path) > three);
  ct_summary_writer_free(w);

  /* flush_secs: an add after the interval writes what waits */
  w = ct_assert_nonnull(ct_summary_writer_new_opts(dir, &(ct_summary_writer_opts){.max_queue = 1000, .flush_secs = 0.05}));
  path = ct_summary_writer_path(w);
  start = file_size(path);
  ct_assert_ok(ct_summary_writer_add_scalar(w, "x", 1, 1, 0));
  assert_int_equal(file_size(path), start);
  nanosleep(&(struct timespec){0, 100000000}, NULL);
  ct_assert_ok(ct_summary_writer_add_scalar(w, "x", 2, 2, 0));
  assert_true(file_size(path) > start);
  /* free writes the rest */
  ct_assert_ok(ct_summary_writer_add_scalar(w, "x", 3, 3, 0));
  char *keep = strdup(path);
  ct_summary_writer_free(w);
  int count;
  Tensorboard__Event **ev = read_events(keep, &count);
  assert_int_equal(count, 4);
  assert_int_equal(ev[3]->step, 3);
  free_events(ev);
  free(keep);
  ct_test_rmdir(dir);
}

static void test_purge_step(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  ct_summary_writer *w = ct_assert_nonnull(ct_summary_writer_new_opts(dir, &(ct_summary_writer_opts){.purge_step = 30}));
  char *path = strdup(ct_summary_writer_path(w));
  ct_assert_ok(ct_summary_writer_add_scalar(w, "x", 1, 30, 0));
  ct_summary_writer_free(w);
  int count;
  Tensorboard__Event **ev = read_events(path, &count);
  assert_int_equal(count, 4);
  assert_int_equal(ev[0]->what_case, TENSORBOARD__EVENT__WHAT_FILE_VERSION);
  assert_int_equal(ev[1]->what_case, TENSORBOARD__EVENT__WHAT_FILE_VERSION);
  assert_int_equal(ev[1]->step, 30);
  assert_int_equal(ev[2]->what_case, TENSORBOARD__EVENT__WHAT_SESSION_LOG);
  assert_int_equal(ev[2]->step, 30);
  assert_int_equal(ev[2]->session_log->status, TENSORBOARD__SESSION_LOG__SESSION_STATUS__START);
  assert_int_equal(ev[3]->step, 30);
  free_events(ev);
  free(path);
  ct_test_rmdir(dir);
}

typedef struct {
  ct_summary_writer *w;
  int id;
} worker_arg;

static void *worker(void *p) {
  worker_arg *a = p;
  char tag[32];
  snprintf(tag, sizeof tag, "thread%d", a->id);
  for (int s = 0; s < 200; s++)
    if (ct_summary_writer_add_scalar(a->w, tag, s, s, 0) != CT_OK) return (void *)1;
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  ct_summary_writer *w = ct_assert_nonnull(ct_summary_writer_new_opts(dir, &(ct_summary_writer_opts){.max_queue = 7}));
  pthread_t th[4];
  worker_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (worker_arg){w, i};
    pthread_create(&th[i], NULL, worker, &args[i]);
  }
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(th[i], &r);
    assert_null(r);
  }
  char *path = strdup(ct_summary_writer_path(w));
  ct_assert_ok(ct_summary_writer_close(w));
  ct_summary_writer_free(w);
  int count, seen[4] = {0};
  Tensorboard__Event **ev = read_events(path, &count);
  assert_int_equal(count, 1 + 4 * 200);
  for (int i = 1; i < count; i++) {
    int id = ev[i]->summary->value[0]->tag[6] - '0';
    assert_int_equal(ev[i]->step, seen[id]++); /* each thread's steps in its order */
  }
  free_events(ev);
  free(path);
  ct_test_rmdir(dir);
}

static void test_errors(void **state) {
  (void)state;
  char *dir = ct_assert_nonnull(ct_test_tmpdir());
  ct_clear_error();
  assert_null(ct_summary_writer_new(NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_summary_writer_new(""));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  assert_null(ct_summary_writer_new_opts(dir, &(ct_summary_writer_opts){.max_queue = -1}));
  ct_assert_error_contains("must not be negative");
  assert_null(ct_summary_writer_new_opts(dir, &(ct_summary_writer_opts){.filename_suffix = "a/b"}));
  ct_assert_error_contains("holds a '/'");
  /* a path through a regular file */
  char file[4096], below[4200];
  snprintf(file, sizeof file, "%s/plain", dir);
  FILE *f = fopen(file, "w");
  fclose(f);
  snprintf(below, sizeof below, "%s/logs", file);
  assert_null(ct_summary_writer_new(below));
  assert_int_equal(ct_last_status(), CT_EIO);
  ct_assert_error_contains("cannot make the directory");
  printf("refused: %s\n", ct_last_error());
  assert_null(ct_summary_writer_new(file));
  assert_int_equal(ct_last_status(), CT_EIO);
  ct_assert_error_contains("is not a directory");

  ct_summary_writer *w = ct_assert_nonnull(ct_summary_writer_new(dir));
  assert_int_equal(ct_summary_writer_add_scalar(NULL, "x", 1, 0, 0), CT_EINVAL);
  assert_int_equal(ct_summary_writer_add_scalar(w, NULL, 1, 0, 0), CT_EINVAL);
  assert_int_equal(ct_summary_writer_add_scalar(w, "", 1, 0, 0), CT_EINVAL);
  ct_assert_error_contains("tag is \"\"");
  assert_int_equal(ct_summary_writer_add_scalar(w, "x", 1, 0, -1), CT_EINVAL);
  assert_int_equal(ct_summary_writer_add_scalar(w, "x", 1, 0, NAN), CT_EINVAL);
  ct_assert_error_contains("wall_time");
  assert_int_equal(ct_summary_writer_add_text(w, "x", NULL, 0, 0), CT_EINVAL);
  ct_assert_ok(ct_summary_writer_add_scalar(w, "nan is a value", NAN, 0, 0)); /* TensorBoard shows it */
  ct_assert_ok(ct_summary_writer_close(w));
  assert_int_equal(ct_summary_writer_add_scalar(w, "x", 1, 0, 0), CT_EINVAL);
  ct_assert_error_contains("is closed");
  assert_int_equal(ct_summary_writer_flush(w), CT_EINVAL);
  assert_int_equal(ct_summary_writer_flush(NULL), CT_EINVAL);
  assert_int_equal(ct_summary_writer_close(NULL), CT_EINVAL);
  ct_clear_error();
  assert_null(ct_summary_writer_path(NULL));
  assert_int_equal(ct_last_status(), CT_EINVAL);
  ct_summary_writer_free(w);
  ct_summary_writer_free(NULL);
  ct_test_rmdir(dir);
}

/* The reader refuses what is not a whole, intact record. */
static void test_reader_refuses(void **state) {
  (void)state;
  uint8_t rec[12 + 5 + 4];
  ct__tfrecord_frame("hello", 5, rec, rec + 17);
  memcpy(rec + 12, "hello", 5);
  size_t pos = 0, len;
  const uint8_t *p;
  assert_int_equal(ct__tfrecord_next(rec, sizeof rec, &pos, &p, &len), 1);
  assert_int_equal(len, 5);
  assert_memory_equal(p, "hello", 5);
  assert_int_equal(ct__tfrecord_next(rec, sizeof rec, &pos, &p, &len), 0);
  for (size_t cut = 1; cut < sizeof rec; cut++) {
    pos = 0;
    assert_int_equal(ct__tfrecord_next(rec, cut, &pos, &p, &len), CT_EFORMAT);
  }
  ct_assert_error_contains("TFRecord");
  for (size_t flip = 0; flip < sizeof rec; flip++) {
    rec[flip] ^= 0x10;
    pos = 0;
    assert_int_equal(ct__tfrecord_next(rec, sizeof rec, &pos, &p, &len), CT_EFORMAT);
    rec[flip] ^= 0x10;
  }
  ct_assert_error_contains("does not match");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc32c),     cmocka_unit_test(test_events_written), cmocka_unit_test(test_buffering),
      cmocka_unit_test(test_purge_step), cmocka_unit_test(test_threads),        cmocka_unit_test(test_errors),
      cmocka_unit_test(test_reader_refuses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
