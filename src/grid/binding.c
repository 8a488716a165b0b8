/* binding.c -- the ranks' threads against their cores (binding.h). */
#include "binding.h"

#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"
#include "log.h"

/* What a rank tells the others of its node. */
struct on_node {
    struct cpu_mask cores;
    int threads;
};

/* What rank 0 learns of each rank. */
struct rank_use {
    int threads, cpus, cores;
    int node;                /* the world rank of its node's first rank */
    int node_ranks, node_threads, node_cores, node_capacity; /* its node: ranks, their threads, the cores they
                                                                 may use, the node's online cores */
    int crowded;             /* some core of the node has more threads than it can run */
    double cores_used;
    char cpu_list[40];       /* its CPUs, as a list */
    char host[40];
};

/* The node's online CPUs' cores. */
static int node_capacity(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    struct cpu_mask cpus, cores;
    memset(&cpus, 0, sizeof cpus);
    for (int c = 0; c < (n > 0 ? n : 1) && c < CPU_MASK_MAX; c++) cpu_mask_add(&cpus, c);
    cpu_cores_of(&cpus, &cores, NULL);
    return cpu_mask_count(&cores);
}

/* The node's ranks' cores and threads: this rank's share of its cores,
 * and the node's figures into u.  Collective over the node. */
static void share_node(struct rank_use *u, const struct on_node *mine, MPI_Comm node)
{
    int n;
    MPI_CHECK(MPI_Comm_size(node, &n));
    struct on_node *all = xcalloc((size_t)n, sizeof *all);
    MPI_CHECK(MPI_Allgather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE, node));
    /* each rank's threads spread evenly over its cores: the threads each core is asked to run */
    double *load = xcalloc(CPU_MASK_MAX, sizeof *load);
    struct cpu_mask used;
    memset(&used, 0, sizeof used);
    u->node_threads = 0;
    for (int j = 0; j < n; j++) {
        int k = cpu_mask_count(&all[j].cores);
        u->node_threads += all[j].threads;
        for (int c = 0; c < CPU_MASK_MAX && k > 0; c++)
            if (cpu_mask_has(&all[j].cores, c)) load[c] += (double)all[j].threads / k, cpu_mask_add(&used, c);
    }
    u->crowded = 0;
    u->cores_used = 0;
    for (int c = 0; c < CPU_MASK_MAX; c++) {
        if (load[c] > 1 + 1e-9) u->crowded = 1;
        if (cpu_mask_has(&mine->cores, c)) { /* this rank's part of core c */
            double want = (double)mine->threads / cpu_mask_count(&mine->cores);
            u->cores_used += load[c] > 1 ? want / load[c] : want;
        }
    }
    u->node_ranks = n;
    u->node_cores = cpu_mask_count(&used);
    u->node_capacity = node_capacity();
    free(load);
    free(all);
}

/* "ranks 0-3 (4 ranks on 2 nodes)" or "rank 5 (node h)" for the ranks where take[r]. */
static void who(const unsigned char *take, const struct rank_use *u, int world, char *out, size_t len)
{
    int n = 0, nodes = 0, first = -1;
    for (int r = 0; r < world; r++) {
        if (!take[r]) continue;
        if (first < 0) first = r;
        n++;
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = take[q] && u[q].node == u[r].node;
        nodes += !seen;
    }
    char list[160];
    range_list(take, world, list, sizeof list);
    if (n == 1)
        snprintf(out, len, "rank %s (on %s)", list, u[first].host);
    else
        snprintf(out, len, "ranks %s (%d ranks on %d node%s, %s first)", list, n, nodes, nodes == 1 ? "" : "s",
                 u[first].host);
}

/* What to launch with so that each rank of u's node gets t cores of its own. */
static void fix_for(const struct rank_use *u, int t, char *out, size_t len)
{
    if (u->node_ranks * t <= u->node_capacity)
        snprintf(out, len, "launch with `mpirun --map-by slot:PE=%d` (each rank bound to %d cores of its own; or "
                 "`--bind-to none`), or `srun --cpus-per-task=%d`", t, t, t);
    else
        snprintf(out, len, "the node has %d core%s for %d rank%s x %d threads: set train.threads = %d (or "
                 "OMP_NUM_THREADS), or run fewer ranks per node", u->node_capacity, u->node_capacity == 1 ? "" : "s",
                 u->node_ranks, u->node_ranks == 1 ? "" : "s", t,
                 u->node_capacity / u->node_ranks > 0 ? u->node_capacity / u->node_ranks : 1);
}

/* Rank 0's warning about other ranks (log_warn names the rank printing). */
static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "warning: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A rank's threads on fewer cores than threads: one warning per kind
 * (threads, cores, CPUs, node shape), naming the ranks. */
