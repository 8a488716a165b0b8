/* mapguard.c -- see mapguard.h.  The table of guarded mappings is written
 * by the thread that maps (the data sources open on the main thread) and
 * read by the handler, which may run on any thread that touches a mapped
 * page; the message of each is composed when it is mapped, so that the
 * handler calls nothing but write, exit_abruptly's hook (an unlink) and
 * _exit. */
#define _GNU_SOURCE
#include "mapguard.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "exit_status.h"
#include "log.h"

enum { GUARDS = 256 };

static struct guard {
    _Atomic(uintptr_t) lo; /* 0: a free slot */
    uintptr_t hi;
    char msg[1024];
} guards[GUARDS];
static struct sigaction before; /* the SIGBUS handler there was */
static int installed;

static void on_sigbus(int sig, siginfo_t *info, void *ctx)
{
    uintptr_t at = (uintptr_t)info->si_addr;
    for (int i = 0; i < GUARDS && info->si_code == BUS_ADRERR; i++) { /* (a page the file no longer backs) */
        uintptr_t lo = atomic_load_explicit(&guards[i].lo, memory_order_acquire);
        if (lo && at >= lo && at < guards[i].hi) {
            ssize_t n = write(STDERR_FILENO, guards[i].msg, strlen(guards[i].msg));
            (void)n;
            exit_abruptly_run();
            _exit(EXIT_ERROR);
        }
    }
    /* not one of ours: as the handler before would have it */
    int info_style = (before.sa_flags & SA_SIGINFO) != 0;
    void (*plain)(int) = info_style ? (void (*)(int))(void *)before.sa_sigaction : before.sa_handler;
    if (plain == SIG_IGN && info->si_code <= 0) return; /* (sent, and ignored before) */
    if (plain == SIG_DFL || plain == SIG_IGN) { /* (a fault is never ignored: the default ends the process) */
        signal(SIGBUS, SIG_DFL);
        if (info->si_code <= 0) raise(sig); /* (sent, not a fault that happens again) */
        return;
    }
    if (before.sa_flags & SA_RESETHAND) signal(SIGBUS, SIG_DFL);
    if (info_style) before.sa_sigaction(sig, info, ctx);
    else before.sa_handler(sig);
}

void *mapguard_map(int fd, size_t len, const char *path)
{
    void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return NULL;
    int slot = -1;
    for (int i = 0; i < GUARDS && slot < 0; i++)
        if (!atomic_load_explicit(&guards[i].lo, memory_order_relaxed)) slot = i;
    if (slot < 0) return p; /* (more files than slots: the rest unguarded) */
    struct guard *g = &guards[slot];
    snprintf(g->msg, sizeof g->msg,
             "\nerror: rank %d: the file %s, mapped as it was opened (%zu bytes), lost bytes under the run (SIGBUS "
             "at a read): another program truncated or rewrote it, or its disk or mount failed\n"
             "  hint: leave the files a run reads as they are until it ends (write new data under new names); "
             "check the file system\n", log_rank(), path, len);
    g->hi = (uintptr_t)p + len;
    atomic_store_explicit(&g->lo, (uintptr_t)p, memory_order_release);
    if (!installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, &before) == 0) installed = 1;
    }
    return p;
}

void mapguard_unmap(void *p, size_t len)
{
    for (int i = 0; i < GUARDS; i++)
        if (atomic_load_explicit(&guards[i].lo, memory_order_relaxed) == (uintptr_t)p)
            atomic_store_explicit(&guards[i].lo, 0, memory_order_release);
    munmap(p, len);
}
