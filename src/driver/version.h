/* version.h -- what this build is and what it runs on: the version, the git
 * commit, compiler and flags, the SIMD path and why, BLAS, MPI, HDF5, CUDA
 * (`triad --version`, and the start of every run's log). */
#ifndef TRIAD_VERSION_H
#define TRIAD_VERSION_H

#include <stdio.h>

/* "0.1.0 (commit 1a2b3c4)" */
const char *version_string(void);
/* The block of lines, each "name: value". */
void version_print(FILE *f);

#endif
