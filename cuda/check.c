/* check.c -- the failure report behind CUDA_CHECK and CUBLAS_CHECK. */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>

static int log_rank = -1;

void cuda_set_log_rank(int rank) { log_rank = rank; }

void cuda_fail_at(const char *file, int line, const char *call, const char *name,
                  const char *text)
{
    if (log_rank >= 0) fprintf(stderr, "[rank %d] ", log_rank);
    fprintf(stderr, "CUDA error at %s:%d: %s: %s: %s\n", file, line, call, name, text);
    fflush(stderr);
    exit(1);
}
