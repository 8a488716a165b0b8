/* test_pipeline.c -- every schedule for pp <= 16, v <= 4, m <= 64 run through
 * the simulator: lists well formed, dependencies met, no deadlock with
 * buffered or rendezvous sends, peak in-flight as promised, bubble exactly
 * (p-1)/(v*m+p-1) for gpipe, 1f1b and interleaved and the least any
 * schedule can have for the zero-bubble ones; the simulator's own
 * refusals; the pictures; docs/pipeline.md's table of figures, which
 * `test_pipeline --table` prints. */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "tap.h"

#define PPMAX 16
#define VMAX 4
#define MMAX 64

enum { C_BUILD, C_LIST, C_ORDER, C_BUF, C_RDV, C_RDV_AHEAD, C_BUBBLE, C_PEAK, C_EVAL, NCHECK };
static const char *const check_name[NCHECK] = {
    "lists build",
    "each (mb, chunk) has one FWD and one BWD and exactly the sends and receives its virtual stage needs",
    "forwards and backwards of each chunk run in micro-batch order (same gradient sums in every schedule)",
    "deadlock-free, every dependency met, with buffered sends (F=1, B=2)",
    "deadlock-free, every dependency met, with rendezvous sends waited at the end of each phase (F=1, B=2)",
    "deadlock-free with rendezvous sends and receives posted one and two phases ahead",
    "makespan (v*m+p-1)(tF+tB), so each rank's bubble is exactly (p-1)/(v*m+p-1), at F:B = 1:2, 1:1, 2:3, 1:(1+1)",
    ("peak in-flight (mb, chunk) per rank equals pp_peak_bound (gpipe m; 1f1b min(pp-rank, m); interleaved "
     "min(2(pp-rank-1)+(v-1)pp+1, v*m))"),
    "the forwards alone (evaluation, pp_forward_only) deadlock-free with rendezvous sends, receives posted on entry",
};

/* The lists' forwards alone (pp_forward_only, as the held-out loss runs
 * them), simulated with rendezvous sends and no look-ahead: 0 with err on
 * a failure. */
static int forwards_run(struct pp_action **l, const int *n, enum pp_schedule s, int pp, int v, int m, char *err,
                        size_t len)
{
    struct pp_action *f[PPMAX];
    int nf[PPMAX], ok = 1;
    for (int r = 0; r < pp; r++) {
        f[r] = malloc(sizeof **f * (size_t)(n[r] ? n[r] : 1));
        if (!f[r]) return snprintf(err, len, "out of memory"), 0;
        memcpy(f[r], l[r], sizeof **f * (size_t)n[r]);
        nf[r] = pp_forward_only(f[r], n[r]);
    }
    struct pp_sim_opts o = {1, 1, PP_SEND_RENDEZVOUS, 0, pp_schedule_layout(s), 1, NULL};
    struct pp_sim sim;
    if (pp_simulate(pp, v, m, f, nf, &o, &sim, err, len)) ok = 0;
    else pp_sim_free(&sim);
    for (int r = 0; r < pp; r++) free(f[r]);
    return ok;
}

struct tally {
    int combos, fails[16]; /* (NCHECK here, NZCHECK for the zero-bubble sweep) */
    char first[16][400];
};

static void failed(struct tally *t, int c, enum pp_schedule s, int pp, int v, int m, const char *what)
{
    if (!t->fails[c]++)
        snprintf(t->first[c], sizeof t->first[c], "%s pp=%d v=%d m=%d: %.300s", pp_schedule_name(s), pp, v, m, what);
}

/* The list property checked without the simulator: per (mb, chunk) and kind,
 * how often it occurs must be 1 where the virtual stage needs it (the
 * layout of schedule s: pp_virtual_stage), else 0; a W once for the
 * zero-bubble schedules, never for the others. */
static int check_list(const struct pp_action *l, int n, enum pp_schedule s, int pp, int v, int m, int rank, char *why,
                      size_t len)
{
    static unsigned char seen[MMAX * VMAX][7];
    int zb = s == PP_ZBH1 || s == PP_ZBH2 || s == PP_ZBV;
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < n; i++) {
        if (l[i].mb < 0 || l[i].mb >= m || l[i].chunk < 0 || l[i].chunk >= v || (int)l[i].kind < 0 ||
            l[i].kind > PP_WGT) {
            snprintf(why, len, "rank %d action %d out of range", rank, i);
            return 0;
        }
        seen[l[i].mb * v + l[i].chunk][l[i].kind]++;
    }
    for (int q = 0; q < m * v; q++) {
        int st = pp_virtual_stage(s, pp, rank, q % v), first = st == 0, last = st == pp * v - 1;
        int want[7] = {!first, 1, !last, !last, 1, !first, zb};
        for (int k = 0; k < 7; k++)
            if (seen[q][k] != want[k]) {
                snprintf(why, len, "rank %d mb %d chunk %d: %s %d times, want %d", rank, q / v, q % v,
                         pp_kind_name((enum pp_kind)k), seen[q][k], want[k]);
                return 0;
            }
    }
    return 1;
}

/* Each chunk's forwards, backwards and W's in micro-batch order. */
static int in_order(const struct pp_action *l, int n)
{
    int next[3][VMAX] = {{0}};
    for (int i = 0; i < n; i++)
        if (l[i].kind == PP_FWD || l[i].kind == PP_BWD || l[i].kind == PP_WGT) {
            int *x = &next[l[i].kind == PP_FWD ? 0 : l[i].kind == PP_BWD ? 1 : 2][l[i].chunk];
            if (l[i].mb != (*x)++) return 0;
        }
    return 1;
}

/* Simulate under o; check completion, makespan and peaks.  Returns 0 on a
 * simulator error (err filled), else 1 with *bubble_ok / *peak_ok set. */
static int run(struct pp_action **l, int *n, enum pp_schedule s, int pp, int v, int m, struct pp_sim_opts o,
               int *bubble_ok, int *peak_ok, char *err, size_t len)
{
    struct pp_sim sim;
    if (pp_simulate(pp, v, m, l, n, &o, &sim, err, len)) return 0;
    long tau = o.t_fwd + o.t_bwd + o.t_wgt; /* (a fused backward takes t_bwd + t_wgt) */
    *bubble_ok = sim.makespan == ((long)v * m + pp - 1) * tau;
    *peak_ok = 1;
    for (int r = 0; r < pp; r++) {
        long fn, fd;
        pp_bubble_formula(pp, v, m, &fn, &fd);
        /* idle_r / makespan == (p-1) / (v m + p-1), in integers */
        *bubble_ok &= pp_idle(&sim, r) * fd == fn * sim.makespan && sim.busy[r] == (long)v * m * tau;
        int w = s == PP_GPIPE ? m : v == 1 ? pp - r : 2 * (pp - r - 1) + (v - 1) * pp + 1;
        int want = w < v * m ? w : v * m;
        *peak_ok &= sim.peak[r] == want && want == pp_peak_bound(s, NULL, pp, v, m, r);
    }
    pp_sim_free(&sim);
    return 1;
}

