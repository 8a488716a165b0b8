/* lineage.h -- the history of a run directory: the checkpoints its run
 * wrote, in the order written (run_dir/checkpoints.txt, rewritten
 * atomically), so that rotation and restart = 'auto' follow the run's own
 * lineage and not the step numbers of whatever files lie in the directory.
 * Rank 0 only: callers agree on the results. */
#ifndef TRIAD_LINEAGE_H
#define TRIAD_LINEAGE_H

#include <stddef.h>
#include <stdint.h>

#define LINEAGE_FILE "checkpoints.txt"
#define LINEAGE_MAX 4096

struct lineage {
    int n;                       /* entries, oldest first */
    int64_t step[LINEAGE_MAX];   /* the checkpoint run_dir/ckpt_<step>.h5 */
    int present;                 /* the manifest exists */
};

/* Read run_dir's manifest (absent: n = 0, present = 0).  0, or -1 with err
 * filled (unreadable or malformed: line named). */
int lineage_read(const char *run_dir, struct lineage *l, char *err, size_t errlen);

/* Write l as run_dir's manifest (temporary file, fsync, rename).  0 or -1 (err). */
int lineage_write(const char *run_dir, const struct lineage *l, char *err, size_t errlen);

/* The index of step in l, or -1. */
int lineage_find(const struct lineage *l, int64_t step);

/* Does run_dir hold a run's output (metrics.h5, checkpoints, a manifest that lists one)?
 * Names what it found in what (e.g. "metrics.h5 and 3 checkpoints"). */
int lineage_dir_in_use(const char *run_dir, char *what, size_t whatlen);

/* Move run_dir/name into the folder sub (a path; created), keeping its name.
 * 0 or -1 (err). */
int lineage_move_aside(const char *run_dir, const char *sub, const char *name, char *err, size_t errlen);

/* A fresh sub-folder name of run_dir: "<base>.1", "<base>.2", ... */
void lineage_fresh_dir(const char *run_dir, const char *base, char *out, size_t outlen);

/* Move every checkpoint run_dir/ckpt_<s>.h5 with s > step, listed in the
 * manifest or not, into a fresh run_dir/abandoned.N/ (named in sub; empty
 * where none was moved), oldest first, each logged.  The number moved, or
 * -1 (err). */
int lineage_move_later(const char *run_dir, int64_t step, char *sub, size_t sublen, char *err, size_t errlen);

/* Move every file of a run's output (metrics.h5, the manifest, checkpoints,
 * the trace, the copy of its tokenizer) into a fresh run_dir/superseded.N/,
 * named in sub.  0 or -1. */
int lineage_move_output(const char *run_dir, char *sub, size_t sublen, char *err, size_t errlen);

#endif
