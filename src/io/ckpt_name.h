/* ckpt_name.h -- a checkpoint's file name, ckpt_<step>.h5, and why a file
 * given as a checkpoint did not open: what a user is told instead of
 * HDF5's "unable to open file" (docs/formats.md). */
#ifndef TRIAD_CKPT_NAME_H
#define TRIAD_CKPT_NAME_H

#include <stddef.h>
#include <stdint.h>

/* The step of a checkpoint's file name, ckpt_<step>.h5: 0, or -1 if it is not one. */
int ckpt_step_of(const char *name, int64_t *step);
/* Why checkpoint path did not open (after a failed H5Fopen): -1 with err
 * saying so, and for a missing file which checkpoints its directory holds
 * instead (io.keep_checkpoints removes the older ones). */
int ckpt_open_failed(const char *path, char *err, size_t errlen);

#endif
