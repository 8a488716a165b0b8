/* mc_eval.c -- multiple-choice tasks scored on the grid (mc_eval.h). */
#include "mc_eval.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "eval.h"
#include "exit_status.h"
#include "flight.h"
#include "hf.h"
#include "log.h"
#include "timers.h"

/* Entry i of eval.tasks (FILE or NAME=FILE, comma-separated) into name
 * and path.  The number of entries, or -1 with err. */
static int task_entry(const char *list, int i, char *name, char *path, size_t len, char *err, size_t errlen)
{
    int n = 0;
    for (const char *p = list;; n++) {
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        while (l && (*p == ' ' || *p == '\t')) p++, l--;
        while (l && (p[l - 1] == ' ' || p[l - 1] == '\t')) l--;
        if (l == 0) return errorf(err, errlen, "eval.tasks = '%s': entry %d is empty", list, n + 1);
        if (n == i) {
            const char *eq = memchr(p, '=', l), *slash = memchr(p, '/', l);
            int named = eq && (!slash || slash > eq);
            snprintf(path, len, "%.*s", (int)(named ? l - (size_t)(eq + 1 - p) : l), named ? eq + 1 : p);
            if (named) {
                snprintf(name, MC_NAME, "%.*s", (int)(eq - p), p);
            } else { /* the file's name without its folder and extension */
                const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path, *dot = strrchr(base, '.');
                snprintf(name, MC_NAME, "%.*s", (int)(dot && dot > base ? dot - base : (long)strlen(base)), base);
            }
        }
        if (!end) return n + 1;
        p = end + 1;
    }
}

/* A task's name becomes metrics.h5's group /eval/<name>: a word that is no
 * column of the held-out loss's table there. */
static int check_name(const char *name, const char *path, char *err, size_t errlen)
{
    size_t ok = strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.");
    if (!name[0] || name[ok] || name[0] == '.' || strlen(name) >= MC_NAME - 1)
        return errorf(err, errlen, "eval.tasks: the task of %s is named '%s'\n  hint: give it a name of letters, "
                      "digits, '_', '-' and '.' (at most %d), NAME=FILE", path, name, MC_NAME - 2);
    if (!strcmp(name, "step") || !strcmp(name, "loss") || !strcmp(name, "tokens"))
        return errorf(err, errlen, "eval.tasks: the task of %s is named '%s', a column of metrics.h5's /eval\n  "
                      "hint: give it another name, NAME=FILE", path, name);
    return 0;
}

/* Rank 0: every task of eval.tasks read into e.  0, or -1 with err. */
static int read_tasks(struct mc_eval *e, const struct config *cfg, const char *ckpt, struct tokenizer *run_tok, int V,
                      int T, char *err, size_t errlen)
{
    char name[MC_NAME], path[CONFIG_STRLEN];
    int n = task_entry(cfg->eval.tasks, -1, name, path, sizeof path, err, errlen);
    if (n < 0) return -1;
    e->ntask = n;
    e->task = xcalloc((size_t)n, sizeof *e->task);
    e->name = xcalloc((size_t)n, sizeof *e->name);
    struct tokenizer *tok = NULL;
    int looked = 0, rc = 0, own = ckpt || cfg->eval.tokenizer[0];
    for (int i = 0; rc == 0 && i < n; i++) {
        task_entry(cfg->eval.tasks, i, e->name[i], path, sizeof path, err, errlen);
        rc = check_name(e->name[i], path, err, errlen);
        for (int j = 0; rc == 0 && j < i; j++)
            if (!strcmp(e->name[i], e->name[j]))
                rc = errorf(err, errlen, "eval.tasks: two tasks are named '%s'\n  hint: name them, NAME=FILE",
                            e->name[i]);
        if (rc == 0 && mc_task_is_jsonl(path) && !looked) { /* (the tokenizer once, where text needs it) */
            looked = 1;
            tok = own ? hf_open_tokenizer(cfg->eval.tokenizer, cfg, ckpt, V, err, errlen) : run_tok;
            if (!tok && err[0]) { /* (the tokenizer's error: its own hint, not a task's) */
                if (!strstr(err, "hint: "))
                    snprintf(err + strlen(err), errlen - strlen(err), "\n  hint: the JSON Lines tasks are read through "
                             "eval.tokenizer, or where it is '' the model's tokenizer");
                rc = -1;
                break;
            }
        }
        if (rc == 0)
            rc = mc_task_read(&e->task[i], path, tok, V, data_text_is_bytes(cfg), T, cfg->eval.max_examples, err, errlen);
        if (rc != 0 && !strstr(err, "hint: ")) /* (the file's own errors name it, not the key) */
            snprintf(err + strlen(err), errlen - strlen(err), "\n  hint: eval.tasks names %s for task %s: check the "
                     "path (eval.tasks = 'FILE' or 'NAME=FILE, ...')", path, e->name[i]);
        if (rc == 0)
            log_info("read task %s: %lld examples, %lld choices, from %s\n", e->name[i], (long long)e->task[i].n,
                     (long long)e->task[i].rows, path);
    }
    if (own) tok_close(tok);
    return rc;
}