static void one_combo(struct tally *t, enum pp_schedule s, int pp, int v, int m)
{
    struct pp_action *l[PPMAX] = {0};
    int n[PPMAX] = {0}, ok = 1, bub = 1, peak = 1, b, p;
    char err[400];
    t->combos++;
    for (int r = 0; r < pp && ok; r++)
        if (pp_schedule_build(s, NULL, pp, v, m, r, &l[r], &n[r], err, sizeof err)) {
            failed(t, C_BUILD, s, pp, v, m, err);
            ok = 0;
        }
    for (int r = 0; r < pp && ok; r++) {
        if (!check_list(l[r], n[r], s, pp, v, m, r, err, sizeof err)) failed(t, C_LIST, s, pp, v, m, err);
        if (!in_order(l[r], n[r])) failed(t, C_ORDER, s, pp, v, m, "out of micro-batch order");
    }
    static const struct {
        int c, tf, tb, tw, send, ahead;
    } runs[] = {{C_BUF, 1, 2, 0, PP_SEND_BUFFERED, 0},       {C_RDV, 1, 2, 0, PP_SEND_RENDEZVOUS, 0},
                {C_RDV_AHEAD, 1, 2, 0, PP_SEND_RENDEZVOUS, 1}, {C_RDV_AHEAD, 1, 2, 0, PP_SEND_RENDEZVOUS, 2},
                {C_BUF, 1, 1, 0, PP_SEND_BUFFERED, 0},       {C_RDV, 2, 3, 0, PP_SEND_RENDEZVOUS, 0},
                {C_BUF, 1, 1, 1, PP_SEND_BUFFERED, 0}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0] && ok; k++) {
        struct pp_sim_opts o = {runs[k].tf, runs[k].tb, (enum pp_send_model)runs[k].send, runs[k].ahead,
                                .t_wgt = runs[k].tw};
        if (!run(l, n, s, pp, v, m, o, &b, &p, err, sizeof err)) {
            failed(t, runs[k].c, s, pp, v, m, err);
            continue;
        }
        bub &= b, peak &= p;
    }
    if (ok && !forwards_run(l, n, s, pp, v, m, err, sizeof err)) failed(t, C_EVAL, s, pp, v, m, err);
    if (ok && !bub) failed(t, C_BUBBLE, s, pp, v, m, "makespan or idle differ from the formula");
    if (ok && !peak) failed(t, C_PEAK, s, pp, v, m, "peak in-flight differs from the bound");
    for (int r = 0; r < pp; r++) free(l[r]);
}

static void sweep(enum pp_schedule s)
{
    struct tally t;
    memset(&t, 0, sizeof t);
    char err[400];
    for (int pp = 1; pp <= PPMAX; pp++)
        for (int v = 1; v <= VMAX; v++)
            for (int m = 1; m <= MMAX; m++)
                if (!pp_schedule_check(s, NULL, pp, v, m, err, sizeof err)) one_combo(&t, s, pp, v, m);
    for (int c = 0; c < NCHECK; c++) {
        tap_ok(t.fails[c] == 0, "%s, %d combinations: %s", pp_schedule_name(s), t.combos, check_name[c]);
        if (t.fails[c]) tap_diag("%d failures, first: %s", t.fails[c], t.first[c]);
    }
}

/* ------------------------------------------------------------ zero bubble */

enum { Z_BUILD, Z_LIST, Z_ORDER, Z_BUF, Z_RDV, Z_RDV_AHEAD, Z_LEAST, Z_H2, Z_1F1B, Z_PEAK, Z_WPEAK, Z_PHASE, Z_EVAL,
       NZCHECK };
static const char *const zcheck_name[NZCHECK] = {
    "lists build",
    "each (mb, chunk) has one F, one B and one W and exactly the sends and receives its stage needs (the V for zbv)",
    "each chunk's F's, B's and W's run in micro-batch order (the weight gradients add up as at pp = 1)",
    "deadlock-free, every dependency met, each W after its B, with buffered sends (F = B = W = 1)",
    ("deadlock-free with rendezvous sends waited at the end of each phase, receives posted on entering it: the "
     "same timeline as buffered sends, step for step (the messages placed where both ends meet)"),
    "deadlock-free with rendezvous sends and receives posted one and two phases ahead (the executor's look-ahead 1)",
    ("F = B = W: the makespan is 3vm + p-1, the least any schedule has (the last rank starts p-1 late), wherever "
     "pp_zb_bubble_formula says so (zb-h1, zb-h2: m >= p; zbv: m >= 2p-1), and the picture prints it then"),
    ("zb-h2 reaches the least makespan max((p-1)tF + m(tF+tB+tW), p tF + (p-1)tB + m(tB+tW)) at F:B:W = 1:2:1 "
     "(rendezvous, look-ahead 1), 2:3:2 and 2:2:1 (buffered) too, for m >= 2p-1 (zb-h1 loses (p-1)(tB-tW) there)"),
    "the bubble (F = B = W = 1) never exceeds 1F1B's (F = 1, fused B = 2) with the same pp and m",
    ("peak activation sets per rank = pp_peak_bound = zb-h1 min(p, m); zb-h2 2p-1 (m >= 2p-1, else zb-h1's); "
     "zbv min(2p, 2m, m+r+1)"),
    "peak pending W's per rank = pp_wpeak_bound = zb-h1 min(r+1, m); zb-h2 2r+1 (m >= 2p-1); zbv 2r+1 (m >= 2p-1)",
    ("what the executor can hold: at most 2 sends and 2 receives a phase, no gradient sent after its W, a message "
     "to the rank itself only at zbv's turn (rank p-1), its send and receive in one phase"),
    "the forwards alone (evaluation, pp_forward_only: no B, no W) deadlock-free with rendezvous sends",
};

