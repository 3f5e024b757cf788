/* tools/cuttle/ranks.c: starting the ranks of a data-parallel job and setting each one up
 * (ranks.h). The training itself (DDP, the sampler, rank 0's writes) is in cmd_train.c.
 *
 * Open MPI and signals, as measured with Open MPI 4.1.4 (Debian 12): mpirun forwards SIGUSR2 to
 * every rank at once (its documentation lists SIGUSR1 too, but that one did not reach the ranks
 * here), as it does SIGTSTP, SIGCONT, SIGALRM and SIGABRT, but treats its own SIGINT
 * and SIGTERM as an order to end the job: it sends the ranks SIGCONT, waits
 * odls_base_sigkill_timeout seconds (1 by default), sends SIGTERM, waits as long again, sends
 * SIGKILL, and exits 1 (it refuses SIGTERM and SIGINT in ess_base_forward_signals). So the
 * launcher below forwards a SIGINT or SIGTERM it receives as SIGUSR2, and cuttle's ranks take it
 * as SIGTERM: every rank finishes its step, rank 0 saves, and the ranks exit 143, which mpirun
 * reports (the first non-zero exit status of a rank); the launcher then exits 130 for a SIGINT,
 * 143 for a SIGTERM, as one process would. */
#define _GNU_SOURCE
#include "ranks.h"

#include <errno.h>
#include <omp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "commands.h"
#include "cuttle/monitor.h"

int ct_cli_under_launcher(void) { return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL; }

static char prog_name[64] = "cuttle";

const char *ct_cli_rank_prog(void) { return prog_name; }

int ct_cli_rank_init(const char *prog, double timeout) {
  if (ct_dist_set_timeout(timeout) != CT_OK || ct_dist_init() != CT_OK) {
    fprintf(stderr, "%s: cannot join the ranks of this job: %s\n", prog, ct_last_error());
    return 1;
  }
  if (ct_dist_world_size() > 1)
    snprintf(prog_name, sizeof prog_name, "cuttle (rank %d/%d)", ct_dist_rank(), ct_dist_world_size());
  return 0;
}

_Noreturn void ct_cli_rank_abort(const char *what) {
  if (what) fprintf(stderr, "\n%s: %s: %s\n", prog_name, what, ct_last_status() != CT_OK ? ct_last_error() : "(see above)");
  fprintf(stderr, "%s: leaving the job with status 1 (mpirun ends the other ranks)\n", prog_name);
  ct_monitor_unpublish();
  fflush(stdout), fflush(stderr);
  ct_dist_abort(1); /* MPI_Abort: mpirun ends every rank, a stuck one included; does not return in a job */
  _exit(1);
}

/* Ranks on this machine: Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS, else 1. */
static int local_size(void) {
  const char *s = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!s) s = getenv("MPI_LOCALNRANKS");
  int n = s ? atoi(s) : 1;
  return n > 0 ? n : 1;
}

static int allowed_cpus(cpu_set_t *set) {
  CPU_ZERO(set);
  if (sched_getaffinity(0, sizeof *set, set) != 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
  }
  int n = CPU_COUNT(set);
  return n > 0 ? n : 1;
}

static int read_int(const char *fmt, int cpu, int *out) {
  char path[128];
  snprintf(path, sizeof path, fmt, cpu);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int ok = fscanf(f, "%d", out) == 1;
  fclose(f);
  return ok ? 0 : -1;
}

int ct_cli_physical_cores(void) {
  cpu_set_t set;
  int n = allowed_cpus(&set), cores = 0;
  static int seen[CPU_SETSIZE][2];
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &set)) continue;
    int pkg, core;
    if (read_int("/sys/devices/system/cpu/cpu%d/topology/physical_package_id", c, &pkg) != 0 ||
        read_int("/sys/devices/system/cpu/cpu%d/topology/core_id", c, &core) != 0)
      return n;
    int dup = 0;
    for (int i = 0; i < cores && !dup; i++) dup = seen[i][0] == pkg && seen[i][1] == core;
    if (!dup) seen[cores][0] = pkg, seen[cores][1] = core, cores++;
  }
  return cores > 0 ? cores : n;
}

ct_status ct_cli_rank_device(const char *prog, const char *s, ct_device *out) {
  ct_clear_error();
  if (ct_dist_world_size() <= 1) return ct_cli_device(prog, s, out);
  int lr = ct_dist_local_rank(), ls = local_size();
  ct_device d;
  int by_rank = 0;
  if (strcmp(s, "auto") == 0) {
    d = ct_device_best(CT_BEST_MOST_FREE_MEMORY);
    by_rank = d.kind != CT_CPU;
  } else {
    ct_status st = ct_device_parse(s, &d);
    if (st != CT_OK) return st; /* the caller prints ct_last_error(), as for ct_cli_device */
    by_rank = d.kind != CT_CPU && !strchr(s, ':');
  }
  if (by_rank) {
    int count = ct_device_count(d.kind);
    d.index = lr;
    if (lr >= count) {
      char name[32];
      fprintf(stderr, "%s: local rank %d would use %s, but this machine has %d such device(s); start at most %d "
                      "rank(s) per machine, or train on the CPU with --device cpu\n",
              prog, lr, ct_device_str(d, name, sizeof name), count, count);
      return CT_EDEVICE;
    }
  }
  char name[32];
  ct_status st = ct_cli_device(prog, ct_device_str(d, name, sizeof name), out);
  if (st != CT_OK) return st;
  if (out->kind == CT_CPU && !getenv("OMP_NUM_THREADS")) {
    /* Bound to a core (mpirun's default for 2 ranks or fewer), a rank may use only that core;
     * unbound, it shares the machine's CPUs with the other local ranks. */
    cpu_set_t set;
    int mine = allowed_cpus(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int share = online > 0 ? (int)(online / ls) : 1, threads = mine < share ? mine : share;
    omp_set_num_threads(threads > 0 ? threads : 1);
  }
  return CT_OK;
}

#ifdef CUTTLE_WITH_MPI

/* The launcher's child (mpirun) and the first signal forwarded to it. */
static volatile sig_atomic_t child, forwarded;

static void forward(int sig) {
  if (!forwarded) forwarded = sig;
  if (child > 0) kill((pid_t)child, SIGUSR2);
}

/* mpirun's path: the first executable "mpirun" on PATH, into buf; 0 when found. */
static int find_mpirun(char *buf, size_t n) {
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *p = path; *p;) {
    const char *e = strchr(p, ':');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    int w = snprintf(buf, n, "%.*s/mpirun", (int)len, len ? p : ".");
    if (w > 0 && (size_t)w < n && access(buf, X_OK) == 0) return 0;
    p += len + (e != NULL);
  }
  return -1;
}

