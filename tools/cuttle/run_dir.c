/* tools/cuttle/run_dir.c: the run folder of `cuttle train` (run_dir.h). */
#include "run_dir.h"

#include <dirent.h>
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

/* 1 when a and b name the same existing folder. */
static int same_dir(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The folder of --resume's file into out ("." for a bare name). */
static void resume_dir(const char *resume, char *out, size_t n) {
  const char *slash = strrchr(resume, '/');
  if (!slash) snprintf(out, n, ".");
  else snprintf(out, n, "%.*s", (int)(slash == resume ? 1 : slash - resume), resume);
}

int ct_cli_run_dir_make(const char *prog, const ct_cli_run_config *c, char *dir, size_t n, int *made, int *continuing) {
  int err = 0;
  char cfg[CT_CLI_RUN_PATH_MAX], from[CT_CLI_RUN_PATH_MAX] = "";
  dir[0] = 0, *made = 0, *continuing = 0;
  if (c->resume) resume_dir(c->resume, from, sizeof from);
  if (c->out) {
    if (snprintf(dir, n, "%s", c->out) >= (int)n) {
      fprintf(stderr, "%s: --out: the name is too long: %s\n", prog, c->out);
      return 2;
    }
    *made = access(dir, F_OK) != 0;
    err = make_dirs(dir);
  } else if (from[0] && ct_cli_run_path(from, "config.json", cfg, sizeof cfg) == 0 && access(cfg, F_OK) == 0) {
    snprintf(dir, n, "%s", from); /* --resume runs/X/last.safetensors: continue in runs/X */
  } else {
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
        if (mkdir(dir, 0777) == 0) { /* a name of its own: two runs started in the same second differ */
          *made = 1;
          break;
        }
        if (errno != EEXIST) {
          err = errno;
          break;
        }
      }
    }
  }
  if (err) {
    fprintf(stderr, "%s: cannot make the run folder %s: %s\n", prog, dir[0] ? dir : "runs", strerror(err));
    return 1;
  }
  *continuing = from[0] && same_dir(from, dir);
  if (!*made && !*continuing && ct_cli_run_path(dir, "config.json", cfg, sizeof cfg) == 0 && access(cfg, F_OK) == 0) {
    fprintf(stderr, "%s: %s holds another run (its config.json): choose another --out, or continue that run with "
                    "--resume %s/last.safetensors\n", prog, dir, dir);
    return 2;
  }
  return 0;
}

void ct_cli_run_dir_discard(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[CT_CLI_RUN_PATH_MAX];
  while (d && (e = readdir(d)) != NULL)
    if (e->d_name[0] != '.' && ct_cli_run_path(dir, e->d_name, p, sizeof p) == 0) unlink(p);
  if (d) closedir(d);
  rmdir(dir);
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
