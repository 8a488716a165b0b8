/* fault_path.h -- the fault shims' target: whether file descriptor fd is
 * open on a file whose path contains $TRIAD_FAULT_PATH (read through
 * /proc/self/fd).  Included by each shim, which is built on its own. */
#ifndef TRIAD_FAULT_PATH_H
#define TRIAD_FAULT_PATH_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fault_path(int fd)
{
    const char *want = getenv("TRIAD_FAULT_PATH");
    if (!want || !*want) return 0;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (len <= 0) return 0;
    path[len] = '\0';
    return strstr(path, want) != NULL;
}

#endif
