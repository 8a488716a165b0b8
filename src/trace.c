/* trace.c -- the timeline: events per rank, gathered to rank 0 and written
 * as Chrome-trace JSON (Perfetto, chrome://tracing). */
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

void trace_init(struct trace *t)
{
    memset(t, 0, sizeof *t);
    t->origin = MPI_Wtime();
}

void trace_add(struct trace *t, enum trace_kind kind, int mb, int chunk, double t0, double t1)
{
    if (!t) return;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        struct trace_event *ev = realloc(t->ev, t->cap * sizeof *ev);
        if (!ev) die("out of memory growing the trace to %zu events", t->cap);
        t->ev = ev;
    }
    t->ev[t->n++] = (struct trace_event){t0 - t->origin, t1 - t->origin, kind, mb, chunk};
}

void trace_free(struct trace *t)
{
    free(t->ev);
    memset(t, 0, sizeof *t);
}

static const char *trace_names[TR_COUNT] = {"F", "B", "send", "recv wait (idle)", "optimizer"};

int trace_write(const struct trace *t, MPI_Comm world, const char *path, char *err, size_t errlen)
{
    int rank, n;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Comm_size(world, &n));
    int mine = (int)(t->n * sizeof(struct trace_event)), *counts = NULL, *displs = NULL;
    if (rank == 0) {
        counts = xmalloc((size_t)n * sizeof *counts);
        displs = xmalloc((size_t)n * sizeof *displs);
    }
    MPI_CHECK(MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, world));
    char *all = NULL;
    if (rank == 0) {
        size_t total = 0;
        for (int r = 0; r < n; r++) {
            displs[r] = (int)total;
            total += (size_t)counts[r];
        }
        all = xmalloc(total ? total : 1);
    }
    MPI_CHECK(MPI_Gatherv(t->ev, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, world));
    int rc = 0;
    if (rank == 0) {
        FILE *f = fopen(path, "w");
        if (!f) {
            snprintf(err, errlen, "cannot write %s", path);
            rc = -1;
        } else {
            fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
            int first = 1;
            for (int r = 0; r < n; r++) {
                fprintf(f, "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
                           "\"args\": {\"name\": \"rank %d\"}}", first ? "" : ",\n", r, r);
                first = 0;
                const struct trace_event *ev = (const struct trace_event *)(all + displs[r]);
                for (size_t i = 0; i < (size_t)counts[r] / sizeof *ev; i++) {
                    char name[48]; /* F3, B3, F3c1 for chunk 1 */
                    if (ev[i].kind > TR_BACKWARD) snprintf(name, sizeof name, "%s", trace_names[ev[i].kind]);
                    else if (ev[i].chunk > 0)
                        snprintf(name, sizeof name, "%s%dc%d", trace_names[ev[i].kind], ev[i].mb, ev[i].chunk);
                    else snprintf(name, sizeof name, "%s%d", trace_names[ev[i].kind], ev[i].mb);
                    fprintf(f, ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 0, \"tid\": %d, "
                               "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"mb\": %d, \"chunk\": %d}}",
                            name, trace_names[ev[i].kind], r, 1e6 * ev[i].t0, 1e6 * (ev[i].t1 - ev[i].t0),
                            ev[i].mb, ev[i].chunk);
                }
            }
            fprintf(f, "\n]}\n");
            if (fclose(f) != 0) {
                snprintf(err, errlen, "writing %s failed", path);
                rc = -1;
            }
        }
        free(all);
        free(counts);
        free(displs);
    }
    MPI_CHECK(MPI_Bcast(&rc, 1, MPI_INT, 0, world));
    return rc;
}