/* Does token t spell --nproc (or an abbreviation getopt_long accepts: --np, --npr, ...)? *inline_val
 * is 1 when it carries its value after '='. */
static int is_nproc(const char *t, int *inline_val) {
  const char *eq = strchr(t, '=');
  size_t len = eq ? (size_t)(eq - t) : strlen(t);
  *inline_val = eq != NULL;
  return len >= 4 && len <= 7 && strncmp(t, "--nproc", len) == 0;
}

/* mpirun's command line for `cuttle cmd argv[1..] --nproc nproc`: mpirun's options, then exe cmd and
 * the command's arguments without --nproc and its value (and without what follows "--"),
 * NULL-terminated. The strings are mpirun, np, exe, cmd and argv's own. NULL when out of memory. */
static char **mpirun_args(const char *cmd, int nproc, int argc, char **argv, char *mpirun, char *np, char *exe) {
  char **args = calloc((size_t)argc + 16, sizeof *args);
  if (!args) return NULL;
  int n = 0, cores = ct_cli_physical_cores();
  args[n++] = mpirun;
  if (geteuid() == 0) args[n++] = "--allow-run-as-root";
  if (nproc > cores) args[n++] = "--oversubscribe";
  args[n++] = "--bind-to", args[n++] = "none", args[n++] = "--stdin", args[n++] = "none";
  args[n++] = "-np", args[n++] = np, args[n++] = exe, args[n++] = (char *)cmd;
  for (int i = 1; i < argc; i++) {
    int inline_val;
    if (strcmp(argv[i], "--") == 0) break;
    if (is_nproc(argv[i], &inline_val)) {
      i += !inline_val;
      continue;
    }
    args[n++] = argv[i];
  }
  args[n] = NULL;
  return args;
}

/* Run args (mpirun's) in a child process of its own process group, forwarding this process's
 * SIGINT and SIGTERM to it (forward()), and wait for it. Returns 0 with its wait status in *st, or
 * 1 after saying why when it could not be started. */
static int run_mpirun(const char *cmd, char **args, int *st) {
  struct sigaction sa = {.sa_handler = forward, .sa_flags = SA_RESTART}, old_int, old_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  /* Held back until child is set, so a signal that comes now is forwarded once, to mpirun. */
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGINT), sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &old_mask);
  pid_t parent = getpid(), pid = fork();
  if (pid < 0) {
    fprintf(stderr, "cuttle %s --nproc: fork failed: %s\n", cmd, strerror(errno));
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return 1;
  }
  if (pid == 0) {
    /* Its own process group: a terminal's Ctrl-C goes to this launcher only, which forwards it. */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* the launcher killed (SIGKILL): mpirun ends the job */
    if (getppid() != parent) _exit(1);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGTERM, &dfl, NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    execv(args[0], args);
    fprintf(stderr, "cuttle %s --nproc: cannot run %s: %s\n", cmd, args[0], strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  child = pid;
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  *st = 0;
  while (waitpid(pid, st, 0) < 0 && errno == EINTR) {
  }
  child = 0;
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  return 0;
}

int ct_cli_launch(const char *cmd, int nproc, int argc, char **argv) {
  char mpirun[4096], exe[4096], np[16];
  if (find_mpirun(mpirun, sizeof mpirun) != 0) {
    fprintf(stderr, "cuttle %s --nproc: mpirun is not on PATH; apt-get install openmpi-bin (Open MPI's launcher)\n", cmd);
    return 1;
  }
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (k <= 0) {
    fprintf(stderr, "cuttle %s --nproc: cannot find this program's path (/proc/self/exe: %s)\n", cmd, strerror(errno));
    return 1;
  }
  exe[k] = 0;
  snprintf(np, sizeof np, "%d", nproc);
  char **args = mpirun_args(cmd, nproc, argc, argv, mpirun, np, exe);
  if (!args) {
    fprintf(stderr, "cuttle %s --nproc: out of memory\n", cmd);
    return 1;
  }
  fprintf(stderr, "cuttle: starting %d ranks:", nproc);
  for (int i = 0; args[i]; i++) fprintf(stderr, " %s", args[i]);
  fprintf(stderr, "\n");
  fflush(stderr);
  int st, failed = run_mpirun(cmd, args, &st);
  free(args);
  if (failed) return 1;
  /* the ranks stopped as asked: the status of the signal this process got */
  if (forwarded && WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM) return 128 + forwarded;
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

#else

int ct_cli_launch(const char *cmd, int nproc, int argc, char **argv) {
  (void)nproc, (void)argc, (void)argv;
  fprintf(stderr, "cuttle %s --nproc: this cuttle was built without MPI; apt-get install libopenmpi-dev openmpi-bin, "
                  "then rebuild (CMake finds Open MPI and builds the process group)\n", cmd);
  return 1;
}

#endif