static int min3(int a, int b, int c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

static int zb_peak(enum pp_schedule s, int pp, int m, int r)
{
    if (s == PP_ZBV) return min3(2 * pp, 2 * m, m + r + 1);
    if (s == PP_ZBH2 && m >= 2 * pp - 1) return 2 * pp - 1;
    return pp < m ? pp : m;
}

static int zb_wpeak(enum pp_schedule s, int pp, int m, int r)
{
    if (s == PP_ZBH1 || (s == PP_ZBH2 && m < 2 * pp - 1)) return r + 1 < m ? r + 1 : m;
    return m >= 2 * pp - 1 ? 2 * r + 1 : -1; /* (-1: counted along the list only) */
}

/* The least makespan of any v = 1 schedule: the last rank starts (p-1)tF
 * late; rank 0's first B waits for the forward through every stage and the
 * B's back. */
static long least_makespan(int pp, int m, int tf, int tb, int tw)
{
    long last = (long)(pp - 1) * tf + (long)m * (tf + tb + tw), first = (long)pp * tf + (long)(pp - 1) * tb +
                                                                      (long)m * (tb + tw);
    return last > first ? last : first;
}

/* The phases of rank r's list within the executor's limits (above)? */
static int phases_ok(const struct pp_action *l, int n, enum pp_schedule s, int pp, int r, char *why, size_t len)
{
    int sends = 0, recvs = 0, self = 0; /* self: sends to itself less receives from itself in this phase */
    static int wdone[MMAX * VMAX];
    memset(wdone, 0, sizeof wdone);
    for (int i = 0; i <= n; i++) {
        if (i == n || l[i].kind == PP_FWD || l[i].kind == PP_BWD || l[i].kind == PP_WGT) {
            if (sends > 2 || recvs > 2 || self) {
                snprintf(why, len, "rank %d before action %d: %d sends, %d receives%s", r, i, sends, recvs,
                         self ? ", a message to itself not sent and received in one phase" : "");
                return 0;
            }
            sends = recvs = self = 0;
            if (i < n && l[i].kind == PP_WGT) wdone[l[i].mb * 2 + l[i].chunk] = 1;
            continue;
        }
        int snd = l[i].kind == PP_SEND_ACT || l[i].kind == PP_SEND_GRAD;
        sends += snd, recvs += !snd;
        if (l[i].peer == r) {
            if (s != PP_ZBV || r != pp - 1) {
                snprintf(why, len, "rank %d action %d: a message to itself", r, i);
                return 0;
            }
            self += snd ? 1 : -1;
        }
        if (l[i].kind == PP_SEND_GRAD && wdone[l[i].mb * 2 + l[i].chunk]) {
            snprintf(why, len, "rank %d action %d: the gradient of mb %d sent after its W", r, i, l[i].mb);
            return 0;
        }
    }
    return 1;
}

/* One run of the zero-bubble lists: 0 with err on a simulator error. */
static int zb_run(struct pp_action **l, int *n, enum pp_schedule s, int pp, int m, int tf, int tb, int tw, int send,
                  int ahead, struct pp_sim *sim, char *err, size_t len)
{
    struct pp_sim_opts o = {tf, tb, (enum pp_send_model)send, ahead, pp_schedule_layout(s), tw, NULL};
    return pp_simulate(pp, s == PP_ZBV ? 2 : 1, m, l, n, &o, sim, err, len) == 0;
}

/* 1F1B's bubble with F = 1 and a fused B = 2, exactly: (p-1)/(m+p-1). */
static double bubble_1f1b(int pp, int m) { return (double)(pp - 1) / (double)(m + pp - 1); }

/* The worst zero-bubble / 1F1B bubble ratio seen for m >= pp, by schedule. */
static double worst_ratio[3][PPMAX + 1];

/* The figures of one run at F = B = W = 1 (buffered): makespan, bubble,
 * peaks against the bounds. */
static void zb_unit_checks(struct tally *t, struct pp_sim *sim, enum pp_schedule s, int pp, int m)
{
    int v = s == PP_ZBV ? 2 : 1;
    long num, den;
    struct pp_sim_opts unit = {1, 1, PP_SEND_BUFFERED, 0, pp_schedule_layout(s), 1, NULL};
    double b = pp_bubble(sim, NULL, NULL);
    if (pp_zb_bubble_formula(s, pp, m, &unit, &num, &den) == 0 && sim->makespan != 3L * v * m + pp - 1)
        failed(t, Z_LEAST, s, pp, v, m, "makespan above 3vm + p-1");
    if (b > bubble_1f1b(pp, m) + 1e-12) failed(t, Z_1F1B, s, pp, v, m, "bubble above 1F1B's");
    if (m >= pp && pp > 1 && b / bubble_1f1b(pp, m) > worst_ratio[s - PP_ZBH1][pp])
        worst_ratio[s - PP_ZBH1][pp] = b / bubble_1f1b(pp, m);
    for (int r = 0; r < pp; r++) {
        char why[160];
        int want = zb_peak(s, pp, m, r), wwant = zb_wpeak(s, pp, m, r);
        if (sim->peak[r] != want || pp_peak_bound(s, NULL, pp, v, m, r) != want) {
            snprintf(why, sizeof why, "rank %d: peak %d, bound %d, formula %d", r, sim->peak[r],
                     pp_peak_bound(s, NULL, pp, v, m, r), want);
            failed(t, Z_PEAK, s, pp, v, m, why);
        }
        if ((wwant >= 0 && sim->wpeak[r] != wwant) || pp_wpeak_bound(s, NULL, pp, v, m, r) != sim->wpeak[r]) {
            snprintf(why, sizeof why, "rank %d: pending W's peak %d, bound %d, formula %d", r, sim->wpeak[r],
                     pp_wpeak_bound(s, NULL, pp, v, m, r), wwant);
            failed(t, Z_WPEAK, s, pp, v, m, why);
        }
    }
}

static void zb_combo(struct tally *t, enum pp_schedule s, int pp, int m)
{
    int v = s == PP_ZBV ? 2 : 1, ok = 1;
    struct pp_action *l[PPMAX] = {0};
    int n[PPMAX] = {0};
    char err[400];
    struct pp_sim sim;
    t->combos++;
    for (int r = 0; r < pp && ok; r++)
        if (pp_schedule_build(s, NULL, pp, v, m, r, &l[r], &n[r], err, sizeof err)) failed(t, Z_BUILD, s, pp, v, m, err), ok = 0;
    for (int r = 0; r < pp && ok; r++) {
        if (!check_list(l[r], n[r], s, pp, v, m, r, err, sizeof err)) failed(t, Z_LIST, s, pp, v, m, err);
        if (!in_order(l[r], n[r])) failed(t, Z_ORDER, s, pp, v, m, "out of micro-batch order");
        if (!phases_ok(l[r], n[r], s, pp, r, err, sizeof err)) failed(t, Z_PHASE, s, pp, v, m, err);
    }
    if (ok && !forwards_run(l, n, s, pp, v, m, err, sizeof err)) failed(t, Z_EVAL, s, pp, v, m, err);
    long buffered = -1;
    if (ok && zb_run(l, n, s, pp, m, 1, 1, 1, PP_SEND_BUFFERED, 0, &sim, err, sizeof err)) {
        zb_unit_checks(t, &sim, s, pp, m);
        buffered = sim.makespan;
        pp_sim_free(&sim);
    } else if (ok) failed(t, Z_BUF, s, pp, v, m, err);
    /* (whether lists deadlock does not depend on the times: the waits are
     * the same; other times are run for zb-h2's makespan) */
    static const struct {
        int c, tf, tb, tw, send, ahead;
    } runs[] = {{Z_RDV, 1, 1, 1, PP_SEND_RENDEZVOUS, 0}, {Z_RDV_AHEAD, 1, 1, 1, PP_SEND_RENDEZVOUS, 1},
                {Z_RDV_AHEAD, 1, 1, 1, PP_SEND_RENDEZVOUS, 2}, {Z_H2, 1, 2, 1, PP_SEND_RENDEZVOUS, 1},
                {Z_H2, 2, 3, 2, PP_SEND_BUFFERED, 0}, {Z_H2, 2, 2, 1, PP_SEND_BUFFERED, 0}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0] && ok; k++) {
        if (runs[k].c == Z_H2 && (s != PP_ZBH2 || m < 2 * pp - 1)) continue;
        if (!zb_run(l, n, s, pp, m, runs[k].tf, runs[k].tb, runs[k].tw, runs[k].send, runs[k].ahead, &sim, err,
                    sizeof err)) {
            failed(t, runs[k].c, s, pp, v, m, err);
            continue;
        }
        if (runs[k].c == Z_RDV && sim.makespan != buffered)
            failed(t, Z_RDV, s, pp, v, m, "rendezvous sends take longer than buffered ones");
        if (runs[k].c == Z_H2 && sim.makespan != least_makespan(pp, m, runs[k].tf, runs[k].tb, runs[k].tw))
            failed(t, Z_H2, s, pp, v, m, "makespan above the least");
        pp_sim_free(&sim);
    }
    for (int r = 0; r < pp; r++) free(l[r]);
}

