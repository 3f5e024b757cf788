/* src/core/file_replace.c: writing a file whole or not at all (internal.h's ct__replace_open and
 * ct__replace_commit). The contents go to a temporary file beside the path, created exclusively
 * under a name of this process and call alone (never another writer's file, nor one a link points
 * to), which is renamed over the path once complete, or removed: a reader sees the old file or the
 * new one, never half (a rename within a folder is atomic, POSIX). The profiler's Chrome trace and
 * the monitor's stats file write through it; safetensors checkpoints have their own writer, which
 * also syncs to disk (io/safetensors.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"

FILE *ct__replace_open(const char *op, const char *path, char **tmp) {
  static int seq;
  *tmp = NULL;
  size_t len = strlen(path) + 48;
  char *t = malloc(len);
  if (!t) {
    ct__error(CT_ENOMEM, "%s: out of memory for the name of %s's temporary file", op, path);
    return NULL;
  }
  snprintf(t, len, "%s.tmp.%d.%d", path, (int)getpid(), __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
  int fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    int err = errno;
    if (fd >= 0) close(fd), remove(t);
    ct__error(CT_EIO, "%s: cannot write %s: %s", op, t, strerror(err));
    free(t);
    return NULL;
  }
  *tmp = t;
  return f;
}

ct_status ct__replace_commit(const char *op, FILE *f, char *tmp, const char *path) {
  int err = ferror(f) ? EIO : 0;
  if (fclose(f) != 0 && !err) err = errno;
  if (!err && rename(tmp, path) != 0) err = errno;
  ct_status s = CT_OK;
  if (err) {
    s = ct__error(CT_EIO, "%s: cannot write %s: %s", op, path, strerror(err));
    remove(tmp);
  }
  free(tmp);
  return s;
}
