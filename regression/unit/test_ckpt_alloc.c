/* test_ckpt_alloc.c -- a checkpoint written and read on 2 ranks (dp = 2)
 * while memory runs out on one of them: each allocation of triad's own code
 * on that rank (alloc_sweep.h, counting the program's own code only), one
 * at a time, refused, the other rank's granted.  Every rank must end each
 * run with the reference's result or the error of the rank that ran out,
 * which says so; none may wait in a collective the other left (an alarm
 * ends a run that hangs, and with it the test), and the ranks must agree
 * whether it failed.  The model is the fuzzing harness's tiny LLaMA
 * (regression/fuzz/corpus), its weights from the seeds' checkpoint; the run
 * directory holds a tokenizer, which the checkpoint stores and its
 * read-back verifies.  The checkpoint is written by ckpt_save and by the
 * background writer (ckpt_async), each read back. */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc_sweep.h"
#include "ckpt.h"
#include "ckpt_async.h"
#include "config.h"
#include "device.h"
#include "file.h"
#include "hash.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "shape.h"
#include "topo.h"

enum { RUN_SECONDS = 60 }; /* a run that takes longer waits on a rank that left: the alarm ends the test */

struct job {
    struct grid g;
    struct model m, back;
    struct optim o;
    struct ckpt_async async;
    char dir[4200], *deck;
    const char *corpus;
    uint64_t fnv; /* the model's parameters */
};

/* FNV-1a over the model's parameters' bytes. */
static uint64_t params_fnv(const struct model *m) { return fnv1a(FNV1A_INIT, m->params_mem, m->flat * sizeof(float)); }

/* A write that failed must leave no temporary file behind (rank 0 looks,
 * and removes one it finds, saying so). */
static void no_tmp_left(const struct job *j, struct sweep_outcome *o)
{
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s/ckpt_1.h5.tmp", j->dir);
    if (j->g.rank == 0 && access(tmp, F_OK) == 0)
        snprintf(o->err, sizeof o->err, "a failed checkpoint left %.900s", tmp), unlink(tmp);
}

/* Writes the checkpoint of st into the job's run directory: 0, or -1 with
 * o->err. */
typedef int (*ckpt_writer)(struct job *j, const struct ckpt_state *st, struct sweep_outcome *o);

static int write_sync(struct job *j, const struct ckpt_state *st, struct sweep_outcome *o)
{
    return ckpt_save(j->dir, st, &j->m, &j->o, j->deck, &j->g, 2, o->err, sizeof o->err);
}

/* The background writer (io.async_checkpoint): begun, waited for and
 * sealed.  The snapshot is the job's, allocated before the sweep as a run
 * allocates it before training. */
static int write_async(struct job *j, const struct ckpt_state *st, struct sweep_outcome *o)
{
    if (ckpt_async_begin(&j->async, j->dir, st, &j->m, &j->o, j->deck, &j->g, 0, o->err, sizeof o->err) != 0)
        return -1;
    return ckpt_async_end(&j->async, j->dir, &j->m, &j->o, &j->g, 2, o->err, sizeof o->err);
}

/* A checkpoint of step 1 written by `write` into the job's run directory
 * (rank 0 empties it first), then read back into a second model. */
static void write_and_read_back(struct job *j, ckpt_writer write, const char *what, struct sweep_outcome *o)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/ckpt_1.h5", j->dir);
    if (j->g.rank == 0) unlink(path), snprintf(path, sizeof path, "%s/checkpoints.txt", j->dir), unlink(path);
    MPI_Barrier(MPI_COMM_WORLD);
    struct ckpt_state st = {.step = 1, .tokens = 32, .updates = 1};
    if (write(j, &st, o) != 0) {
        no_tmp_left(j, o);
        return;
    }
    snprintf(path, sizeof path, "%s/ckpt_1.h5", j->dir);
    memset(j->back.params_mem, 0, j->back.flat * sizeof(float));
    size_t on = 0;
    if (ckpt_load_model(path, &j->back, &j->g, o->err, sizeof o->err) != 0) return;
    if (params_fnv(&j->back) != j->fnv)
        snprintf(o->err, sizeof o->err, "the checkpoint written reads back as other parameters");
    else if (sweep_printf(o, &on, "%s, read back", what))
        free(o->text), o->text = NULL;
}