static void zb_sweep(enum pp_schedule s)
{
    struct tally t;
    memset(&t, 0, sizeof t);
    char err[400];
    int v = s == PP_ZBV ? 2 : 1;
    for (int pp = 1; pp <= PPMAX; pp++)
        for (int m = 1; m <= MMAX; m++)
            if (!pp_schedule_check(s, NULL, pp, v, m, err, sizeof err)) zb_combo(&t, s, pp, m);
            else if (s != PP_ZBV || pp > 1) failed(&t, Z_BUILD, s, pp, v, m, err);
    for (int c = 0; c < NZCHECK; c++) {
        if (c == Z_H2 && s != PP_ZBH2) continue;
        tap_ok(t.fails[c] == 0, "%s, %d combinations: %s", pp_schedule_name(s), t.combos, zcheck_name[c]);
        if (t.fails[c]) tap_diag("%d failures, first: %s", t.fails[c], t.first[c]);
    }
}

/* The bubble of zb-h1 against 1F1B's is (m+p-1)/(3m+p-1) (the least any
 * schedule with 1F1B's memory on rank 0 can have, since rank 0 must idle p-1
 * units before its first B): below 0.40 only from m = 3(p-1) on, about 1/3
 * for m >> p.  zbv's is (m+p-1)/(6m+p-1) for m >= 2p-1, below 0.20 from
 * m = 4(p-1) on.  The worst ratios over m >= pp: */
static void zb_ratios(void)
{
    int ok = 1;
    for (int s = 0; s < 3; s++) {
        char line[600];
        int k = snprintf(line, sizeof line, "%s / 1f1b bubble, worst over m >= pp, pp = 2..16:",
                         pp_schedule_name((enum pp_schedule)(PP_ZBH1 + s)));
        for (int pp = 2; pp <= PPMAX && k < (int)sizeof line; pp++)
            k += snprintf(line + k, sizeof line - (size_t)k, " %.2f", worst_ratio[s][pp]);
        tap_diag("%s", line);
        for (int pp = 2; pp <= PPMAX; pp++) ok &= worst_ratio[s][pp] > 0 && worst_ratio[s][pp] <= 0.5 + 1e-9;
    }
    tap_ok(ok, "every zero-bubble schedule at least halves 1F1B's bubble for every pp <= 16 and m >= pp");
}

/* ---------------------------------------------------------------- refusals */

static int refuses(enum pp_schedule s, int pp, int v, int m, const char *needle)
{
    char err[400] = "";
    struct pp_action *l = NULL;
    int n = 0, rc = pp_schedule_build(s, NULL, pp, v, m, 0, &l, &n, err, sizeof err);
    free(l);
    if (rc == 0 || !strstr(err, needle)) tap_diag("got rc %d, \"%s\"", rc, err);
    return rc != 0 && strstr(err, needle) != NULL && pp_schedule_check(s, NULL, pp, v, m, err, sizeof err) != 0;
}

