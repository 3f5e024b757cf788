/* tools/cuttle/run_dir.c: the run folder of `cuttle train` (run_dir.h). */
#include "run_dir.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/internal.h"

int ct_cli_run_path(const char *dir, const char *name, char *out, size_t n) {
  int w = snprintf(out, n, "%s/%s", dir, name);
  return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* mkdir -p path (a copy is cut at each '/'). 0, or errno. */
static int make_dirs(const char *path) {
  char p[CT_CLI_RUN_PATH_MAX];
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return ENAMETOOLONG;
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) return errno;
    *s = '/';
  }
  if (mkdir(p, 0777) != 0 && errno != EEXIST) return errno;
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/* The data's short name in a folder name: "fashion-mnist", "cifar10", or "imagefolder-<last part
 * of its folder>", with anything but letters, digits, '-', '_' and '.' made '_'. */
static void data_name(const ct_cli_run_config *c, char *out, size_t n) {
  const char *d = c->data.data ? c->data.data : "fashion-mnist", *colon = strchr(d, ':');
  size_t k = colon ? (size_t)(colon - d) : strlen(d);
  char folder[256] = "";
  if (colon) {
    const char *dir = colon + 1;
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    const char *base = dir + len;
    while (base > dir && base[-1] != '/') base--;
    snprintf(folder, sizeof folder, "-%.*s", (int)(dir + len - base), base);
  }
  snprintf(out, n, "%.*s%s", (int)k, d, folder);
  for (char *s = out; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
          *s == '_' || *s == '.'))
      *s = '_';
}

int ct_cli_run_dir_make(const char *prog, const ct_cli_run_config *c, char *dir, size_t n) {
  int err = 0;
  dir[0] = 0;
  if (c->out) {
    if (snprintf(dir, n, "%s", c->out) >= (int)n) err = ENAMETOOLONG;
    else err = make_dirs(dir);
  } else if (c->resume && strrchr(c->resume, '/')) {
    /* --resume runs/X/last.safetensors: continue in runs/X when it is a run folder */
    char cfg[CT_CLI_RUN_PATH_MAX];
    int len = (int)(strrchr(c->resume, '/') - c->resume);
    snprintf(dir, n, "%.*s", len, c->resume);
    if (ct_cli_run_path(dir, "config.json", cfg, sizeof cfg) == 0 && access(cfg, F_OK) == 0) return 0;
    dir[0] = 0;
  }
  if (!c->out && !dir[0]) {
    char data[300], stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    data_name(c, data, sizeof data);
    if ((err = make_dirs("runs")) == 0) {
      for (int k = 1; k < 1000; k++) {
        int w = k == 1 ? snprintf(dir, n, "runs/%s-%s-%s", c->model, data, stamp)
                       : snprintf(dir, n, "runs/%s-%s-%s-%d", c->model, data, stamp, k);
        if (w < 0 || (size_t)w >= n) {
          err = ENAMETOOLONG;
          break;
        }
        if (mkdir(dir, 0777) == 0) break; /* a name of its own: two runs started in the same second differ */
        if (errno != EEXIST) {
          err = errno;
          break;
        }
      }
    }
  }
  if (err) {
    fprintf(stderr, "%s: cannot make the run folder %s: %s\n", prog, c->out ? c->out : dir[0] ? dir : "runs",
            strerror(err));
    return 1;
  }
  return 0;
}

int ct_cli_run_write_config(const char *prog, const char *dir, const char *text) {
  char path[CT_CLI_RUN_PATH_MAX], *tmp = NULL;
  if (ct_cli_run_path(dir, "config.json", path, sizeof path)) {
    fprintf(stderr, "%s: the run folder's name is too long: %s\n", prog, dir);
    return 1;
  }
  FILE *f = ct__replace_open(prog, path, &tmp);
  if (f) {
    fputs(text, f);
    fputc('\n', f);
  }
  if (!f || ct__replace_commit(prog, f, tmp, path) != CT_OK) {
    fprintf(stderr, "%s: %s\n", prog, ct_last_error());
    return 1;
  }
  return 0;
}
