/* plan_bubble.c -- the pipeline bubble of a run and of the schedules it
 * could run instead: each simulated (pipeline.c) with F, B and W weighted
 * by their FLOPs (model_action_flops), each alternative re-planned for its
 * memory, and the advice to take a zero-bubble schedule when the bubble is
 * what costs. */
#include <math.h>
#include <stdlib.h>

#include "log.h"
#include "model.h"
#include "plan.h"
#include "plan_internal.h"

double plan_sim_bubble(enum pp_schedule s, const char *file, int pp, int v, int m, const int t[3], double *idle)
{
    struct pp_sim_opts o = {.t_fwd = t[0], .t_bwd = t[1], .send = PP_SEND_RENDEZVOUS, .lookahead = 1, .t_wgt = t[2]};
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
    double f[3];
    model_action_flops(d, B, f);
    for (int i = 0; i < 3; i++) {
        t[i] = f[0] > 0 ? (int)lround(PLAN_COST_UNITS * f[i] / f[0]) : PLAN_COST_UNITS;
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
static void replan(struct alt *a, const struct plan *p, const struct config *cfg, int i, const int t[3])
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
    a->bubble = plan_sim_bubble(alternatives[i].sched, NULL, q.shape.pp, q.shape.v, q.shape.n_micro, t, NULL);
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
        replan(&a[i], p, cfg, i, p->cost);
        a[i].mine = alternatives[i].sched == p->shape.sched && alternatives[i].v == p->shape.v;
        if (a[i].mine) mine = i;
    }
    fprintf(f, "\npipeline schedules on this grid (each deck re-planned; bubble simulated with F:B:W = %d:%d:%d, "
               "by FLOPs):\n", p->cost[0], p->cost[1], p->cost[2]);
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
