/* src/core/ledger.c: the ledger, process-wide counters of every host<->device copy and every
 * synchronization point. It sits at the bottom of the core so that both the copies (core/copy.c,
 * ops/to.c, core/create.c) and the synchronizations (core/device.c, core/cuda.c) record into it
 * without importing each other. */
#include <stdio.h>
#include <string.h>
#include "core/internal.h"

/* Updated atomically: copies and syncs happen on every thread. */
static ct_ledger ledger;

static void add(uint64_t *c, uint64_t v) { __atomic_add_fetch(c, v, __ATOMIC_RELAXED); }

void ct__ledger_copy(ct_device src, ct_device dst, size_t nbytes, bool pinned, bool synchronous) {
  if (src.kind == CT_CPU && dst.kind != CT_CPU) add(&ledger.h2d_copies, 1), add(&ledger.h2d_bytes, nbytes);
  else if (src.kind != CT_CPU && dst.kind == CT_CPU) add(&ledger.d2h_copies, 1), add(&ledger.d2h_bytes, nbytes);
  else add(&ledger.d2d_copies, 1), add(&ledger.d2d_bytes, nbytes);
  if (pinned) add(&ledger.pinned_copies, 1);
  if (synchronous) add(&ledger.sync_copies, 1);
}

void ct__ledger_sync(void) { add(&ledger.syncs, 1); }

ct_ledger ct_ledger_get(void) {
  return ledger; /* fields are read one by one: a consistent snapshot across them is not promised */
}

void ct_ledger_reset(void) { memset(&ledger, 0, sizeof ledger); }

void ct_ledger_print(FILE *f) {
  if (!f) return (void)ct__null_status("ct_ledger_print", "f");
  ct_ledger l = ct_ledger_get();
  fprintf(f, "ledger: h2d %llu copies %.1f MB, d2h %llu copies %.1f MB, d2d %llu copies %.1f MB, pinned %llu, "
          "blocking %llu, syncs %llu\n",
          (unsigned long long)l.h2d_copies, l.h2d_bytes / 1e6, (unsigned long long)l.d2h_copies, l.d2h_bytes / 1e6,
          (unsigned long long)l.d2d_copies, l.d2d_bytes / 1e6, (unsigned long long)l.pinned_copies,
          (unsigned long long)l.sync_copies, (unsigned long long)l.syncs);
}
