/* tools/cuttle/run_dir.h: the folder `cuttle train` keeps a run in, as torchvision's reference
 * scripts and Lightning do: runs/<model>-<data>-<date>-<time>/ by default (--out DIR names it):
 *
 *   config.json        the recipe (recipe.h), written whole at the start
 *   last.safetensors   the latest checkpoint: after every epoch, at --max-steps, on SIGINT and
 *                      SIGTERM, and every --save-every steps
 *   best.safetensors   the checkpoint of the best test accuracy so far (at an epoch's end)
 *   metrics.jsonl      one JSON line every --log-every steps and one per epoch, flushed each time
 *   events.out.tfevents.*   the TensorBoard events (unless --tensorboard DIR puts them elsewhere)
 *
 * A run resumed from a checkpoint inside a run folder (--resume runs/X/last.safetensors) without
 * --out continues in that folder. */
#ifndef CUTTLE_CLI_RUN_DIR_H
#define CUTTLE_CLI_RUN_DIR_H

#include <stddef.h>
#include "run_config.h"

#define CT_CLI_RUN_PATH_MAX 4096

/* Choose and make the run folder of c into dir (n bytes): --out, the folder of --resume's file
 * when it holds a config.json, or a new runs/<model>-<data>-<YYYYmmdd>-<HHMMSS>[-K] (K from 2
 * when that name is taken). Parents are made as `mkdir -p` makes them. *made: 1 when this call
 * created the folder (ct_cli_run_dir_discard may remove it); *continuing: 1 when --resume's file
 * lies in it (the run goes on in its own folder, keeping its best figure). A folder that holds
 * another run (a config.json, and --resume is not from it) is refused: a run never mixes its files
 * with another's. 0; 2 for that refusal or a name too long; 1 when the folder cannot be made; each
 * after printing why, prefixed with prog. */
int ct_cli_run_dir_make(const char *prog, const ct_cli_run_config *c, char *dir, size_t n, int *made, int *continuing);

/* Remove a folder ct_cli_run_dir_make made, with the files a run that failed before it began left
 * in it (its metrics.jsonl and TensorBoard events; nothing below a subfolder). */
void ct_cli_run_dir_discard(const char *dir);

/* dir/name into out (n bytes). 0, or -1 when it does not fit. */
int ct_cli_run_path(const char *dir, const char *name, char *out, size_t n);

/* Write text to dir/config.json whole or not at all. 0, or 1 after printing why. */
int ct_cli_run_write_config(const char *prog, const char *dir, const char *text);

#endif