/* The tasks from rank 0 to every rank (their names and streams). */
static void send_tasks(struct mc_eval *e, const struct grid *g)
{
    MPI_CHECK(MPI_Bcast(&e->ntask, 1, MPI_INT, 0, g->world_comm));
    if (g->rank != 0) {
        e->task = xcalloc((size_t)e->ntask, sizeof *e->task);
        e->name = xcalloc((size_t)e->ntask, sizeof *e->name);
    }
    MPI_CHECK(MPI_Bcast(e->name, e->ntask * MC_NAME, MPI_CHAR, 0, g->world_comm));
    for (int i = 0; i < e->ntask; i++) {
        struct mc_task *t = &e->task[i];
        uint64_t len = t->len;
        MPI_CHECK(MPI_Bcast(&len, 1, MPI_UINT64_T, 0, g->world_comm));
        if (g->rank != 0) {
            t->len = (size_t)len;
            t->stream = xmalloc((len ? len : 1) * sizeof *t->stream);
        }
        for (size_t at = 0; at < len; at += INT_MAX / 4) {
            size_t n = len - at < INT_MAX / 4 ? len - at : INT_MAX / 4;
            MPI_CHECK(MPI_Bcast(t->stream + at, (int)n, MPI_INT32_T, 0, g->world_comm));
        }
        if (g->rank != 0 && mc_task_index(t)) die("out of memory indexing task %s's %zu ids", e->name[i], t->len);
        if (g->rank != 0) t->norm = xmalloc((size_t)(t->rows ? t->rows : 1) * sizeof *t->norm);
        for (int64_t at = 0; at < t->rows; at += INT_MAX / 4) {
            int64_t n = t->rows - at < INT_MAX / 4 ? t->rows - at : INT_MAX / 4;
            MPI_CHECK(MPI_Bcast(t->norm + at, (int)n, MPI_INT32_T, 0, g->world_comm));
        }
    }
}

void mc_eval_init(struct mc_eval *e, const struct config *cfg, const char *ckpt, struct tokenizer *run_tok,
                  const struct run_shape *s, const struct grid *g, int V, int T)
{
    memset(e, 0, sizeof *e);
    if (!cfg->eval.tasks[0]) return;
    char err[4096] = "";
    int bad = g->rank == 0 && read_tasks(e, cfg, ckpt, run_tok, V, T, err, sizeof err) != 0;
    if (mpi_agree_error(g->world_comm, bad, err, sizeof err) != 0) {
        if (g->rank == 0) fprintf(stderr, "error: %s\n", err);
        exit_all(EXIT_ERROR);
    }
    send_tasks(e, g);
    e->G = cfg->train.batch_size;
    e->T = T;
    e->slow = cfg->diag.slow_rank == g->rank ? cfg->diag.slow_seconds : 0; /* testing aid: a straggler */
    e->score = xcalloc((size_t)e->ntask, sizeof *e->score);
    e->rows = xcalloc((size_t)e->G * (size_t)(T + 1), sizeof *e->rows);
    e->losses = xcalloc((size_t)e->G * (size_t)T, sizeof *e->losses);
    e->data = data_open_rows(e->rows, (uint64_t)e->G, V, T);
    pp_exec_init_forward(&e->exec, s->sched, s->schedule_file, g, s->v, s->n_micro);
    e->exec.token_losses = e->losses + (size_t)g->dp_rank * (size_t)(e->G / g->dp) * (size_t)T;
}

/* The next choice after (*ex, *c). */
static void next_choice(const struct mc_task *t, int64_t *ex, int *c)
{
    if (++*c == mc_choices(t, *ex)) ++*ex, *c = 0;
}

/* The log-probability of each choice of t into lp[rows], batch by batch.
 * 0, or 1 where a stop was asked before a batch (the ranks agree on it at
 * each). */