static void save_run(void *ctx, struct sweep_outcome *o) { write_and_read_back(ctx, write_sync, "saved", o); }
static void async_run(void *ctx, struct sweep_outcome *o)
{
    write_and_read_back(ctx, write_async, "saved in the background", o);
}

/* The background writer's start-up (its list and snapshot), agreed as a
 * run agrees on it before training. */
static void async_init_run(void *ctx, struct sweep_outcome *o)
{
    struct job *j = ctx;
    struct ckpt_async a = {0};
    int rc = ckpt_async_init(&a, &j->m, &j->o, &j->g, o->err, sizeof o->err);
    size_t on = 0, floats = a.snap_floats;
    ckpt_async_free(&a);
    if (mpi_agree_error(MPI_COMM_WORLD, rc != 0, o->err, sizeof o->err) == 0 &&
        sweep_printf(o, &on, "a snapshot of %zu floats", floats))
        free(o->text), o->text = NULL;
}

/* The seeds' checkpoint read as io.init_from reads it. */
static void load_run(void *ctx, struct sweep_outcome *o)
{
    struct job *j = ctx;
    char path[4400];
    snprintf(path, sizeof path, "%s/ckpt.h5", j->corpus);
    memset(j->back.params_mem, 0, j->back.flat * sizeof(float));
    size_t on = 0;
    if (ckpt_load_model(path, &j->back, &j->g, o->err, sizeof o->err) == 0 &&
        sweep_printf(o, &on, "read: FNV-1a %016llx", (unsigned long long)params_fnv(&j->back)))
        free(o->text), o->text = NULL;
}

#if ALLOC_SWEEP_WORKS
/* The sweep of work with the allocations of rank `victim` refused one at a
 * time; every rank runs each run (the runs are collective).  Rank 0 prints
 * the two TAP lines: the reference run, the sweep. */
static void sweep_ranks(const char *name, sweep_work work, void *ctx, int victim)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#ifdef _OPENMP
    omp_set_dynamic(0);
