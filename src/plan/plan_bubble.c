/* plan_bubble.c -- the pipeline bubble of a run and of the schedules it
 * could run instead: each simulated (pipeline.c) with F, B and W weighted
 * by their FLOPs (model_action_flops), each alternative re-planned for its
 * memory, and the advice to take a zero-bubble schedule when the bubble is
 * what costs. */
#include <math.h>
#include <stdlib.h>

#include "log.h"
#include "metrics.h"
#include "model.h"
#include "plan.h"
#include "plan_internal.h"

double plan_sim_bubble(enum pp_schedule s, const char *file, int pp, int v, int m, const int t[3], const int *rank_t,
                       double *idle)
{
    struct pp_sim_opts o = {.t_fwd = t[0], .t_bwd = t[1], .send = PP_SEND_RENDEZVOUS, .lookahead = 1, .t_wgt = t[2],
                            .rank_t = rank_t};
    struct pp_sim sim;
    char err[512];
    if (pp_simulate_schedule(s, file, pp, v, m, &o, &sim, err, sizeof err) != 0) return -1;
    double b = pp_bubble(&sim, NULL, NULL);
    for (int r = 0; idle && r < pp; r++) idle[r] = sim.makespan ? (double)pp_idle(&sim, r) / (double)sim.makespan : 0;
    pp_sim_free(&sim);
    return b;
}

void plan_flop_costs(const struct model_dims *d, int B, int t[3])
{
    double f[3], unit[3];
    struct model_dims plain = *d; /* the unit: a chunk of layers alone */
    plain.pp_rank = plain.pp > 2 ? 1 : 0;
    plain.vshape = 0;
    if (plain.pp == 2) plain.pp = 3; /* (a middle stage: neither end) */
    model_action_flops(&plain, B, unit);
    model_action_flops(d, B, f);
    for (int i = 0; i < 3; i++) {
        t[i] = unit[0] > 0 ? (int)lround(PLAN_COST_UNITS * f[i] / unit[0]) : PLAN_COST_UNITS;
        if (t[i] < 1) t[i] = 1;
    }
}

/* The schedules worth comparing, with the chunks each runs. */
static const struct {
    const char *name;
    enum pp_schedule sched;
    int v;
} alternatives[] = {{"1f1b", PP_1F1B, 1},   {"interleaved", PP_INTERLEAVED, 2}, {"zb-h1", PP_ZBH1, 1},
                    {"zb-h2", PP_ZBH2, 1}, {"zbv", PP_ZBV, 2}};
enum { NALT = sizeof alternatives / sizeof alternatives[0] };

struct alt {
    int ok, mine;
    double bubble;
    size_t peak, acts;
};

/* Schedule i on the deck's grid re-planned: its bubble, peak and stage 0's activations. */
static void replan(struct alt *a, const struct plan *p, const struct config *cfg, int i)
{
    struct config c = *cfg;
    struct deck_error e;
    char assign[96], err[256];
    snprintf(assign, sizeof assign, "parallel.schedule='%s'", alternatives[i].name);
    a->ok = config_override(&c, assign, &e) == 0;
    c.parallel.virtual_stages = alternatives[i].v;
    snprintf(c.parallel.schedule_file, sizeof c.parallel.schedule_file, "%s", "");
    struct plan q;
    if (!a->ok || plan_validate(&c, p->shape.world, &e) != 0 ||
        plan_compute(&q, &c, p->shape.world, p->threads, err, sizeof err) != 0) {
        a->ok = 0;
        return;
    }
    a->bubble = plan_sim_bubble(alternatives[i].sched, NULL, q.shape.pp, q.shape.v, q.shape.n_micro, q.cost, q.rank_cost,
                                NULL);
    a->ok = a->bubble >= 0;
    a->peak = q.peak;
    a->acts = q.stage[0].bytes[PM_ACTS];
    plan_free(&q);
}

void plan_print_bubble(FILE *f, const struct plan *p, const struct config *cfg, double avail)
{
    if (p->shape.pp < 2) return;
    struct alt a[NALT];
    int mine = -1;
    for (int i = 0; i < NALT; i++) {
        replan(&a[i], p, cfg, i);
        a[i].mine = alternatives[i].sched == p->shape.sched && alternatives[i].v == p->shape.v;
        if (a[i].mine) mine = i;
    }
    fprintf(f, "\npipeline schedules on this grid (each deck re-planned; bubble simulated with each stage's F, B and W "
               "by FLOPs):\n");
    fprintf(f, "  %-13s %6s %8s %16s %10s\n", "schedule", "chunks", "bubble", "activations (0)", "peak");
    char h1[32], h2[32];
    for (int i = 0; i < NALT; i++) {
        if (!a[i].ok) continue;
        plan_human(h1, sizeof h1, (double)a[i].acts);
        plan_human(h2, sizeof h2, (double)a[i].peak);
        fprintf(f, "  %-13s %6d %7.1f%% %16s %10s%s%s\n", alternatives[i].name, alternatives[i].v, 100 * a[i].bubble, h1,
                h2, a[i].mine ? "  (this deck)" : "", avail > 0 && a[i].peak > avail ? "  does not fit" : "");
    }
    /* the advice: the zero-bubble schedule that takes the bubble down most, within the memory */
    double now = p->bubble;
    size_t limit = avail > 0 ? (size_t)avail : p->peak + p->peak / 20; /* unknown memory: at most 5 % more */
    int best = -1;
    for (int i = 0; i < NALT; i++)
        if (a[i].ok && !a[i].mine && alternatives[i].sched >= PP_ZBH1 && a[i].peak <= limit &&
            (best < 0 || a[i].bubble < a[best].bubble))
            best = i;
    if (now >= PLAN_BUBBLE_ADVICE && best >= 0 && a[best].bubble < now / 2) {
        plan_human(h2, sizeof h2, (double)a[best].peak);
        fprintf(f, "advice: the bubble costs %.1f%% of the pipeline's time; schedule = '%s'%s takes it to %.1f%% "
                   "(peak %s%s)\n", 100 * now, alternatives[best].name,
                alternatives[best].v > 1 ? ", virtual_stages = 2" : "", 100 * a[best].bubble, h2,
                avail > 0 ? ", fits" : mine >= 0 && a[best].peak <= a[mine].peak ? ", no more than now" : "");
    }
}

