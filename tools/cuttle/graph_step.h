/* tools/cuttle/graph_step.h: `--cuda-graph`, the training step captured once in a CUDA graph and
 * replayed for every batch (cuttle/cuda.h's ct_device_graph_*), as PyTorch's "whole network
 * capture" recipe (torch.cuda.graphs): a few eager steps warm everything up (library handles,
 * cuDNN's choices, the optimizer's state, the allocator's blocks), then the step is captured on
 * static copies of the batch, and each later batch of the same shape is copied into them and the
 * graph replayed, one launch instead of a hundred. A batch of another shape (the epoch's last) runs
 * eagerly. A change of the learning rate (a schedule) captures the step again.
 *
 * The step must be capturable: the optimizer made with capturable, no GradScaler (its skip reads
 * the device), no data parallelism, no gradient accumulation, no dropout (its mask would repeat);
 * `cuttle train` refuses those combinations before training.
 *
 * Rehearsal: on a device that cannot capture (the CPU, OpenCL), the same static-copy step runs
 * eagerly with sync-debug in error mode around it, so that CI proves on PoCL what the capture needs
 * of the step: the copies into the static batch, the in-place loss sum, the capturable optimizer,
 * and no synchronization inside the step. */
#ifndef CUTTLE_CLI_GRAPH_STEP_H
#define CUTTLE_CLI_GRAPH_STEP_H

#include <stdio.h>
#include "cuttle.h"

typedef struct ct_cli_graph_step ct_cli_graph_step;

/* The step function: one whole training step on the batch (x, y), its loss added in place to the
 * loss sum (ct_cli_graph_step_loss_sum). Must not synchronize with the device. */
typedef ct_status (*ct_cli_step_fn)(ct_tensor *x, ct_tensor *y, void *ctx);

/* A graph step on dev after `warmup` eager steps (0 means 3, PyTorch's recipe warms up for 3).
 * On a device that cannot capture, CUTTLE_GRAPH_REHEARSAL=1 in the environment makes it rehearse
 * (above); without it: NULL with CT_EUNSUPPORTED. NULL with CT_ENOMEM. */
ct_cli_graph_step *ct_cli_graph_step_new(ct_device dev, int warmup);
void ct_cli_graph_step_free(ct_cli_graph_step *g);

/* The float64 0-dim sum of loss x batch size on dev that the steps add to in place (borrowed). */
ct_tensor *ct_cli_graph_step_loss_sum(ct_cli_graph_step *g);

/* One step on (x, y) at learning rate lr: eager (step(x, y, ctx)) during the warm-up and for a batch
 * whose shape is not the static one; else the batch is copied into the static tensors and the
 * captured graph replayed (captured first when there is none yet or lr changed). Returns step's
 * status, or the capture's error (the batch then untrained). */
ct_status ct_cli_graph_step_run(ct_cli_graph_step *g, ct_tensor *x, ct_tensor *y, double lr, ct_cli_step_fn step,
                                void *ctx);

/* One line for the run's summary: "cuda graph: 3 eager steps, captured 1 time, 1401 replays". */
void ct_cli_graph_step_report(const ct_cli_graph_step *g, FILE *f);

#endif
