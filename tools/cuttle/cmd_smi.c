/* tools/cuttle/cmd_smi.c: `cuttle smi`, a device monitor in the spirit of nvidia-smi.
 *
 *   cuttle smi [--json | --csv] [--pid PID] [--watch SECONDS]
 *
 * One reading of every GPU (through NVML, loaded at run time) and of the CPU; with --pid, a cuttle
 * process's allocator figures beside the driver's. --watch redraws in place until Ctrl-C, which
 * ends it cleanly with status 0. Without a driver it prints the CPU row and says so, status 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuttle.h"
#include "cuttle/monitor.h"

int ct_cmd_smi(int argc, char **argv);

static volatile sig_atomic_t stop_requested;
static void on_sigint(int sig) {
  (void)sig;
  stop_requested = 1;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: cuttle smi [--json | --csv] [--pid PID] [--watch SECONDS]\n"
          "  --json           one JSON object (N/A is null; bytes, mW, MHz, %%, Celsius)\n"
          "  --csv            a header line, then a row per GPU, the CPU and the --pid devices\n"
          "  --pid PID        show a cuttle process's allocator stats (ct_monitor_publish) beside\n"
          "                   the driver's figures; N/A when the process published none\n"
          "  --watch SECONDS  refresh every SECONDS (fractions allowed) until Ctrl-C\n"
          "Environment: CUTTLE_NVML_LIBRARY (path of libnvidia-ml.so.1), CUDA_VISIBLE_DEVICES,\n"
          "CUDA_DEVICE_ORDER. See docs/smi.md.\n");
}

/* Parse a positive number of seconds; -1 when malformed. */
static double parse_seconds(const char *s) {
  char *end = NULL;
  errno = 0;
  double v = s ? strtod(s, &end) : -1;
  if (!s || errno || end == s || *end || !(v > 0) || v > 86400) return -1;
  return v;
}

/* Sleep for seconds, returning early when Ctrl-C arrives (the handler has no SA_RESTART). */
static void nap(double seconds) {
  struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  while (!stop_requested && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int ct_cmd_smi(int argc, char **argv) {
  ct_monitor_format fmt = CT_MONITOR_TEXT;
  ct_monitor_options opt = {0};
  double watch = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--json")) {
      fmt = CT_MONITOR_JSON;
    } else if (!strcmp(a, "--csv")) {
      fmt = CT_MONITOR_CSV;
    } else if (!strcmp(a, "--pid") || !strcmp(a, "--watch")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "cuttle smi: %s needs a value\n", a);
        usage(stderr);
        return 2;
      }
      const char *v = argv[++i];
      if (!strcmp(a, "--pid")) {
        char *end = NULL;
        long pid = strtol(v, &end, 10);
        if (!*v || *end || pid <= 0 || pid > 0x3fffffff) {
          fprintf(stderr, "cuttle smi: --pid wants a process id, got \"%s\"\n", v);
          return 2;
        }
        opt.pid = (int)pid;
      } else if ((watch = parse_seconds(v)) < 0) {
        fprintf(stderr, "cuttle smi: --watch wants seconds > 0, got \"%s\"\n", v);
        return 2;
      }
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "cuttle smi: unknown option \"%s\"\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (watch > 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
  }
  int status = 0;
  do {
    ct_monitor_snapshot *s = ct_monitor_snapshot_new(&opt);
    char *out = s ? ct_monitor_render(s, fmt) : NULL;
    ct_monitor_snapshot_free(s);
    if (!out) {
      fprintf(stderr, "cuttle smi: %s\n", ct_last_error());
      status = 1;
      break;
    }
    /* In place: clear the screen and home the cursor, then draw. Scripts
     * reading JSON or CSV get one frame after another instead. */
    if (watch > 0 && fmt == CT_MONITOR_TEXT) fputs("\033[H\033[2J", stdout);
    fputs(out, stdout);
    fflush(stdout);
    free(out);
    if (watch > 0) nap(watch);
  } while (watch > 0 && !stop_requested);
  return status;
}
