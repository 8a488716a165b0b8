/* runlock.c -- run_dir/triad.lock: one job per run directory. */
#include "runlock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static char held[4096];      /* the lock file this process created */
static atomic_int holding;   /* held names it: whoever takes it back unlinks it, once */

void runlock_release(void)
{
    if (atomic_exchange(&holding, 0)) unlink(held); /* (exit handlers, the watchdog, a signal: one of them) */
}

/* The holder's words, "host pid job start", from an existing lock. */
struct holder {
    char host[256], job[64];
    long pid;
    long long since;
};

static int read_holder(const char *path, struct holder *h)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = fscanf(f, "host %255s pid %ld job %63s since %lld", h->host, &h->pid, h->job, &h->since);
    fclose(f);
    return n == 4 ? 0 : -1;
}

/* Is pid a live triad on this host?  A zombie, or a pid taken since by
 * another program, is not. */
static int alive(long pid)
{
    if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH)) return 0;
    char path[64], buf[512] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1; /* (no /proc: trust kill) */
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')');
    if (!close || close[1] != ' ' || close[2] == 'Z' || close[2] == 'X') return 0;
    return strstr(buf, "triad") != NULL; /* the command name, in parentheses */
}

static int same_holder(const struct holder *a, const struct holder *b)
{
    return a->pid == b->pid && a->since == b->since && !strcmp(a->host, b->host) && !strcmp(a->job, b->job);
}

/* Remove the lock at path that was judged stale, holder h: 0, or -1 where
 * another job took it over first.  The lock is moved aside (atomically)
 * and looked at again: another job starting at the same moment may have
 * taken it over since it was read (removed h's and made its own), and then
 * what was moved aside is that job's lock, which is put back. */
static int remove_stale(const char *path, const struct holder *h)
{
    char aside[4096 + 32];
    snprintf(aside, sizeof aside, "%s.stale.%ld", path, (long)getpid());
    if (rename(path, aside) != 0) return errno == ENOENT ? 0 : -1; /* (gone already: try to make ours) */
    struct holder now;
    int same = read_holder(aside, &now) == 0 && same_holder(&now, h);
    if (!same && link(aside, path) != 0) {
        /* (a third job made one meanwhile: the one moved aside stays, named, for whoever looks) */
        return -1;
    }
    unlink(aside);
    return same ? 0 : -1;
}

int runlock_take(const char *run_dir, char *note, size_t notelen, char *err, size_t errlen)
{
    char path[4096], host[256] = "?";
    snprintf(path, sizeof path, "%s/triad.lock", run_dir);
    gethostname(host, sizeof host - 1);
    const char *job = getenv("SLURM_JOB_ID");
    note[0] = '\0';
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd >= 0) {
            char text[512];
            int n = snprintf(text, sizeof text, "host %s pid %ld job %s since %lld\n", host, (long)getpid(),
                             job && *job ? job : "-", (long long)time(NULL));
            int bad = write(fd, text, (size_t)n) != n || fsync(fd) != 0;
            int why = errno;
            bad |= close(fd) != 0;
            if (bad) {
                unlink(path);
                if (why == ENOSPC || why == EDQUOT) { /* reading needs no space: the first write will say */
                    snprintf(note, notelen, "cannot write %s (%s): running without the lock", path,
                             strerror(why));
                    return 0;
                }
                snprintf(err, errlen, "cannot write %s: %s", path, strerror(why));
                return -2;
            }
            snprintf(held, sizeof held, "%s", path);
            atomic_store(&holding, 1);
            atexit(runlock_release);
            return 0;
        }
        if (errno != EEXIST) {
            snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
            return -2;
        }
        struct holder h;
        if (read_holder(path, &h) != 0) { /* (being written this instant, or not ours: do not guess) */
            snprintf(err, errlen, "%s exists and does not say who holds it", path);
            return -1;
        }
        int here = !strcmp(h.host, host), gone = here && !alive(h.pid);
        for (int wait = 0; here && !gone && wait < 20; wait++) { /* (a killed job may take a moment to go) */
            struct timespec ts = {0, 100000000};
            nanosleep(&ts, NULL);
            gone = !alive(h.pid);
        }
        int requeued = job && *job && !strcmp(h.job, job);
        if (!gone && !requeued) {
            snprintf(err, errlen, "io.run_dir = '%s' is in use by another job: pid %ld on %s (Slurm job %s) since "
                     "%lld s ago (%s)", run_dir, h.pid, h.host, h.job, (long long)time(NULL) - h.since, path);
            return -1;
        }
        snprintf(note, notelen, "took over %s of %s (pid %ld on %s, Slurm job %s)", path,
                 gone ? "a process that is gone" : "this job before its requeue", h.pid, h.host, h.job);
        if (remove_stale(path, &h) != 0) break;
    }
    snprintf(err, errlen, "cannot take %s: another process took it meanwhile", path);
    return -1;
}