static int score_choices(struct mc_eval *e, const struct mc_task *t, struct model *m, struct comm *c, double *lp,
                         const volatile sig_atomic_t *stop)
{
    const int T = e->T;
    const size_t S = (size_t)T + 1;
    struct timers scratch; /* (its forwards are no step's) */
    memset(&scratch, 0, sizeof scratch);
    /* a mixture of experts scores dropless, as triad sample runs: under a
     * capacity a row's experts would depend on the rows before it in its
     * micro-batch (other choices, the zeros after them), so a choice's
     * score would change with the batch and the grid (the buffers are
     * sized for the dropless bound) */
    double capacity = m->d.capacity;
    m->d.capacity = 0;
    int64_t ex = 0;
    int ch = 0, asked = 0;
    for (int64_t first = 0; first < t->rows; first += e->G) {
        if ((asked = eval_stop_agreed(c, stop))) break;
        if (e->slow > 0) pause_for(e->slow);
        int64_t nb = t->rows - first < e->G ? t->rows - first : e->G, ex0 = ex;
        int ch0 = ch, nctx, n;
        memset(e->rows, 0, (size_t)e->G * S * sizeof *e->rows);
        for (int64_t j = 0; j < nb; j++, next_choice(t, &ex, &ch)) { /* the context, then the choice */
            const int32_t *ctx = mc_context(t, ex, &nctx), *ids = mc_choice(t, ex, ch, &n);
            memcpy(e->rows + (size_t)j * S, ctx, (size_t)nctx * sizeof *ctx);
            memcpy(e->rows + (size_t)j * S + nctx, ids, (size_t)n * sizeof *ids);
        }
        memset(e->losses, 0, (size_t)nb * T * sizeof *e->losses);
        pp_exec_step(&e->exec, m, c, e->data, 0, e->G, 0.0f, &scratch);
        flight_progress(); /* the hang watchdog: each batch has the step's timeout */
        if (c->grid->pp > 1) comm_allreduce_sum_host_f32(c, CG_PP, e->losses, (size_t)nb * T);
        comm_allreduce_sum_host_f32(c, CG_DP, e->losses, (size_t)nb * T);
        ex = ex0, ch = ch0;
        for (int64_t j = 0; j < nb; j++, next_choice(t, &ex, &ch)) { /* its tokens are the targets of nctx-1 .. */
            mc_context(t, ex, &nctx);
            mc_choice(t, ex, ch, &n);
            const float *l = e->losses + (size_t)j * T + (size_t)(nctx - 1);
            double sum = 0;
            for (int k = 0; k < n; k++) sum += l[k];
            lp[first + j] = -sum;
        }
    }
    m->d.capacity = capacity;
    return asked;
}

int mc_eval_run(struct mc_eval *e, struct model *m, struct comm *c, FILE *scores, const volatile sig_atomic_t *stop)
{
    for (int i = 0; i < e->ntask; i++) {
        const struct mc_task *t = &e->task[i];
        double *lp = xmalloc((size_t)(t->rows ? t->rows : 1) * sizeof *lp);
        if (score_choices(e, t, m, c, lp, stop)) {
            free(lp);
            return 1;
        }
        int64_t right = 0, right_norm = 0, r = 0;
        for (int64_t ex = 0; ex < t->n; ex++) {
            int nch = mc_choices(t, ex), best = 0, best_norm = 0, n;
            double mean, top_mean = 0;
            for (int k = 0; k < nch; k++) {
                mc_choice(t, ex, k, &n);
                /* (a choice of no characters, whitespace alone: -inf, as the harness's ll / 0) */
                mean = t->norm[r + k] > 0 ? lp[r + k] / t->norm[r + k] : -INFINITY;
                if (lp[r + k] > lp[r + best]) best = k;
                if (k == 0 || mean > top_mean) best_norm = k, top_mean = mean;
                if (scores)
                    fprintf(scores, "%s\t%lld\t%d\t%d\t%d\t%.17g\n", e->name[i], (long long)ex, k, mc_label(t, ex), n,
                            lp[r + k]);
            }
            right += best == mc_label(t, ex);
            right_norm += best_norm == mc_label(t, ex);
            r += nch;
        }
        free(lp);
        e->score[i] = (struct task_score){.name = e->name[i], .acc = (double)right / (double)t->n,
                                          .acc_norm = (double)right_norm / (double)t->n, .examples = t->n};
    }
    return 0;
}

void mc_eval_free(struct mc_eval *e)
{
    for (int i = 0; i < e->ntask; i++) mc_task_free(&e->task[i]);
    free(e->task);
    free(e->name);
    free(e->score);
    free(e->rows);
    free(e->losses);
    if (e->data) data_close(e->data);
    if (e->ntask) pp_exec_free(&e->exec);
    memset(e, 0, sizeof *e);
}