static void test_refusals(void)
{
    tap_ok(!strcmp(pp_schedule_name(PP_GPIPE), "gpipe") && !strcmp(pp_schedule_name(PP_1F1B), "1f1b") &&
               !strcmp(pp_schedule_name(PP_INTERLEAVED), "interleaved") && !strcmp(pp_schedule_name(PP_ZBH1), "zb-h1") &&
               !strcmp(pp_schedule_name(PP_ZBH2), "zb-h2") && !strcmp(pp_schedule_name(PP_ZBV), "zbv") &&
               !strcmp(pp_kind_name(PP_WGT), "WGT") && !strcmp(pp_schedule_name(PP_SCHED_NONE), "?"),
           "each schedule has its name; none has none");
    tap_ok(refuses(PP_ZBV, 4, 1, 8, "needs virtual_stages = 2, not 1") && refuses(PP_ZBV, 1, 2, 8, "pp >= 2") &&
               refuses(PP_ZBH1, 4, 2, 8, "needs schedule = 'interleaved'") &&
               refuses(PP_ZBH2, 4, 2, 8, "or 'zbv' for 2"),
           "zbv needs two chunks and two ranks; zb-h1 and zb-h2 one chunk");
    int v_ok = 1, inverse = 1;
    for (int pp = 1; pp <= 8; pp++)
        for (int s = 0; s < 2 * pp; s++) {
            int r, c;
            pp_stage_place(PP_ZBV, pp, s, &r, &c);
            inverse &= pp_virtual_stage(PP_ZBV, pp, r, c) == s && r >= 0 && r < pp && (c == 0 || c == 1);
            v_ok &= c == (s >= pp) && r == (s < pp ? s : 2 * pp - 1 - s);
            pp_stage_place(PP_INTERLEAVED, pp, s, &r, &c);
            inverse &= pp_virtual_stage(PP_INTERLEAVED, pp, r, c) == s && s == c * pp + r;
        }
    tap_ok(v_ok && inverse && pp_schedule_layout(PP_ZBV) == PP_LAYOUT_V && pp_schedule_layout(PP_ZBH1) == PP_LAYOUT_LOOP,
           "zbv's V: chunk 0 of rank r is stage r, chunk 1 stage 2pp-1-r; every other schedule chunk*pp + rank; "
           "pp_stage_place inverts pp_virtual_stage");
    /* zb-h2 with fewer than 2pp-1 micro-batches runs zb-h1's lists */
    int same_h = 1;
    for (int pp = 2; pp <= 8; pp++)
        for (int m = 1; m < 2 * pp - 1; m++)
            for (int r = 0; r < pp; r++) {
                struct pp_action *a, *b;
                int na, nb;
                char err[200];
                pp_schedule_build(PP_ZBH1, NULL, pp, 1, m, r, &a, &na, err, sizeof err);
                pp_schedule_build(PP_ZBH2, NULL, pp, 1, m, r, &b, &nb, err, sizeof err);
                same_h &= a && b && na == nb && !memcmp(a, b, sizeof *a * (size_t)na);
                free(a), free(b);
            }
    tap_ok(same_h, "zb-h2 with fewer than 2pp-1 micro-batches builds exactly the zb-h1 lists");
    tap_ok(refuses(PP_INTERLEAVED, 4, 2, 6, "multiple of pp = 4") && refuses(PP_INTERLEAVED, 4, 2, 6, "use 4 or 8") &&
               refuses(PP_INTERLEAVED, 4, 2, 3, "use 4 "),
           "interleaved refuses micro-batches not a multiple of pp, naming the nearest valid counts");
    tap_ok(refuses(PP_1F1B, 4, 2, 8, "needs schedule = 'interleaved'") && refuses(PP_INTERLEAVED, 1, 2, 8, "pp >= 2") &&
               refuses(PP_1F1B, 0, 1, 8, "at least 1") && refuses(PP_GPIPE, 2, 1, 0, "at least 1") &&
               refuses(PP_SCHED_NONE, 2, 1, 2, "no pipeline schedule"),
           "virtual stages without interleaving, interleaving on one stage, empty pipelines are refused");

    /* interleaved with v = 1 is exactly 1f1b, and needs no multiple of pp */
    int same = 1;
    for (int pp = 1; pp <= 8; pp++)
        for (int m = 1; m <= 12; m++)
            for (int r = 0; r < pp; r++) {
                struct pp_action *a, *b;
                int na, nb;
                char err[200];
                pp_schedule_build(PP_1F1B, NULL, pp, 1, m, r, &a, &na, err, sizeof err);
                pp_schedule_build(PP_INTERLEAVED, NULL, pp, 1, m, r, &b, &nb, err, sizeof err);
                same &= a && b && na == nb && !memcmp(a, b, sizeof *a * (size_t)na);
                free(a), free(b);
            }
    tap_ok(same, "interleaved with virtual_stages = 1 builds exactly the 1f1b lists");
}

/* ------------------------------------------------ the simulator says no */

#define A(k, mb, c, p) {PP_##k, mb, c, p}
#define CF(mb) {PP_FWD, mb, 0, -1}
#define CB(mb) {PP_BWD, mb, 0, -1}
#define CW(mb) {PP_WGT, mb, 0, -1}

static int sim2(struct pp_action *r0, int n0, struct pp_action *r1, int n1, int m, enum pp_send_model send,
                char *err, size_t len)
{
    struct pp_action *l[2] = {r0, r1};
    int n[2] = {n0, n1};
    struct pp_sim_opts o = {1, 1, send, 0, .t_wgt = 0};
    struct pp_sim sim;
    int rc = pp_simulate(2, 1, m, l, n, &o, &sim, err, len);
    if (rc == 0) pp_sim_free(&sim);
    return rc;
}

#define N(x) (int)(sizeof x / sizeof x[0])

