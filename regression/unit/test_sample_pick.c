/* test_sample_pick.c -- the ids a draw of triad sample may give (gen_candidates), against Hugging Face's
 * generate: temperature, then top_k (every id tied with the k-th kept), then top_p over what top_k left,
 * renormalised (the smallest set of the most likely whose probability reaches top_p, at least one). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sample_gen.h"
#include "tap.h"

enum { NMAX = 64 };

/* The kept ids of logits[0..V) under (temperature, top_k, top_p, drawable), as a bit set in keep[]. */
static int kept(const float *logits, int V, double temperature, int64_t top_k, double top_p,
                const unsigned char *drawable, unsigned char *keep, double *mass)
{
    struct gen_opts o = {.max_new = 1, .temperature = temperature, .top_k = top_k, .top_p = top_p,
                         .stop = NULL, .nstop = 0, .drawable = drawable};
    struct gen_cand c[NMAX];
    int n = gen_candidates(logits, V, &o, c, mass);
    memset(keep, 0, NMAX);
    for (int i = 0; i < n; i++) keep[c[i].id] = 1;
    return n;
}

/* Is keep[] exactly the ids of want[0..n)? */
static int same(const unsigned char *keep, int V, const int *want, int n)
{
    unsigned char w[NMAX] = {0};
    for (int i = 0; i < n; i++) w[want[i]] = 1;
    return memcmp(keep, w, (size_t)V) == 0;
}

int main(void)
{
    unsigned char keep[NMAX];
    double mass;
    /* probabilities 4 : 3 : 2 : 1 (ids 0..3), then 20 ids of 1 each: top_k = 3 keeps 9 of a total 30 */
    float l[24];
    for (int i = 0; i < 24; i++) l[i] = (float)log(i < 4 ? 4 - i : 1);
    int n = kept(l, 24, 1.0, 3, 0.7, NULL, keep, &mass);
    tap_ok(n == 2 && same(keep, 24, (int[]){0, 1}, 2) && fabs(mass - 7.0 / 4.0) < 1e-6,
           "top_k 3 then top_p 0.7: top_p of the three renormalised (4/9 + 3/9 reaches 0.7): ids 0 and 1 (kept %d, "
           "mass %.6f)", n, mass);
    n = kept(l, 24, 1.0, 3, 1.0, NULL, keep, &mass);
    tap_ok(n == 3 && same(keep, 24, (int[]){0, 1, 2}, 3), "top_k 3, top_p 1: the three most likely (kept %d)", n);
    n = kept(l, 24, 1.0, 0, 0.5, NULL, keep, &mass);
    tap_ok(n == 9 && same(keep, 24, (int[]){0, 1, 2, 3, 4, 5, 6, 7, 8}, 9),
           "top_p 0.5 alone, of 30: the ids while the mass before each is below 15: 0 .. 8 (kept %d)", n);
    n = kept(l, 24, 0.5, 0, 0.4, NULL, keep, &mass);
    tap_ok(n == 2 && same(keep, 24, (int[]){0, 1}, 2),
           "temperature 0.5 first (16 : 9 : 4 : 1 : 1 ..., of 50), then top_p 0.4: ids 0 and 1 (kept %d)", n);
    n = kept(l, 24, 1.0, 0, 0.4, NULL, keep, &mass);
    tap_ok(n == 6, "... where temperature 1 and top_p 0.4 keep 6 (kept %d)", n);
    n = kept(l, 24, 1.0, 4, 1.0, NULL, keep, &mass);
    tap_ok(n == 24, "top_k 4 with 20 ids tied with the 4th: every tied id stays, 24 (kept %d)", n);
    float t[7] = {1, 3, 2, 3, 2, 2, 0};
    n = kept(t, 7, 1.0, 2, 1.0, NULL, keep, &mass);
    tap_ok(n == 2 && same(keep, 7, (int[]){1, 3}, 2), "top_k 2 of logits 1 3 2 3 2 2 0: ids 1 and 3 (kept %d)", n);
    n = kept(t, 7, 1.0, 3, 1.0, NULL, keep, &mass);
    tap_ok(n == 5 && same(keep, 7, (int[]){1, 3, 2, 4, 5}, 5),
           "top_k 3 of the same: the 3rd largest is 2, so every 2 stays too: ids 1 2 3 4 5 (kept %d)", n);
    n = kept(t, 7, 1.0, 100, 1.0, NULL, keep, &mass);
    tap_ok(n == 7, "top_k past the vocabulary: every id (kept %d)", n);
    n = kept(t, 7, 1.0, 0, 1e-12, NULL, keep, &mass);
    tap_ok(n == 1 && same(keep, 7, (int[]){1}, 1), "a tiny top_p keeps one id, the most likely (the first of a tie: 1)");
    n = kept(t, 7, 1.0, 0, 0.0, NULL, keep, &mass);
    tap_ok(n == 1 && same(keep, 7, (int[]){1}, 1), "top_p 0 keeps one id too (kept %d)", n);
    unsigned char ok[7] = {1, 0, 1, 1, 1, 1, 1};
    n = kept(t, 7, 1.0, 2, 1.0, ok, keep, &mass);
    tap_ok(n == 4 && same(keep, 7, (int[]){3, 2, 4, 5}, 4),
           "id 1 not drawable: top_k 2 counts among the others (3, then the tied 2s: 2 4 5) (kept %d)", n);
    float w[5] = {0, -1000, -2000, 0.5f, -3000}; /* probabilities that underflow to 0 */
    n = kept(w, 5, 1.0, 0, 1.0, NULL, keep, &mass);
    tap_ok(n == 5, "top_p 1 filters nothing, even ids of probability 0 in double (kept %d)", n);
    return tap_done();
}
