/* trace.c -- the timeline: events per rank, gathered to rank 0 and written
 * as Chrome-trace JSON (Perfetto, chrome://tracing): a process per rank, its
 * steps, forwards, backwards (B and W where split), pipeline sends and waits and the optimizer on
 * one thread, every communication call (communicator, operation, bytes) on
 * another. */
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
    t->ev[t->n++] = (struct trace_event){t0 - t->origin, t1 - t->origin, kind, mb, chunk, 0};
}

void trace_comm(struct trace *t, int g, int op, double bytes, double t0, double t1)
{
    if (!t) return;
    trace_add(t, TR_COMM, g, op, t0, t1);
    t->ev[t->n - 1].bytes = bytes;
}

void trace_free(struct trace *t)
{
    free(t->ev);
    memset(t, 0, sizeof *t);
}

static const char *trace_names[TR_COUNT] = {"F", "B", "W", "send", "recv wait (idle)", "optimizer", "step", "comm"};
static const char *const group_names[] = {"world", "tp", "dp", "pp", "embed", "cp"}; /* comm.h's order */
static const char *const op_names[] = {"all-reduce", "all-gather", "reduce-scatter", "send", "recv"};

/* One event as a Chrome-trace span on process (rank) r. */
static void write_event(FILE *f, const struct trace_event *e, int r)
{
    char name[64]; /* F3, B3, W3, F3c1 for chunk 1; step 7; tp all-reduce */
    const char *cat = trace_names[e->kind];
    if (e->kind == TR_STEP) snprintf(name, sizeof name, "step %d", e->mb);
    else if (e->kind == TR_COMM) {
        snprintf(name, sizeof name, "%s %s", group_names[e->mb], op_names[e->chunk]);
        fprintf(f, ",\n{\"name\": \"%s\", \"cat\": \"comm %s\", \"ph\": \"X\", \"pid\": %d, \"tid\": 1, "
                   "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"communicator\": \"%s\", \"op\": \"%s\", \"bytes\": %.0f}}",
                name, group_names[e->mb], r, 1e6 * e->t0, 1e6 * (e->t1 - e->t0), group_names[e->mb], op_names[e->chunk],
                e->bytes);
        return;
    } else if (e->kind > TR_WGRAD) snprintf(name, sizeof name, "%s", cat);
    else if (e->chunk > 0) snprintf(name, sizeof name, "%s%dc%d", cat, e->mb, e->chunk);
    else snprintf(name, sizeof name, "%s%d", cat, e->mb);
    fprintf(f, ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": 0, \"ts\": %.3f, "
               "\"dur\": %.3f, \"args\": {\"mb\": %d, \"chunk\": %d}}",
            name, cat, r, 1e6 * e->t0, 1e6 * (e->t1 - e->t0), e->mb, e->chunk);
}

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
            for (int r = 0; r < n; r++) { /* a process per rank: compute on thread 0, communication on 1 */
                fprintf(f, "%s{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}},\n"
                           "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"sort_index\": %d}},\n"
                           "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"compute\"}},\n"
                           "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 1, "
                           "\"args\": {\"name\": \"communication\"}}",
                        r ? ",\n" : "", r, r, r, r, r, r);
                const struct trace_event *ev = (const struct trace_event *)(all + displs[r]);
                for (size_t i = 0; i < (size_t)counts[r] / sizeof *ev; i++) write_event(f, &ev[i], r);
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