static void test_simulator_catches(void)
{
    char err[600];
    /* Rank 0 forwards all 4 micro-batches (GPipe), rank 1 keeps 2 in flight:
     * fine if sends are buffered; with rendezvous, rank 0 waits for rank 1 to
     * take activation 2, while rank 1 waits for rank 0 to take gradient 0. */
    struct pp_action g0[] = {CF(0), A(SEND_ACT, 0, 0, 1), CF(1), A(SEND_ACT, 1, 0, 1), CF(2), A(SEND_ACT, 2, 0, 1),
                             CF(3), A(SEND_ACT, 3, 0, 1), A(RECV_GRAD, 0, 0, 1), CB(0), A(RECV_GRAD, 1, 0, 1),
                             CB(1), A(RECV_GRAD, 2, 0, 1), CB(2), A(RECV_GRAD, 3, 0, 1), CB(3)};
    struct pp_action g1[] = {A(RECV_ACT, 0, 0, 0), CF(0), A(RECV_ACT, 1, 0, 0), CF(1), CB(0), A(SEND_GRAD, 0, 0, 0),
                             CB(1), A(SEND_GRAD, 1, 0, 0), A(RECV_ACT, 2, 0, 0), CF(2), A(RECV_ACT, 3, 0, 0), CF(3),
                             CB(2), A(SEND_GRAD, 2, 0, 0), CB(3), A(SEND_GRAD, 3, 0, 0)};
    int buf = sim2(g0, N(g0), g1, N(g1), 4, PP_SEND_BUFFERED, err, sizeof err);
    int rdv = sim2(g0, N(g0), g1, N(g1), 4, PP_SEND_RENDEZVOUS, err, sizeof err);
    tap_ok(buf == 0 && rdv != 0 && strstr(err, "deadlock with rendezvous sends") && strstr(err, "SEND_ACT mb 2") &&
               strstr(err, "SEND_GRAD mb 0"),
           "lists that only work with buffered sends are caught under rendezvous: %s", err);

    /* rank 1 waits for activation 1 before it forwards 0; rank 0 sends 1 only
     * after gradient 0 came back: a cycle whatever the send model */
    struct pp_action c0[] = {CF(0), A(SEND_ACT, 0, 0, 1), A(RECV_GRAD, 0, 0, 1), CB(0),
                             CF(1), A(SEND_ACT, 1, 0, 1), A(RECV_GRAD, 1, 0, 1), CB(1)};
    struct pp_action c1[] = {A(RECV_ACT, 0, 0, 0), A(RECV_ACT, 1, 0, 0), CF(0), CB(0), A(SEND_GRAD, 0, 0, 0),
                             CF(1), CB(1), A(SEND_GRAD, 1, 0, 0)};
    tap_ok(sim2(c0, N(c0), c1, N(c1), 2, PP_SEND_BUFFERED, err, sizeof err) != 0 &&
               strstr(err, "deadlock with buffered sends"),
           "a dependency cycle deadlocks even with buffered sends: %s", err);

    struct pp_action b1[] = {A(RECV_ACT, 0, 0, 0), CB(0), CF(0), A(SEND_GRAD, 0, 0, 0)};
    struct pp_action b0[] = {CF(0), A(SEND_ACT, 0, 0, 1), A(RECV_GRAD, 0, 0, 1), CB(0)};
    tap_ok(sim2(b0, N(b0), b1, N(b1), 1, PP_SEND_BUFFERED, err, sizeof err) != 0 && strstr(err, "before its forward"),
           "a backward before its forward is caught: %s", err);

    struct pp_action o1[] = {A(RECV_ACT, 1, 0, 0), A(RECV_ACT, 0, 0, 0), CF(0), CB(0), A(SEND_GRAD, 0, 0, 0),
                             CF(1), CB(1), A(SEND_GRAD, 1, 0, 0)};
    struct pp_action o0[] = {CF(0), A(SEND_ACT, 0, 0, 1), CF(1), A(SEND_ACT, 1, 0, 1), A(RECV_GRAD, 0, 0, 1), CB(0),
                             A(RECV_GRAD, 1, 0, 1), CB(1)};
    tap_ok(sim2(o0, N(o0), o1, N(o1), 2, PP_SEND_BUFFERED, err, sizeof err) != 0 && strstr(err, "same order"),
           "receives posted in another order than the sends are caught (FIFO matching): %s", err);

    struct pp_action m1[] = {A(RECV_ACT, 0, 0, 0), CF(0), CB(0), A(SEND_GRAD, 0, 0, 0), A(RECV_ACT, 1, 0, 0), CF(1)};
    struct pp_action m0[] = {CF(0), A(SEND_ACT, 0, 0, 1), CF(1), A(SEND_ACT, 1, 0, 1), A(RECV_GRAD, 0, 0, 1), CB(0)};
    tap_ok(sim2(m0, N(m0), m1, N(m1), 2, PP_SEND_BUFFERED, err, sizeof err) != 0 &&
               strstr(err, "never does BWD of mb 1"),
           "a missing backward is caught: %s", err);

    struct pp_action p0[] = {CF(0), A(SEND_ACT, 0, 0, 0), A(RECV_GRAD, 0, 0, 1), CB(0)};
    tap_ok(sim2(p0, N(p0), b1, N(b1), 1, PP_SEND_BUFFERED, err, sizeof err) != 0 && strstr(err, "peer"),
           "a message to the wrong rank is caught: %s", err);

    /* W: after its own B, once, the weight gradients of a chunk in
     * micro-batch order; a list with W needs t_wgt >= 1 */
    struct pp_action w1[] = {A(RECV_ACT, 0, 0, 0), CF(0), CB(0), A(SEND_GRAD, 0, 0, 0), CW(0)};
    struct pp_action w0[] = {CF(0), A(SEND_ACT, 0, 0, 1), A(RECV_GRAD, 0, 0, 1), CB(0), CW(0)};
    struct pp_action wearly[] = {CF(0), A(SEND_ACT, 0, 0, 1), CW(0), A(RECV_GRAD, 0, 0, 1), CB(0)};
    struct pp_action wtwice[] = {CF(0), A(SEND_ACT, 0, 0, 1), A(RECV_GRAD, 0, 0, 1), CB(0), CW(0), CW(0)};
    struct pp_sim_opts wo = {1, 1, PP_SEND_RENDEZVOUS, 1, .t_wgt = 1};
    struct pp_sim sim;
    struct pp_action *wl[2] = {w0, w1};
    int wn[2] = {N(w0), N(w1)}, good = pp_simulate(2, 1, 1, wl, wn, &wo, &sim, err, sizeof err);
    int peaks = good == 0 && sim.peak[0] == 1 && sim.wpeak[0] == 1 && sim.makespan == 5;
    if (good == 0) pp_sim_free(&sim);
    tap_ok(peaks, "a B followed by its W: the activations held until the W, one W pending, B and W 1 unit each");
    wo.t_wgt = 0;
    tap_ok(pp_simulate(2, 1, 1, wl, wn, &wo, &sim, err, sizeof err) != 0 && strstr(err, "t_wgt >= 1"),
           "lists with W simulated with t_wgt = 0 are refused: %s", err);
    wo.t_wgt = 1;
    wl[0] = wearly, wn[0] = N(wearly);
    tap_ok(pp_simulate(2, 1, 1, wl, wn, &wo, &sim, err, sizeof err) != 0 && strstr(err, "WGT mb 0") &&
               strstr(err, "before its backward"),
           "a W before its B is caught: %s", err);
    wl[0] = wtwice, wn[0] = N(wtwice);
    tap_ok(pp_simulate(2, 1, 1, wl, wn, &wo, &sim, err, sizeof err) != 0 && strstr(err, "done twice"),
           "a W twice is caught: %s", err);
    /* rank 0: B0 B1 W1 W0 (weight gradients out of order); then B0 fused, W1 (in order: fine); then B1 fused
     * before W0 (out of order) */
    struct pp_action o2r1[] = {A(RECV_ACT, 0, 0, 0), CF(0), CB(0), A(SEND_GRAD, 0, 0, 0),
                               A(RECV_ACT, 1, 0, 0), CF(1), CB(1), A(SEND_GRAD, 1, 0, 0)};
    struct pp_action bad1[] = {CF(0), A(SEND_ACT, 0, 0, 1), CF(1), A(SEND_ACT, 1, 0, 1), A(RECV_GRAD, 0, 0, 1), CB(0),
                               A(RECV_GRAD, 1, 0, 1), CB(1), CW(1), CW(0)};
    struct pp_action fine[] = {CF(0), A(SEND_ACT, 0, 0, 1), CF(1), A(SEND_ACT, 1, 0, 1), A(RECV_GRAD, 0, 0, 1), CB(0),
                               A(RECV_GRAD, 1, 0, 1), CB(1), CW(1)};
    struct pp_action bad3[] = {CF(0), A(SEND_ACT, 0, 0, 1), CF(1), A(SEND_ACT, 1, 0, 1), A(RECV_GRAD, 0, 0, 1), CB(0),
                               A(RECV_GRAD, 1, 0, 1), CB(1), CW(0)};
    struct pp_action *ol[2] = {bad1, o2r1};
    int on[2] = {N(bad1), N(o2r1)};
    int rb1 = pp_simulate(2, 1, 2, ol, on, &wo, &sim, err, sizeof err);
    char e1[600];
    snprintf(e1, sizeof e1, "%s", err);
    ol[0] = fine, on[0] = N(fine);
    int rf = pp_simulate(2, 1, 2, ol, on, &wo, &sim, err, sizeof err);
    if (rf == 0) pp_sim_free(&sim);
    ol[0] = bad3, on[0] = N(bad3);
    int rb3 = pp_simulate(2, 1, 2, ol, on, &wo, &sim, err, sizeof err);
    tap_ok(rb1 != 0 && strstr(e1, "WGT mb 1") && strstr(e1, "micro-batch order") && rf == 0 && rb3 != 0 &&
               strstr(err, "BWD mb 1") && strstr(err, "before that of micro-batch 0"),
           "each chunk's weight gradients (W or fused B) in micro-batch order: W1 before W0 is caught (%s), B0 fused "
           "then B1 and W1 is fine, B1 fused before W0 is caught (%s)",
           e1, err);

    /* the executor contract matters: the same 1f1b lists, run one blocking
     * MPI_Ssend / MPI_Recv at a time, deadlock (gpipe's happen not to) */
    struct pp_sim_opts blk = {1, 1, PP_SEND_BLOCKING, 0, .t_wgt = 0};
    int f1 = pp_simulate_schedule(PP_1F1B, NULL, 4, 1, 8, &blk, &sim, err, sizeof err);
    int fg = pp_simulate_schedule(PP_GPIPE, NULL, 4, 1, 8, &blk, &sim, NULL, 0);
    if (fg == 0) pp_sim_free(&sim);
    tap_ok(f1 != 0 && strstr(err, "deadlock with blocking rendezvous sends") && fg == 0,
           "1f1b executed with blocking sends in list order deadlocks (why the phase contract): %s", err);
}

