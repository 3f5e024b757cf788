/* tools/cuttle/tensorboard_log.c: `cuttle train --tensorboard DIR` (tensorboard_log.h has the tags
 * and the rules). */
#define _GNU_SOURCE
#include "tensorboard_log.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ct_cli_tb {
  ct_summary_writer *w; /* NULL once a write failed: the run goes on unlogged */
  const char *prog;
  int64_t every;
  int world;
  /* where the current per-step stretch began, in the epoch's running account */
  int64_t last_seen;
  double last_seconds, last_loss_sum;
};

/* A failed write: say so once, and log nothing more. */
static void give_up(ct_cli_tb *tb, const char *then) {
  fprintf(stderr, "%s: --tensorboard: %s; %s\n", tb->prog, ct_last_error(), then);
  ct_clear_error();
  ct_summary_writer_free(tb->w);
  tb->w = NULL;
}

static void add(ct_cli_tb *tb, const char *tag, double value, int64_t step) {
  if (tb->w && ct_summary_writer_add_scalar(tb->w, tag, value, step, 0) != CT_OK) give_up(tb, "the rest of the run is not logged");
}

/* The options as a Markdown table ("| option | value |" rows, '|' in a value escaped), malloc'd. */
static char *options_table(const char *const (*rows)[2], int n) {
  size_t cap = 64;
  for (int i = 0; i < n; i++) cap += 8 + strlen(rows[i][0]) + 2 * strlen(rows[i][1]);
  char *t = malloc(cap), *p = t;
  if (!t) return NULL;
  p += sprintf(p, "| option | value |\n|---|---|");
  for (int i = 0; i < n; i++) {
    p += sprintf(p, "\n| %s | ", rows[i][0]);
    for (const char *v = rows[i][1]; *v; v++) {
      if (*v == '|' || *v == '\\') *p++ = '\\';
      *p++ = *v == '\n' ? ' ' : *v;
    }
    p += sprintf(p, " |");
  }
  return t;
}

ct_cli_tb *ct_cli_tb_open(const char *prog, const ct_cli_tb_opts *o) {
  ct_cli_tb *tb = calloc(1, sizeof *tb);
  char *text = tb ? options_table(o->options, o->n_options) : NULL;
  if (!text) {
    fprintf(stderr, "%s: out of memory for --tensorboard\n", prog);
    free(tb);
    return NULL;
  }
  *tb = (ct_cli_tb){.prog = prog, .every = o->every, .world = o->world > 1 ? o->world : 1};
  tb->w = ct_summary_writer_new_opts(o->dir, &(ct_summary_writer_opts){.purge_step = o->purge_step});
  ct_status s = tb->w ? ct_summary_writer_add_text(tb->w, "options", text, o->start_step, 0) : ct_last_status();
  if (s == CT_OK) s = ct_summary_writer_flush(tb->w); /* the options are there before the first step */
  free(text);
  if (s != CT_OK) {
    fprintf(stderr, "%s: --tensorboard %s: %s\n", prog, o->dir, ct_last_error());
    if (tb->w) remove(ct_summary_writer_path(tb->w)); /* nothing half-written */
    ct_summary_writer_free(tb->w);
    free(tb);
    return NULL;
  }
  if (o->purge_step > 0)
    fprintf(stderr, "--tensorboard: %s (purge_step %lld: TensorBoard drops what an earlier run logged from there on)\n",
            ct_summary_writer_path(tb->w), (long long)o->purge_step);
  else fprintf(stderr, "--tensorboard: %s\n", ct_summary_writer_path(tb->w));
  return tb;
}

void ct_cli_tb_epoch_start(ct_cli_tb *tb) {
  if (tb) tb->last_seen = 0, tb->last_seconds = 0, tb->last_loss_sum = 0;
}

void ct_cli_tb_step(ct_cli_tb *tb, int64_t step, const ct_cli_running *run, double lr, const ct_grad_scaler *scaler) {
  if (!tb || !tb->w || step % tb->every != 0) return;
  double sum = run->loss_sum ? ct_item(run->loss_sum) : 0; /* waits for the device */
  int64_t images = run->seen - tb->last_seen;
  double secs = run->seconds - tb->last_seconds;
  if (images > 0) add(tb, "train/loss", (sum - tb->last_loss_sum) / (double)images, step);
  if (images > 0 && secs > 0) add(tb, "images_per_s", (double)tb->world * (double)images / secs, step);
  add(tb, "lr", lr, step);
  if (scaler) {
    add(tb, "amp/scale", ct_grad_scaler_scale_value(scaler), step);
    add(tb, "amp/skipped_steps", (double)ct_grad_scaler_steps_skipped(scaler), step);
  }
  tb->last_seen = run->seen, tb->last_seconds = run->seconds, tb->last_loss_sum = sum;
}

void ct_cli_tb_epoch_end(ct_cli_tb *tb, int64_t step, const ct_cli_tb_epoch *e) {
  if (!tb || !tb->w) return;
  add(tb, "train/loss_epoch", e->train_loss, step);
  add(tb, "images_per_s_epoch", e->images_per_s, step);
  add(tb, "test/accuracy", e->test_acc, step);
  add(tb, "test/loss", e->test_loss, step);
  add(tb, "epoch", (double)e->epoch, step);
  if (tb->w && ct_summary_writer_flush(tb->w) != CT_OK) give_up(tb, "the rest of the run is not logged");
}

void ct_cli_tb_close(ct_cli_tb *tb) {
  if (tb && tb->w && ct_summary_writer_close(tb->w) != CT_OK) give_up(tb, "the last events are lost");
}

void ct_cli_tb_free(ct_cli_tb *tb) {
  if (!tb) return;
  ct_cli_tb_close(tb);
  ct_summary_writer_free(tb->w);
  free(tb);
}