static void warn_ranks(const struct rank_use *u, int world, int *flagged)
{
    unsigned char *take = xcalloc((size_t)world, sizeof *take);
    for (int r = 0; r < world; r++) {
        const struct rank_use *a = &u[r];
        if (flagged[r] || a->threads <= a->cores) continue;
        int n = 0;
        for (int q = r; q < world; q++) {
            const struct rank_use *b = &u[q];
            take[q] = !flagged[q] && b->threads == a->threads && b->cores == a->cores && b->cpus == a->cpus &&
                      b->node_ranks == a->node_ranks && b->node_capacity == a->node_capacity;
            flagged[q] |= take[q];
            n += take[q];
        }
        char whom[320], fix[320], where[96];
        who(take, u, world, whom, sizeof whom);
        fix_for(a, a->threads, fix, sizeof fix);
        if (n > 1)
            snprintf(where, sizeof where, "rank %d's: %d hardware thread%s, CPU%s %s", r, a->cpus,
                     a->cpus == 1 ? "" : "s", a->cpus == 1 ? "" : "s", a->cpu_list);
        else
            snprintf(where, sizeof where, "%d hardware thread%s: CPU%s %s", a->cpus, a->cpus == 1 ? "" : "s",
                     a->cpus == 1 ? "" : "s", a->cpu_list);
        warn("%s: %d OpenMP threads%s on %d core%s (%s): the threads share %s and run about %.1fx slower; %s", whom,
             a->threads, n > 1 ? " each" : "", a->cores, a->cores == 1 ? "" : "s", where,
             a->cores == 1 ? "it" : "them", (double)a->threads / a->cores, fix);
        memset(take, 0, (size_t)world * sizeof *take);
    }
    free(take);
}

/* A node whose ranks together ask some core for more threads than it runs
 * (bindings that overlap, or more threads than the node has cores), where
 * no rank alone does: one warning per kind of node. */
static void warn_nodes(const struct rank_use *u, int world, const int *flagged)
{
    int *done = xcalloc((size_t)world, sizeof *done);
    unsigned char *take = xcalloc((size_t)world, sizeof *take);
    for (int r = 0; r < world; r++) {
        const struct rank_use *a = &u[r];
        int bad = a->crowded && !done[r];
        for (int q = 0; q < world && bad; q++) bad = !(flagged[q] && u[q].node == a->node);
        if (!bad) continue;
        for (int q = r; q < world; q++) {
            const struct rank_use *b = &u[q];
            take[q] = b->crowded && !done[q] && b->node_ranks == a->node_ranks &&
                      b->node_threads == a->node_threads && b->node_cores == a->node_cores &&
                      b->node_capacity == a->node_capacity;
            done[q] |= take[q];
        }
        char whom[320];
        who(take, u, world, whom, sizeof whom);
        if (a->node_threads <= a->node_capacity)
            warn("%s: %d OpenMP threads in all on %d of the node's %d cores: the ranks' bindings overlap, so threads "
                 "share cores (rank %d gets %.2f of a core for its %d); bind each rank to cores of its own: `mpirun "
                 "--map-by slot:PE=T` or `srun --cpus-per-task=T` (T threads a rank)", whom, a->node_threads,
                 a->node_cores, a->node_capacity, r, a->cores_used, a->threads);
        else
            warn("%s: %d OpenMP threads in all on a node of %d core%s: threads share cores (rank %d gets %.2f of a "
                 "core for its %d); run at most %d threads a node (fewer ranks per node, or train.threads)", whom,
                 a->node_threads, a->node_capacity, a->node_capacity == 1 ? "" : "s", r, a->cores_used, a->threads,
                 a->node_capacity);
        memset(take, 0, (size_t)world * sizeof *take);
    }
    free(take);
    free(done);
}

void binding_check(struct binding *b, const struct grid *g)
{
    struct cpu_mask cpus;
    struct on_node mine;
    cpu_usable(&cpus);
    cpu_cores_of(&cpus, &mine.cores, NULL);
    mine.threads = omp_get_max_threads();
    struct rank_use u;
    memset(&u, 0, sizeof u);
    u.threads = mine.threads;
    u.cpus = cpu_mask_count(&cpus);
    u.cores = cpu_mask_count(&mine.cores);
    cpu_mask_list(&cpus, u.cpu_list, sizeof u.cpu_list);
    int len = 0;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_CHECK(MPI_Get_processor_name(host, &len));
    snprintf(u.host, sizeof u.host, "%.39s", host);

    MPI_Comm node;
    MPI_CHECK(MPI_Comm_split_type(g->world_comm, MPI_COMM_TYPE_SHARED, g->rank, MPI_INFO_NULL, &node));
    int first = g->rank;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, node));
    u.node = first;
    share_node(&u, &mine, node);
    MPI_CHECK(MPI_Comm_free(&node));
    *b = (struct binding){u.threads, u.cpus, u.cores, u.cores_used};

    struct rank_use *all = g->rank == 0 ? xcalloc((size_t)g->world, sizeof *all) : NULL;
    MPI_CHECK(MPI_Gather(&u, (int)sizeof u, MPI_BYTE, all, (int)sizeof u, MPI_BYTE, 0, g->world_comm));
    if (g->rank != 0) return;
    int *flagged = xcalloc((size_t)g->world, sizeof *flagged);
    warn_ranks(all, g->world, flagged);
    warn_nodes(all, g->world, flagged);
    free(flagged);
    free(all);
}