/* ---------------------------------------------------------------- picture */

static const char golden_1f1b_4x4[] =
    "1f1b: pp = 4, virtual_stages = 1, micro-batches = 4; forward 1, backward 1 time units\n"
    "time    0  1  2  3  4  5  6  7  8  9  10 11 12 13\n"
    "rank 0  F0 F1 F2 F3 .  .  .  B0 .  B1 .  B2 .  B3\n"
    "rank 1  .  F0 F1 F2 .  .  B0 F3 B1 .  B2 .  B3 .\n"
    "rank 2  .  .  F0 F1 .  B0 F2 B1 F3 B2 .  B3 .  .\n"
    "rank 3  .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 .  .  .\n"
    "bubble fraction 3/7 = 0.4286: idle 24 of 56 rank-time units\n"
    "by formula (p-1)/(v*m+p-1) = 3/7 = 0.4286\n"
    "peak in flight (mb, chunk) per rank: 4 3 2 1\n";

static char *picture(enum pp_schedule s, int pp, int v, int m, int tf, int tb, int tw, int width)
{
    struct pp_sim_opts o = {tf, tb, PP_SEND_RENDEZVOUS, 0, .t_wgt = tw};
    struct pp_sim sim;
    char err[400], *text = NULL;
    size_t len = 0;
    if (pp_simulate_schedule(s, NULL, pp, v, m, &o, &sim, err, sizeof err)) {
        tap_diag("%s", err);
        return NULL;
    }
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    pp_print_table(f, &sim, width);
    fclose(f);
    pp_sim_free(&sim);
    return text;
}

/* zbv on 2 ranks, 4 micro-batches: the V (rank 0 holds stages 0 and 3),
 * W's filling what 1F1B leaves idle; the least makespan 6m + p-1 = 25. */
static const char golden_zbv_2x4[] =
    "zbv: pp = 2, virtual_stages = 2, micro-batches = 4; forward 1, input gradient B 1, weight gradient W 1 time "
    "units (a fused backward 2)\n"
    "time    0    1    2    3    4    5    6    7    8    9    10   11   12   13   14   15   16   17   18   19   20   21\n"
    "rank 0  F0c0 F1c0 F2c0 F0c1 B0c1 W0c1 F1c1 B1c1 W1c1 F3c0 B0c0 W0c0 F2c1 B2c1 W2c1 B1c0 W1c0 F3c1 B3c1 W3c1 B2c0 W2c0\n"
    "rank 1  .    F0c0 F0c1 F1c0 F1c1 B0c1 B0c0 W0c1 W0c0 F2c0 F2c1 B1c1 B1c0 W1c1 W1c0 F3c0 F3c1 B2c1 B2c0 W2c1 B3c1 B3c0\n"
    "\n"
    "time    22   23   24\n"
    "rank 0  B3c0 W3c0 .\n"
    "rank 1  W2c0 W3c1 W3c0\n"
    "bubble fraction 1/25 = 0.0400: idle 2 of 50 rank-time units\n"
    "by formula (p-1)/(3*2m+p-1), the least any schedule can have = 1/25 = 0.0400\n"
    "peak in flight (mb, chunk) per rank: 4 4\n"
    "peak of pending weight gradients (W) per rank: 1 3\n";

static void test_picture(void)
{
    char *t = picture(PP_1F1B, 4, 1, 4, 1, 1, 0, 0);
    int ok = t && !strcmp(t, golden_1f1b_4x4);
    tap_ok(ok, "the 4-stage, 4-micro-batch 1F1B picture, exactly");
    if (!ok && t) printf("%s", t);
    free(t);

    /* triad schedule's times: B = W = 1, so a fused backward takes 2 */
    char *a = picture(PP_1F1B, 4, 1, 4, 1, 2, 0, 0), *b = picture(PP_1F1B, 4, 1, 4, 1, 1, 1, 0);
    tap_ok(a && b && !strcmp(a, b) && strstr(b, "forward 1, backward 2 time units") && !strstr(b, "W"),
           "1F1B at B = W = 1 draws the picture of a backward of 2 (fused: no W, no new line)");
    free(a), free(b);

    t = picture(PP_ZBV, 2, 2, 4, 1, 1, 1, 120);
    ok = t && !strcmp(t, golden_zbv_2x4);
    tap_ok(ok, "the 2-rank, 4-micro-batch zbv picture, exactly (W's drawn, the least bubble, pending W's)");
    if (!ok && t) printf("%s", t);
    free(t);

    t = picture(PP_ZBH1, 4, 1, 3, 1, 1, 1, 0);
    tap_ok(t && strstr(t, "W2") && !strstr(t, "by formula"), "zb-h1 with m < pp: no formula line (it is not the least)");
    free(t);

    t = picture(PP_INTERLEAVED, 16, 4, 64, 1, 2, 0, 100);
    int lines = 0, wide = 0, blocks = 0;
    for (char *p = t, *e; p && *p; p = e + 1, lines++) {
        e = strchr(p, '\n');
        if (!e) break;
        wide |= e - p > 100;
        blocks += !strncmp(p, "time", 4);
    }
    tap_ok(t && !wide && blocks > 1 && strstr(t, "F63c3") && strstr(t, "= 15/271"),
           "a 16-stage, 4-chunk, 64-micro-batch picture wraps into blocks of at most 100 columns (%d lines)",
           lines);
    free(t);
}

