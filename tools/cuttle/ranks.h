/* tools/cuttle/ranks.h: `cuttle train` over several processes (issue 10): starting them
 * (--nproc, which runs mpirun as torchrun --nproc_per_node starts its workers), and what each rank
 * does first: join the process group, pick its device from its local rank, share the CPU's cores
 * with the other ranks of its machine, and leave at once when a collective fails. */
#ifndef CUTTLE_RANKS_H
#define CUTTLE_RANKS_H

#include "cuttle.h"

/* 1 when a launcher started this process as one rank of a job: mpirun (Open MPI sets
 * OMPI_COMM_WORLD_SIZE) or a PMI launcher (PMI_SIZE: srun, MPICH's hydra); else 0. */
int ct_cli_under_launcher(void);

/* Join the process group (ct_dist_init) with every collective bounded by timeout seconds
 * (ct_dist_set_timeout). Returns 0, or 1 after printing why, prefixed with prog. */
int ct_cli_rank_init(const char *prog, double timeout);

/* "cuttle" in one process, "cuttle (rank R/N)" in a job: the prefix of a rank's messages. */
const char *ct_cli_rank_prog(void);

/* The device of this rank for a --device argument. One process: as ct_cli_device. In a job of
 * several ranks: "auto" and a kind without an index ("cuda", "gpu", "opencl") give that kind's
 * device number local_rank (auto takes the kind ct_device_best picks, else the CPU), an error when
 * the machine has fewer devices of the kind than ranks; "kind:N" is taken as given; and on the CPU
 * the rank runs max(1, min(its allowed CPUs, online CPUs / ranks on this machine)) OpenMP threads
 * unless OMP_NUM_THREADS says otherwise. Returns CT_OK or a status: as ct_cli_device, a malformed
 * name leaves the reason in ct_last_error() unprinted, anything else is printed. */
ct_status ct_cli_rank_device(const char *prog, const char *s, ct_device *out);

/* The CPU cores (not hardware threads) this process may run on, as Open MPI counts its slots:
 * distinct (package, core) pairs of the allowed CPUs, read from sysfs; the allowed CPUs where
 * sysfs does not say. */
int ct_cli_physical_cores(void);

/* `cuttle <cmd> ... --nproc N`: run `mpirun -np N <this cuttle> <cmd> <argv without --nproc>` on
 * this machine and return its exit status. argv is the command's own argv as main received it
 * (argv[0] the command's name), before getopt permuted it. mpirun gets --allow-run-as-root when
 * the effective user is root, --oversubscribe when N exceeds the physical cores, --bind-to none
 * (each rank sizes its own thread pool), and --stdin none; it runs in its own process group, so a
 * terminal's Ctrl-C reaches only this process, which forwards SIGINT and SIGTERM to mpirun as
 * SIGUSR2, a signal mpirun passes on to every rank at once (the ranks take it as SIGTERM; mpirun's
 * own SIGINT or SIGTERM would kill the ranks a second or two later), and returns 130 or 143 when
 * the ranks stopped so. Built without MPI, it says what to install and returns 1. */
int ct_cli_launch(const char *cmd, int nproc, int argc, char **argv);

/* Leave at once after a failure that the other ranks cannot follow (a collective that failed or
 * timed out, a step that failed on this rank only): prints "prog: what: ct_last_error()" (unless
 * what is NULL: the failure was printed already) and ends
 * the job with status 1 through ct_dist_abort (MPI_Abort: mpirun ends the other ranks, a stuck one
 * included), never through MPI_Finalize, whose barrier would wait on the lost rank. No checkpoint
 * is attempted: it could be a partial step's, and rank 0 may be the one lost. */
_Noreturn void ct_cli_rank_abort(const char *what);

#endif
