/* test_pipeline.c -- every schedule for pp <= 16, v <= 4, m <= 64 run through
 * the simulator: lists well formed, dependencies met, no deadlock with
 * buffered or rendezvous sends, peak in-flight as promised, bubble exactly
 * (p-1)/(v*m+p-1); the simulator's own refusals; the 4 x 4 1F1B picture. */
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "tap.h"

#define PPMAX 16
#define VMAX 4
#define MMAX 64

enum { C_BUILD, C_LIST, C_ORDER, C_BUF, C_RDV, C_RDV_AHEAD, C_BUBBLE, C_PEAK, NCHECK };
static const char *const check_name[NCHECK] = {
    "lists build",
    "each (mb, chunk) has one FWD and one BWD and exactly the sends and receives its virtual stage needs",
    "forwards and backwards of each chunk run in micro-batch order (same gradient sums in every schedule)",
    "deadlock-free, every dependency met, with buffered sends (F=1, B=2)",
    "deadlock-free, every dependency met, with rendezvous sends waited at the end of each phase (F=1, B=2)",
    "deadlock-free with rendezvous sends and receives posted one and two phases ahead",
    "makespan (v*m+p-1)(tF+tB), so each rank's bubble is exactly (p-1)/(v*m+p-1), at F:B = 1:2, 1:1, 2:3",
    ("peak in-flight (mb, chunk) per rank equals pp_peak_bound (gpipe m; 1f1b min(pp-rank, m); interleaved "
     "min(2(pp-rank-1)+(v-1)pp+1, v*m))"),
};

struct tally {
    int combos, fails[NCHECK];
    char first[NCHECK][400];
};

static void failed(struct tally *t, int c, enum pp_schedule s, int pp, int v, int m, const char *what)
{
    if (!t->fails[c]++)
        snprintf(t->first[c], sizeof t->first[c], "%s pp=%d v=%d m=%d: %.300s", pp_schedule_name(s), pp, v, m, what);
}

/* The list property checked without the simulator: per (mb, chunk) and kind,
 * how often it occurs must be 1 where the virtual stage needs it, else 0. */
static int check_list(const struct pp_action *l, int n, int pp, int v, int m, int rank, char *why, size_t len)
{
    static unsigned char seen[MMAX * VMAX][6];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < n; i++) {
        if (l[i].mb < 0 || l[i].mb >= m || l[i].chunk < 0 || l[i].chunk >= v || (int)l[i].kind < 0 ||
            l[i].kind > PP_SEND_GRAD) {
            snprintf(why, len, "rank %d action %d out of range", rank, i);
            return 0;
        }
        seen[l[i].mb * v + l[i].chunk][l[i].kind]++;
    }
    for (int q = 0; q < m * v; q++) {
        int s = (q % v) * pp + rank, first = s == 0, last = s == pp * v - 1;
        int want[6] = {!first, 1, !last, !last, 1, !first};
        for (int k = 0; k < 6; k++)
            if (seen[q][k] != want[k]) {
                snprintf(why, len, "rank %d mb %d chunk %d: %s %d times, want %d", rank, q / v, q % v,
                         pp_kind_name((enum pp_kind)k), seen[q][k], want[k]);
                return 0;
            }
    }
    return 1;
}

static int in_order(const struct pp_action *l, int n, int v)
{
    int next[2][VMAX] = {{0}};
    for (int i = 0; i < n; i++)
        if (l[i].kind == PP_FWD || l[i].kind == PP_BWD) {
            int *x = &next[l[i].kind == PP_BWD][l[i].chunk];
            if (l[i].mb != (*x)++) return 0;
        }
    (void)v;
    return 1;
}

/* Simulate under o; check completion, makespan and peaks.  Returns 0 on a
 * simulator error (err filled), else 1 with *bubble_ok / *peak_ok set. */