/* ---------------------------------------------------------------- the table */

/* One schedule's bubble (F = B = W = 1 per chunk; a fused backward 2) and
 * its most activation sets on a rank, in stages' worth (a pair of a v = 2
 * schedule holds half a stage). */
static int figures(enum pp_schedule s, int pp, int v, int m, int tb, double *bubble, double *stages)
{
    struct pp_sim_opts o = {1, tb, PP_SEND_RENDEZVOUS, 1, .t_wgt = 1};
    struct pp_sim sim;
    char err[400];
    if (pp_simulate_schedule(s, NULL, pp, v, m, &o, &sim, err, sizeof err)) return -1;
    int most = 0;
    for (int r = 0; r < pp; r++) most = sim.peak[r] > most ? sim.peak[r] : most;
    *bubble = pp_bubble(&sim, NULL, NULL);
    *stages = (double)most / v;
    pp_sim_free(&sim);
    return 0;
}

/* docs/pipeline.md's table: the bubble and the peak of each schedule at pp
 * = 8 and 16, m = 8 .. 64, written into *out (caller frees). */
static char *table(void)
{
    static const struct {
        enum pp_schedule s;
        int v;
    } col[] = {{PP_1F1B, 1}, {PP_INTERLEAVED, 2}, {PP_ZBH1, 1}, {PP_ZBH2, 1}, {PP_ZBV, 2}};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    fprintf(f, "| pp | m | bubble: 1f1b | interleaved v=2 | zb-h1 | zb-h2 | zbv | peak: 1f1b | interleaved | zb-h1 | "
               "zb-h2 | zbv |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int pp = 8; pp <= 16; pp += 8)
        for (int m = 8; m <= 64; m *= 2) {
            double b[5], st[5];
            for (int c = 0; c < 5; c++)
                if (figures(col[c].s, pp, col[c].v, m, 1, &b[c], &st[c])) b[c] = st[c] = -1;
            fprintf(f, "| %d | %d |", pp, m);
            for (int c = 0; c < 5; c++) fprintf(f, b[c] < 0 ? " - |" : " %.3f |", b[c]);
            for (int c = 0; c < 5; c++) fprintf(f, st[c] < 0 ? " - |" : st[c] == (int)st[c] ? " %.0f |" : " %.1f |", st[c]);
            fputc('\n', f);
        }
    /* B twice W (attention's backward has no weights): zb-h2's deeper warm-up pays off */
    fprintf(f, "\nWith B = 2, W = 1 (F = 1; a fused backward 3):\n\n| pp | m | bubble: 1f1b | zb-h1 | zb-h2 | zbv |\n"
               "| --- | --- | --- | --- | --- | --- |\n");
    for (int m = 16; m <= 64; m *= 2) {
        double b[5], st;
        fprintf(f, "| 8 | %d |", m);
        for (int c = 0; c < 5; c++) {
            if (col[c].s == PP_INTERLEAVED) continue;
            int bad = figures(col[c].s, 8, col[c].v, m, 2, &b[c], &st);
            fprintf(f, bad ? " - |" : " %.3f |", b[c]);
        }
        fputc('\n', f);
    }
    fclose(f);
    return text;
}

/* The table between docs/pipeline.md's markers is table()'s. */
static void test_table_in_docs(void)
{
    const char *top = getenv("top_srcdir");
    char path[4096], *doc = NULL, *want = table();
    if (!top) {
        tap_skip("top_srcdir is not set: docs/pipeline.md not compared");
        free(want);
        return;
    }
    snprintf(path, sizeof path, "%s/docs/pipeline.md", top);
    FILE *f = fopen(path, "r");
    size_t len = 0;
    if (f) {
        fseek(f, 0, SEEK_END);
        len = (size_t)ftell(f);
        rewind(f);
        doc = calloc(len + 1, 1);
        if (doc && fread(doc, 1, len, f) != len) doc[0] = 0;
        fclose(f);
    }
    const char *begin = "<!-- test_pipeline --table -->\n", *b = doc ? strstr(doc, begin) : NULL;
    const char *e = b ? strstr(b, "<!-- end of table -->") : NULL;
    int ok = want && b && e && (size_t)(e - b) == strlen(begin) + strlen(want) &&
             !strncmp(b + strlen(begin), want, strlen(want));
    tap_ok(ok, "docs/pipeline.md's table of bubbles and peaks is test_pipeline --table's (regenerate it so)");
    free(doc), free(want);
}

/* Each rank's own times (rank_t): 1F1B on 2 ranks, 4 micro-batches, rank 1
 * twice as slow.  Rank 1 starts at 1 (F0 arrives) and then never waits:
 * 4 x (2 + 4) = 24 busy, done at 25; rank 0's last backward follows, 25 to
 * 27.  Uniform times put the makespan at 15. */
static void test_rank_times(void)
{
    static const int rt[6] = {1, 1, 1, 2, 2, 2};
    struct pp_sim_opts o = {1, 1, PP_SEND_RENDEZVOUS, 1, PP_LAYOUT_LOOP, 1, rt};
    struct pp_sim sim;
    char err[256];
    int ok = pp_simulate_schedule(PP_1F1B, NULL, 2, 1, 4, &o, &sim, err, sizeof err) == 0;
    tap_ok(ok && sim.makespan == 27 && sim.busy[0] == 12 && sim.busy[1] == 24,
           "each rank's own times (rank 1 twice as slow): 1F1B's makespan 27, busy 12 and 24 (got %ld, %ld, %ld)",
           ok ? sim.makespan : -1, ok ? sim.busy[0] : -1, ok ? sim.busy[1] : -1);
    if (ok) pp_sim_free(&sim);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--table")) { /* docs/pipeline.md's table */
        char *t = table();
        printf("%s", t ? t : "");
        free(t);
        return t ? 0 : 1;
    }
    test_refusals();
    test_simulator_catches();
    test_picture();
    test_rank_times();
    test_table_in_docs();
    for (int s = PP_GPIPE; s <= PP_INTERLEAVED; s++) sweep((enum pp_schedule)s);
    for (int s = PP_ZBH1; s <= PP_ZBV; s++) zb_sweep((enum pp_schedule)s);
    zb_ratios();
    return tap_done();
}
