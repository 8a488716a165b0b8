/* eval.c -- the held-out loss (eval.h). */
#include "eval.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exit_status.h"
#include "flight.h"
#include "log.h"
#include "pipeline.h"
#include "timers.h"

/* in with each "data.path" read "data.val_path", into out: the key where
 * the reader names it, not a file name that holds the same letters
 * ('nodata.path', 'data.path/x'). */
static void val_path_words(const char *in, char *out, size_t n)
{
    static const char *const name = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-'";
    size_t k = 0;
    for (const char *p = in; *p && k + 1 < n;)
        if (!strncmp(p, "data.path", 9) && (p == in || !strchr(name, p[-1])) && (!p[9] || !strchr(name, p[9]))) {
            k += (size_t)snprintf(out + k, n - k, "data.val_path");
            if (k >= n) k = n - 1;
            p += 9;
        } else {
            out[k++] = *p++;
        }
    out[k] = '\0';
}

void eval_init(struct eval *ev, const struct config *cfg, const struct run_shape *s, const struct grid *g, int V,
               int T)
{
    memset(ev, 0, sizeof *ev);
    if (cfg->train.eval_every == 0) return;
    struct config vcfg = *cfg; /* the held-out file, in order */
    snprintf(vcfg.data.path, sizeof vcfg.data.path, "%s", cfg->data.val_path);
    vcfg.data.shuffle = 0;
    struct deck_error err;
    memset(&err, 0, sizeof err);
    ev->data = data_open(&vcfg, V, T, &err);
    char msg[4096] = "";
    ev->G = cfg->train.batch_size;
    ev->slow = cfg->diag.slow_rank == g->rank ? cfg->diag.slow_seconds : 0; /* testing aid: a straggler */
    if (ev->data) {
        int64_t whole = (int64_t)(data_windows(ev->data) / (uint64_t)ev->G);
        ev->batches = cfg->train.eval_batches ? cfg->train.eval_batches : whole;
        if (whole == 0 || ev->batches > whole)
            snprintf(msg, sizeof msg, "error: data.val_path = '%s' holds %llu sequences of seq_len + 1 tokens; "
                     "%s %lld global batches of batch_size = %lld\n  hint: %s\n", cfg->data.val_path,
                     (unsigned long long)data_windows(ev->data), whole == 0 ? "not one of the" : "fewer than the",
                     (long long)(whole == 0 ? 1 : ev->batches), (long long)ev->G,
                     whole == 0 ? "give a longer held-out file, or a smaller batch_size"
                                : "set train.eval_batches = 0 (all of it) or fewer");
    } else { /* (the reader speaks of data.path: here it is data.val_path) */
        char what[sizeof err.what + 8], hint[sizeof err.hint + 8];
        val_path_words(err.what, what, sizeof what);
        val_path_words(err.hint[0] ? err.hint : "data.val_path names the held-out data, read as data.kind says", hint,
                       sizeof hint);
        snprintf(msg, sizeof msg, "error: data.val_path = '%s': %s\n  hint: %s\n", cfg->data.val_path, what, hint);
    }
    if (mpi_agree_error(g->world_comm, msg[0] != '\0', msg, sizeof msg) != 0) {
        if (g->rank == 0) fputs(msg, stderr);
        exit_all(EXIT_ERROR);
    }
    pp_exec_init_forward(&ev->exec, s->sched, s->schedule_file, g, s->v, s->n_micro);
}

int eval_stop_agreed(struct comm *c, const volatile sig_atomic_t *stop)
{
    if (!stop) return 0;
    int asked = *stop != 0;
    comm_allreduce_max_int(c, CG_WORLD, &asked, 1);
    return asked;
}

double eval_run(struct eval *ev, struct model *m, struct comm *c, struct timers *t, int64_t *tokens,
                const volatile sig_atomic_t *stop)
{
    double sum = 0;
    for (int64_t b = 0; b < ev->batches; b++) {
        if (eval_stop_agreed(c, stop)) {
            *tokens = 0;
            return NAN;
        }
        if (ev->slow > 0) pause_for(ev->slow);
        sum += pp_exec_step(&ev->exec, m, c, ev->data, (uint64_t)(b * ev->G), ev->G, 0.0f, t);
        flight_progress(); /* the hang watchdog: each batch has the step's timeout, not the whole evaluation */
    }
    if (c->grid->pp > 1) comm_allreduce_sum_f64(c, CG_PP, &sum, 1); /* the last stage has it */
    comm_allreduce_sum_f64(c, CG_DP, &sum, 1);
    *tokens = ev->batches * ev->G * m->d.T;
    return sum / (double)*tokens;
}

void eval_note_left_out(const struct eval *ev, const struct config *cfg, FILE *f, const char *hint)
{
    unsigned long long held = ev->data ? data_windows(ev->data) : 0, used = (unsigned long long)(ev->batches * ev->G);
    if (cfg->train.eval_batches != 0 || held <= used) return;
    fflush(stdout);
    fprintf(f, "note: data.val_path = '%s' holds %llu sequences of seq_len + 1 tokens; the held-out loss is over "
            "the first %llu (%lld global batch%s of train.batch_size = %lld), the last %llu left out%s%s\n",
            cfg->data.val_path, held, used, (long long)ev->batches, ev->batches == 1 ? "" : "es", (long long)ev->G,
            held - used, hint ? "\n  hint: " : "", hint ? hint : "");
    fflush(f);
}

void eval_free(struct eval *ev)
{
    if (ev->data) data_close(ev->data);
    pp_exec_free(&ev->exec);
    memset(ev, 0, sizeof *ev);
}
