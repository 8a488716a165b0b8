/* runlock.h -- one job per run directory: run_dir/triad.lock names the job
 * that holds it (host, pid, Slurm job id, start time), whatever HDF5's own
 * file locking is set to (sites turn it off: HDF5_USE_FILE_LOCKING=FALSE).
 * Rank 0 only. */
#ifndef TRIAD_RUNLOCK_H
#define TRIAD_RUNLOCK_H

#include <stddef.h>

/* Take run_dir's lock.  A lock left by a process that is gone (same host, no
 * such pid; or the same Slurm job, requeued) is taken over, its holder named
 * in note.  Returns 0, -1 with err saying who holds it, or -2 where the
 * lock file cannot be made (err: why; the directory is not writable). */
int runlock_take(const char *run_dir, char *note, size_t notelen, char *err, size_t errlen);

/* Give it back (at exit; train_start.c also as MPI_Finalize starts). */
void runlock_release(void);

#endif