#endif
    struct sweep_outcome ref;
    alarm(RUN_SECONDS);
    sweep_run(work, ctx, 0, &ref);
    free(ref.text);
    sweep_run(work, ctx, 0, &ref);
    alarm(0);
    long total = sweep_counted;
    int good = ref.text && !sweep_nlive && !sweep_lost && !sweep_fds_left, all;
    MPI_Allreduce(&good, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    MPI_Bcast(&total, 1, MPI_LONG, victim, MPI_COMM_WORLD);
    if (rank == 0)
        tap_ok(all && total > 0, "%s, rank %d's allocations: the reference run (%ld allocations on rank %d)", name,
               victim, total, victim);
    if (!all || total == 0) {
        if (!good) tap_diag("rank %d: %s", rank, ref.err);
        free(ref.text);
        return;
    }
    /* runs that went on to other results, failed saying something else, left blocks or descriptors, did not
     * reach the allocation; ended differently on the two ranks */
    long bad[5] = {0, 0, 0, 0, 0}, sum[5];
    for (long k = 1; k <= total; k++) {
        struct sweep_outcome o;
        alarm(RUN_SECONDS);
        sweep_run(work, ctx, rank == victim ? k : 0, &o);
        alarm(0);
        int wrong = o.text && strcmp(o.text, ref.text) != 0, silent = !o.text && !sweep_says_memory(o.err);
        int left = sweep_nlive || sweep_lost || sweep_fds_left, went_on = o.text != NULL, lo, hi;
        MPI_Allreduce(&went_on, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&went_on, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if ((wrong || silent || left || lo != hi) && bad[0] + bad[1] + bad[2] + bad[4] < 3)
            tap_diag("rank %d, allocation %ld of rank %d refused: %s%s%s", rank, k, victim, o.text ? o.text : o.err,
                     left ? "; blocks or descriptors left" : "", lo != hi ? "; the other rank ended otherwise" : "");
        bad[0] += wrong, bad[1] += silent, bad[2] += left, bad[4] += lo != hi;
        bad[3] += rank == victim && !sweep_fired;
        free(o.text);
    }
    free(ref.text);
    MPI_Reduce(bad, sum, 5, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        tap_ok(sum[0] + sum[1] + sum[2] + sum[3] + sum[4] == 0,
               "%s, rank %d's %ld allocations refused in turn, the other rank's granted: %ld runs went on to other "
               "results, %ld failed saying something else, %ld left blocks or descriptors, %ld did not reach the "
               "allocation, %ld ended otherwise on the other rank", name, victim, total, sum[0], sum[1], sum[2],
               sum[3], sum[4] / 2);
}
#endif

/* The tiny LLaMA on this grid, with its optimizer, from the seeds' checkpoint;
 * a tokenizer in the run directory (rank 0). */
static int put_tokenizer(const struct job *j, char *why, size_t whylen)
{
    char from[4200], to[4300], *text;
    size_t len;
    snprintf(from, sizeof from, "%s/tokenizer_bytelevel.json", j->corpus);
    snprintf(to, sizeof to, "%s/tokenizer.json", j->dir);
    if (file_read_all(from, 1 << 24, "a tokenizer file", &text, &len, why, whylen)) return -1;
    FILE *f = fopen(to, "wb");
    int bad = !f || fwrite(text, 1, len, f) != len;
    if ((f && fclose(f) != 0) || bad) bad = 1, snprintf(why, whylen, "cannot write %.900s", to);
    free(text);
    return bad ? -1 : 0;
}

static int setup(struct job *j, const char *corpus, char *why, size_t whylen)
{
    char path[4200];
    size_t len;
    snprintf(path, sizeof path, "%s/llama.nml", corpus);
    if (file_read_all(path, 1 << 20, "a deck", &j->deck, &len, why, whylen)) return -1;
    struct config cfg;
    struct deck_error de;
    config_defaults(&cfg);
    if (config_read_string(&cfg, j->deck, path, &de)) return snprintf(why, whylen, "%s", de.what), -1;
    cfg.parallel.dp = 2;
    config_resolve(&cfg);
    struct run_shape s;
    run_shape_init(&s, &cfg, 2, 0);
    struct model_dims d;
    model_dims_init(&d, &cfg, &s, &j->g);
    model_init(&j->m, &d, &cpu_device, 1, (struct model_buffers){.slots = 1}, 0);
    model_init(&j->back, &d, &cpu_device, 1, (struct model_buffers){.slots = 1}, 0);
    optim_init(&j->o, &j->m, &cfg, &s);
    snprintf(path, sizeof path, "%s/ckpt.h5", corpus);
    if (ckpt_load_model(path, &j->m, &j->g, why, whylen)) return -1;
    j->fnv = params_fnv(&j->m);
    return ckpt_async_init(&j->async, &j->m, &j->o, &j->g, why, whylen);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) tap_ok(0, "run on 2 ranks (mpirun -n 2), not %d", size);
        MPI_Finalize();
        return 1;
    }
    const char *top = getenv("top_srcdir");
    static char corpus[4096];
    snprintf(corpus, sizeof corpus, "%s/regression/fuzz/corpus", top && *top ? top : ".");
    static struct job j;
    j.corpus = corpus;
    grid_init(&j.g, 1, 1, 2, 1, 1);
    char why[1024] = "";
    int ok = setup(&j, corpus, why, sizeof why) == 0, all;
    if (rank == 0) {
        tap_tmp_template(j.dir, sizeof j.dir, "ckpt_alloc");
        if (!mkdtemp(j.dir)) ok = 0, snprintf(why, sizeof why, "cannot make %.900s", j.dir);
        else if (ok && put_tokenizer(&j, why, sizeof why)) ok = 0;
    }
    MPI_Bcast(j.dir, sizeof j.dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!ALLOC_SWEEP_WORKS) {
        if (rank == 0) tap_skip("the allocations cannot be refused here (not glibc, or under AddressSanitizer)");
    } else if (!all) {
        if (rank == 0) tap_ok(0, "the model, its optimizer and a run directory (%s)", why);
    } else {
#if ALLOC_SWEEP_WORKS
        sweep_own_code = 1;
        for (int victim = 0; victim < 2; victim++) {
            sweep_ranks("a checkpoint written (ckpt_save) and read back", save_run, &j, victim);
            sweep_ranks("the background writer's start-up (ckpt_async_init)", async_init_run, &j, victim);
            sweep_ranks("a checkpoint written in the background (ckpt_async) and read back", async_run, &j,
                        victim);
            sweep_ranks("a checkpoint read as io.init_from reads it", load_run, &j, victim);
        }
#endif
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && j.dir[0]) {
        char cmd[4300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", j.dir);
        if (system(cmd) != 0) tap_diag("could not remove %s", j.dir);
    }
    int status = rank == 0 ? tap_done() : 0;
    MPI_Finalize();
    return status;
}
