/* check.c -- the failure report behind CUDA_CHECK and CUBLAS_CHECK. */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>

#include "device_load.h"

static const struct device_host *host;

void cuda_set_host(const struct device_host *h) { host = h; }

void cuda_fail_at(const char *file, int line, const char *call, const char *name,
                  const char *text)
{
    char msg[2048];
    snprintf(msg, sizeof msg, "CUDA error: %s: %s: %s", call, name, text);
    if (host) host->fail(file, line, NULL, msg);
    fprintf(stderr, "CUDA error at %s:%d: %s: %s: %s\n", file, line, call, name, text);
    fflush(stderr);
    exit(1); /* (no host: a program of its own, not a rank of a job) */
}