/* "with ...: bubble 4.2 %, idle per rank 1.0/7.4" for costs t (or each rank's, rank_t) on p's shape. */
static void print_costs_bubble(FILE *f, const struct plan *p, const char *with, const int t[3], const int *rank_t)
{
    double *idle = xcalloc((size_t)p->shape.pp, sizeof *idle);
    double b = plan_sim_bubble(p->shape.sched, p->shape.schedule_file, p->shape.pp, p->shape.v, p->shape.n_micro, t,
                               rank_t, idle);
    fprintf(f, "%s: bubble %.1f %%, idle per rank ", with, 100 * b);
    for (int r = 0; r < p->shape.pp; r++) fprintf(f, "%s%.1f", r ? "/" : "", 100 * idle[r]);
    fputc('\n', f);
    free(idle);
}

/* A finished run's F, B and W per stage (ms a chunk and micro-batch: the
 * mean of the stage's ranks) into ms[3 pp]; a run whose backwards were
 * whole has them split as the FLOPs split them (*whole set).  0, or -1
 * when io.run_dir holds no finished run of this grid. */
static int measured_costs(const struct plan *p, const struct config *cfg, double *ms, int64_t *steps, int *whole)
{
    int world = p->shape.world, per = world / p->shape.pp; /* ranks per stage (the pipeline rank varies slowest) */
    double *sec = xcalloc(3 * (size_t)world, sizeof *sec);
    int rc = metrics_read_timers(cfg->io.run_dir, world, sec, steps);
    double n = (double)*steps * p->shape.n_micro * p->shape.v, wsum = 0;
    for (int r = 0; rc == 0 && r < p->shape.pp; r++)
        for (int i = 0; i < 3; i++) {
            double x = 0;
            for (int k = 0; k < per; k++) x += sec[3 * (r * per + k) + i];
            ms[3 * r + i] = 1e3 * x / per / n;
            wsum += i == 2 ? x : 0;
        }
    *whole = wsum <= 0;
    for (int r = 0; rc == 0 && *whole && r < p->shape.pp; r++) {
        double b = ms[3 * r + 1] * p->cost[1] / (double)(p->cost[1] + p->cost[2]);
        ms[3 * r + 2] = ms[3 * r + 1] - b, ms[3 * r + 1] = b;
    }
    free(sec);
    return rc;
}

void plan_print_schedule_costs(FILE *f, const struct config *cfg, int world)
{
    struct plan p;
    char err[256];
    if (plan_compute(&p, cfg, world, 0, err, sizeof err) != 0) {
        fprintf(f, "(no plan for the costs: %s)\n", err);
        return;
    }
    if (p.shape.pp < 2) {
        plan_free(&p);
        return;
    }
    fprintf(f, "\nF:B:W by the kernels' FLOPs (B with the attention backward%s), each stage's:",
            cfg->train.recompute_id == TRAIN_RECOMPUTE_full ? " and the recomputation" : "");
    for (int r = 0; r < p.shape.pp; r++)
        fprintf(f, "%s %d:%d:%d", r ? "," : "", p.rank_cost[3 * r], p.rank_cost[3 * r + 1], p.rank_cost[3 * r + 2]);
    fputc('\n', f);
    print_costs_bubble(f, &p, "with them", p.cost, p.rank_cost);
    int pp = p.shape.pp, whole, *t = xcalloc(3 * (size_t)pp, sizeof *t);
    double *ms = xcalloc(3 * (size_t)pp, sizeof *ms);
    int64_t steps = 0;
    if (measured_costs(&p, cfg, ms, &steps, &whole) == 0) {
        fprintf(f, "measured by the run in %s (metrics.h5, %lld steps), a chunk and micro-batch%s:\n", cfg->io.run_dir,
                (long long)steps, whole ? " (its backwards whole: split into B and W as the FLOPs split them)" : "");
        for (int r = 0; r < pp; r++) {
            fprintf(f, "  rank %d: F %.3f ms, B %.3f ms, W %.3f ms\n", r, ms[3 * r], ms[3 * r + 1], ms[3 * r + 2]);
            for (int i = 0; i < 3; i++) t[3 * r + i] = ms[3 * r + i] >= 1e-3 ? (int)lround(ms[3 * r + i] * 1e3) : 1;
        }
        print_costs_bubble(f, &p, "with the run's costs", t, t); /* (in microseconds) */
    }
    free(ms);
    free(t);
    plan_free(&p);
}
