/* cuttle/tensorboard.h: training logs that TensorBoard reads (`tensorboard --logdir DIR`), written
 * with the semantics of PyTorch's torch.utils.tensorboard.SummaryWriter.
 *
 * A writer owns one event file in its directory, named as PyTorch names it:
 *   events.out.tfevents.<unix time, 10 digits>.<host name>.<pid>.<n><suffix>
 * (n counts the writers of this process, from 0). The file is TensorFlow's TFRecord framing
 * (length, masked CRC-32C of the length, data, masked CRC-32C of the data) around serialized
 * `Event` protocol buffers, whose definitions TensorBoard publishes (tensorboard/compat/proto/
 * event.proto, summary.proto); cuttle encodes them with protobuf-c. The first event holds
 * file_version "brain.Event:2", as every SummaryWriter's file does.
 *
 * What goes in, as PyTorch writes it:
 *  - a scalar (SummaryWriter.add_scalar): an Event{step, wall_time, summary: Value{tag,
 *    simple_value}}; simple_value is a float32, so a float64 value is rounded to float32, as
 *    PyTorch's default (new_style=False) does. TensorBoard shows it in its Scalars tab.
 *  - text (SummaryWriter.add_text): a Value with tag "<tag>/text_summary", the text plugin's
 *    metadata (plugin_name "text") and a DT_STRING tensor of shape (1,) holding the UTF-8 text
 *    (TensorBoard renders it as Markdown in its Text tab).
 *
 * Buffering (SummaryWriter's max_queue and flush_secs): events wait in memory and reach the file
 * when max_queue of them are waiting, when flush_secs have passed since the last write (checked at
 * each add: no thread), and at ct_summary_writer_flush / _close / _free. A crash loses the events
 * that were waiting.
 *
 * A resumed run (SummaryWriter's purge_step): a writer opened with purge_step = S > 0 writes a
 * SessionLog START event at step S, and TensorBoard then discards the events of the directory's
 * earlier files whose step is >= S (the ones the crashed run wrote after its last checkpoint), so
 * the curves continue where the checkpoint left off.
 *
 * A writer may be used from several threads (a mutex orders the adds). With several ranks, give
 * only rank 0 a writer, as PyTorch's examples do. */
#ifndef CUTTLE_TENSORBOARD_H
#define CUTTLE_TENSORBOARD_H

#include "cuttle/export.h"

#include <stdint.h>
#include "cuttle/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_summary_writer ct_summary_writer;

/* Options of ct_summary_writer_new_opts; zeros mean the defaults (SummaryWriter's). */
typedef struct {
  int max_queue;               /* events kept in memory before they are written (10); 1 writes each at once */
  double flush_secs;           /* seconds between writes at most, checked at each add (120) */
  const char *filename_suffix; /* appended to the file name (NULL or ""); no '/' */
  int64_t purge_step;          /* > 0: discard earlier files' events from this step on (see above); 0: none */
} ct_summary_writer_opts;

/* A writer of a new event file in directory dir (made with its parents when missing, mode 0777
 * less the umask, as os.makedirs). The caller frees it with ct_summary_writer_free. Errors (NULL):
 * CT_EINVAL (dir NULL or "", a negative option, a suffix with '/'), CT_EIO (the directory cannot be
 * made or the file cannot be created or written: the message names the path and the system's
 * reason), CT_ENOMEM. */
CT_API ct_summary_writer *ct_summary_writer_new(const char *dir);
/* ct_summary_writer_new with options (NULL: the defaults). Errors: those of ct_summary_writer_new. */
CT_API ct_summary_writer *ct_summary_writer_new_opts(const char *dir, const ct_summary_writer_opts *o);

/* The path of w's event file ("DIR/events.out.tfevents...."), borrowed: valid until w is freed.
 * NULL with CT_EINVAL for a NULL w. */
CT_API const char *ct_summary_writer_path(const ct_summary_writer *w);

/* Log value (rounded to float32, see above) under tag (a non-empty UTF-8 string, such as
 * "train/loss") at step (the x axis: an optimizer step, an epoch; any int64) and wall_time
 * (seconds since the Unix epoch; 0 means now). Errors: CT_EINVAL (w, tag NULL or tag "", wall_time
 * negative or not finite, w closed), CT_EIO (a write the add triggered failed; the events it held
 * are lost), CT_ENOMEM. */
CT_API ct_status ct_summary_writer_add_scalar(ct_summary_writer *w, const char *tag, double value, int64_t step,
                                              double wall_time);
/* Log text (UTF-8, shown as Markdown) under "<tag>/text_summary" at step and wall_time (0: now),
 * like SummaryWriter.add_text: for a run's options, say. Errors: those of
 * ct_summary_writer_add_scalar, and CT_EINVAL for a NULL text. */
CT_API ct_status ct_summary_writer_add_text(ct_summary_writer *w, const char *tag, const char *text, int64_t step,
                                            double wall_time);

/* Write every waiting event to the file and flush it to the operating system (fflush; no fsync).
 * Errors: CT_EINVAL (w NULL or closed), CT_EIO (the write failed: the waiting events are lost). */
CT_API ct_status ct_summary_writer_flush(ct_summary_writer *w);
/* Flush and close the file; w stays allocated (its path readable) and refuses further adds.
 * Closing a closed writer does nothing. Errors: CT_EINVAL (w NULL), CT_EIO (the last write or the
 * close failed). */
CT_API ct_status ct_summary_writer_close(ct_summary_writer *w);
/* Close w (ignoring an error: call ct_summary_writer_close first to see it) and free it. NULL is
 * allowed. */
CT_API void ct_summary_writer_free(ct_summary_writer *w);

#ifdef __cplusplus
}
#endif
#endif