static int run(struct pp_action **l, int *n, enum pp_schedule s, int pp, int v, int m, struct pp_sim_opts o,
               int *bubble_ok, int *peak_ok, char *err, size_t len)
{
    struct pp_sim sim;
    if (pp_simulate(pp, v, m, l, n, &o, &sim, err, len)) return 0;
    long tau = o.t_fwd + o.t_bwd;
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
        if (!check_list(l[r], n[r], pp, v, m, r, err, sizeof err)) failed(t, C_LIST, s, pp, v, m, err);
        if (!in_order(l[r], n[r], v)) failed(t, C_ORDER, s, pp, v, m, "out of micro-batch order");
    }
    static const struct {
        int c, tf, tb, send, ahead;
    } runs[] = {{C_BUF, 1, 2, PP_SEND_BUFFERED, 0},   {C_RDV, 1, 2, PP_SEND_RENDEZVOUS, 0},
                {C_RDV_AHEAD, 1, 2, PP_SEND_RENDEZVOUS, 1}, {C_RDV_AHEAD, 1, 2, PP_SEND_RENDEZVOUS, 2},
                {C_BUF, 1, 1, PP_SEND_BUFFERED, 0},   {C_RDV, 2, 3, PP_SEND_RENDEZVOUS, 0}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0] && ok; k++) {
        struct pp_sim_opts o = {runs[k].tf, runs[k].tb, (enum pp_send_model)runs[k].send, runs[k].ahead};
        if (!run(l, n, s, pp, v, m, o, &b, &p, err, sizeof err)) {
            failed(t, runs[k].c, s, pp, v, m, err);
            continue;
        }
        bub &= b, peak &= p;
    }
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
               !strcmp(pp_schedule_name(PP_INTERLEAVED), "interleaved") && !strcmp(pp_schedule_name(PP_SCHED_NONE), "?"),
           "each schedule has its name; none has none");
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

static int sim2(struct pp_action *r0, int n0, struct pp_action *r1, int n1, int m, enum pp_send_model send,
                char *err, size_t len)
{
    struct pp_action *l[2] = {r0, r1};
    int n[2] = {n0, n1};
    struct pp_sim_opts o = {1, 1, send, 0};
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

    struct pp_action m1[] = {A(RECV_ACT, 0, 0, 0), CF(0), A(RECV_ACT, 1, 0, 0), CF(1), CB(1), A(SEND_GRAD, 1, 0, 0)};
    struct pp_action m0[] = {CF(0), A(SEND_ACT, 0, 0, 1), CF(1), A(SEND_ACT, 1, 0, 1), A(RECV_GRAD, 1, 0, 1), CB(1)};
    tap_ok(sim2(m0, N(m0), m1, N(m1), 2, PP_SEND_BUFFERED, err, sizeof err) != 0 &&
               strstr(err, "never does BWD of mb 0"),
           "a missing backward is caught: %s", err);

    struct pp_action p0[] = {CF(0), A(SEND_ACT, 0, 0, 0), A(RECV_GRAD, 0, 0, 1), CB(0)};
    tap_ok(sim2(p0, N(p0), b1, N(b1), 1, PP_SEND_BUFFERED, err, sizeof err) != 0 && strstr(err, "peer"),
           "a message to the wrong rank is caught: %s", err);

    /* the executor contract matters: the same 1f1b lists, run one blocking
     * MPI_Ssend / MPI_Recv at a time, deadlock (gpipe's happen not to) */
    struct pp_sim_opts blk = {1, 1, PP_SEND_BLOCKING, 0};
    struct pp_sim sim;
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

static char *picture(enum pp_schedule s, int pp, int v, int m, int tf, int tb, int width)
{
    struct pp_sim_opts o = {tf, tb, PP_SEND_RENDEZVOUS, 0};
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

static void test_picture(void)
{
    char *t = picture(PP_1F1B, 4, 1, 4, 1, 1, 0);
    int ok = t && !strcmp(t, golden_1f1b_4x4);
    tap_ok(ok, "the 4-stage, 4-micro-batch 1F1B picture, exactly");
    if (!ok && t) printf("%s", t);
    free(t);

    t = picture(PP_INTERLEAVED, 16, 4, 64, 1, 2, 100);
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

int main(void)
{
    test_refusals();
    test_simulator_catches();
    test_picture();
    for (int s = PP_GPIPE; s <= PP_INTERLEAVED; s++) sweep((enum pp_schedule)s);
    return tap_done();
}
