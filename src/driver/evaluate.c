/* evaluate.c -- `triad eval CKPT`: a checkpoint's model judged on any grid (evaluate.h). */
#include "evaluate.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "comm.h"
#include "data.h"
#include "device.h"
#include "eval.h"
#include "exit_status.h"
#include "file.h"
#include "hf.h"
#include "log.h"
#include "mc_eval.h"
#include "model.h"
#include "pipeline_exec.h"
#include "shape.h"
#include "timers.h"
#include "tokenizer.h"
#include "topo.h"
#include "train.h"

/* Rank 0: the checkpoint's deck, its grid reset, the overrides on top,
 * checked for world ranks.  0, or -1 with the error printed. */
static int eval_deck(struct config *cfg, const char *ckpt, int noverride, char **overrides, int world)
{
    char err[1024];
    if (ckpt_read_config(ckpt, cfg, err, sizeof err) != 0) {
        fprintf(stderr, "error: triad eval %s: %s\n", ckpt, err);
        return -1;
    }
    static const char *const layout[] = {"parallel.tp=1", "parallel.cp=1", "parallel.pp=1", "parallel.dp=0",
                                         "parallel.ep=1", "parallel.virtual_stages=1", "parallel.schedule=1f1b",
                                         "parallel.schedule_file=''", "parallel.sequence_parallel=.false.",
                                         "parallel.zero_stage=0", "train.micro_batch_size=0",
                                         CONFIG_TRAINING_AIDS_OFF};
    int64_t trained_mb = cfg->train.micro_batch_size, trained_dp, trained_cp;
    ckpt_trained_grid(ckpt, &trained_dp, &trained_cp);
    if (trained_mb == 0 && trained_dp > 0) trained_mb = cfg->train.batch_size / trained_dp; /* (batch_size / dp) */
    int mb_given = config_override_given(noverride, overrides, "train.micro_batch_size");
    struct deck_error de;
    memset(&de, 0, sizeof de);
    for (size_t i = 0; i < sizeof layout / sizeof layout[0]; i++) config_override(cfg, layout[i], &de);
    int rc = 0;
    for (int i = 0; rc == 0 && i < noverride; i++) rc = config_override(cfg, overrides[i], &de);
    if (rc != 0) {
        config_error_print(stderr, &de);
        return -1;
    }
    /* A mixture's capacity is per micro-batch and per cp rank's positions
     * (docs/moe.md): the training's micro-batch, where it divides this grid's
     * share of the batch and the overrides leave it, and the training's cp
     * give the held-out loss training computed.  (Without a capacity the
     * loss is the same at any micro-batch and cp.) */
    int64_t dp = shape_dp(cfg, world);
    if (cfg->model.n_expert > 0 && cfg->train.moe_capacity > 0 && !mb_given && trained_mb > 0 && dp > 0) {
        if (cfg->train.batch_size % (dp * trained_mb) == 0) cfg->train.micro_batch_size = trained_mb;
        else
            fprintf(stderr, "note: triad eval %s: the training's micro-batch of %lld sequences does not divide this "
                    "grid's %lld sequences per replica: with moe_capacity = %g the held-out loss is that of "
                    "micro-batches of %lld (set train.micro_batch_size to choose)\n", ckpt, (long long)trained_mb,
                    (long long)(cfg->train.batch_size / dp), cfg->train.moe_capacity,
                    (long long)(cfg->train.batch_size / dp));
    }
    if (cfg->model.n_expert > 0 && cfg->train.moe_capacity > 0 && trained_cp > 0 && cfg->parallel.cp != trained_cp)
        fprintf(stderr, "note: triad eval %s: with moe_capacity = %g each rank's positions route within the capacity: "
                "trained on cp = %lld, evaluated on cp = %lld, the held-out loss is not the training's (parallel.cp = "
                "%lld gives it)\n", ckpt, cfg->train.moe_capacity, (long long)trained_cp,
                (long long)cfg->parallel.cp, (long long)trained_cp);
    if (cfg->parallel.zero_stage != 0) {
        fprintf(stderr, "error: triad eval: parallel.zero_stage = %lld, but an evaluation has no optimizer state or "
                "gradients to shard, and each replica holds the whole model\n  hint: leave parallel.zero_stage at 0\n",
                (long long)cfg->parallel.zero_stage);
        return -1;
    }
    if (!cfg->data.val_path[0] && !cfg->eval.tasks[0]) {
        fprintf(stderr, "error: triad eval %s: nothing to evaluate: data.val_path and eval.tasks are both empty\n"
                "  hint: data.val_path='held_out.bin' (of data.kind: text, tokens or indexed) for the loss, "
                "eval.tasks='hellaswag_val.bin' for a multiple-choice task\n", ckpt);
        return -1;
    }
    cfg->train.eval_every = cfg->data.val_path[0] ? 1 : 0; /* one evaluation of each, as a training run's */
    cfg->train.mc_eval_every = cfg->eval.tasks[0] ? 1 : 0;
    if (cfg->data.kind_id != DATA_KIND_synthetic && !cfg->data.path[0]) /* (the training data, never read here) */
        snprintf(cfg->data.path, sizeof cfg->data.path, "%s", cfg->data.val_path);
    config_resolve(cfg);
    if (config_validate(cfg, world, &de) != 0) {
        if (!de.file[0]) snprintf(de.file, sizeof de.file, "triad eval %s", ckpt);
        config_error_print(stderr, &de);
        return -1;
    }
    return 0;
}

/* Rank 0: the UTF-8 bytes the held-out targets stand for: text's bytes
 * are its tokens; tokens decode through tok (special tokens, such as the
 * documents' separators, have none), a document at a time: each from the
 * id triad tokenize puts before it, as the library decodes a document's
 * ids alone (a tokenizer that marks where a word starts, SentencePiece's
 * U+2581, strips the mark of a document's first word: it is no byte of
 * the text).  -1 without a tokenizer. */
static int64_t target_bytes(const struct eval *ev, const struct config *cfg, const struct tokenizer *tok, int T)
{
    int64_t n = ev->batches * ev->G;
    if (cfg->data.kind_id == DATA_KIND_text) return n * T;
    if (!tok) return -1;
    int32_t *ids = xmalloc((size_t)n * T * sizeof *ids), *seq = xmalloc((size_t)(T + 1) * sizeof *seq);
    for (int64_t i = 0; i < n; i++) { /* the unshuffled windows: sample i is window i */
        data_sample(ev->data, (uint64_t)i, seq);
        memcpy(ids + (size_t)i * T, seq + 1, (size_t)T * sizeof *ids);
    }
    int32_t doc = tok_doc(tok);
    size_t all = (size_t)n * T, total = 0;
    int rc = 0;
    for (size_t at = 0, end; rc == 0 && at < all; at = end) { /* [at, end): one document's ids (or its end) */
        for (end = at + 1; end < all && ids[end] != doc; end++) continue;
        char *text = NULL, err[256];
        size_t bytes = 0;
        rc = tok_decode(tok, ids + at, end - at, 1, &text, &bytes, err, sizeof err);
        free(text);
        total += bytes;
    }
    free(ids), free(seq);
    return rc ? -1 : (int64_t)total;
}

/* The held-out loss of data.val_path, its perplexity and bits per byte.
 * Collective.  1 where a stop (a signal) gave it up, else 0. */
static int held_out(const struct config *cfg, const struct run_shape *s, const struct grid *g, struct model *m,
                     struct comm *c, const struct tokenizer *tok)
{
    struct eval ev;
    eval_init(&ev, cfg, s, g, m->d.V, m->d.T);
    struct timers scratch;
    memset(&scratch, 0, sizeof scratch);
    double t0 = wtime();
    int64_t tokens;
    double loss = eval_run(&ev, m, c, &scratch, &tokens, train_stop_signal()), dt = wtime() - t0;
    if (tokens == 0) { /* (a stop) */
        eval_free(&ev);
        return 1;
    }
    if (g->rank == 0) {
        int64_t bytes = target_bytes(&ev, cfg, tok, m->d.T);
        char bpb[96] = "bits per byte - (no tokenizer for the tokens: set eval.tokenizer)";
        if (bytes > 0)
            snprintf(bpb, sizeof bpb, "bits per byte %.6f (%lld bytes)", loss * (double)tokens / (log(2.0) * (double)bytes),
                     (long long)bytes);
        printf("held-out %s: loss %.9f | perplexity %.6f | %s | %lld tokens (%.2f s)\n", cfg->data.val_path, loss,
               exp(loss), bpb, (long long)tokens, dt);
        char hint[160]; /* (the batch size of triad eval's is free: the training's is not) */
        snprintf(hint, sizeof hint, "a train.batch_size that divides %llu takes them all",
                 (unsigned long long)data_windows(ev.data));
        eval_note_left_out(&ev, cfg, stderr, hint);
    }
    eval_free(&ev);
    return 0;
}

#define SCORES_HEADER "# task\texample\tchoice\tlabel\ttokens\tlogprob\n"

/* eval.scores on rank 0: its lines gathered in memory (mem: a few MB for
 * tens of thousands of choices), written at the end to a temporary file of
 * a name of its own beside path (path.tmp.XXXXXX: one a run that was
 * killed leaves blocks no other) and renamed over path; stdout, a device
 * or a pipe written as it is (fd, open from the start). */
struct scores {
    FILE *mem;
    char *buf;
    size_t len;
    int fd; /* -1: a regular file, written at the end */
};

/* Open s for path, where path is new, empty or an earlier scores file (its
 * first line the header), which the rename at the end replaces, in a
 * folder that takes files; or stdout, a device or a pipe (/dev/stdout, a
 * FIFO, bash's >(...)).  Anything else there (the checkpoint, a task
 * file) is refused and left as it is.  0, or -1 with msg and hint. */
static int scores_open(struct scores *s, const char *path, char *msg, size_t msglen, const char **hint)
{
    struct stat sb, out;
    *hint = "name a new file in a writable folder";
    s->fd = -1;
    int there = stat(path, &sb) == 0, e = errno;
    if (!there && e != ENOENT) {
        snprintf(msg, msglen, "eval.scores = '%s': %s", path, strerror(e));
        return -1;
    }
    int is_stdout = there && fstat(STDOUT_FILENO, &out) == 0 && out.st_dev == sb.st_dev && out.st_ino == sb.st_ino;
    int stream = there && (is_stdout || S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode));
    if (stream) { /* (stdout's own descriptor where it is stdout, redirected to a file too: its offset) */
        if ((s->fd = is_stdout ? dup(STDOUT_FILENO) : open(path, O_WRONLY)) < 0) {
            snprintf(msg, msglen, "cannot write eval.scores = '%s': %s", path, strerror(errno));
            return -1;
        }
    } else {
        if (there) {
            char line[sizeof SCORES_HEADER] = "";
            FILE *old = S_ISREG(sb.st_mode) ? fopen(path, "rb") : NULL;
            size_t got = old ? fread(line, 1, sizeof line - 1, old) : 0;
            if (old) fclose(old);
            int scores = got == sizeof SCORES_HEADER - 1 && memcmp(line, SCORES_HEADER, got) == 0;
            if (!scores && !(S_ISREG(sb.st_mode) && sb.st_size == 0)) {
                snprintf(msg, msglen, "eval.scores = '%s' exists and is not a scores file of triad eval (%s): it is "
                         "left as it is", path, S_ISREG(sb.st_mode) ? "its first line is not the header triad eval "
                         "writes, '# task ...'" : "a folder");
                *hint = "name a new file, or an earlier scores file";
                return -1;
            }
        }
        char dir[CONFIG_STRLEN + 2];
        const char *slash = strrchr(path, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1, slash ? path : ".");
        int refused = file_write_probe(dir);
        if (refused) {
            snprintf(msg, msglen, "cannot write eval.scores = '%s': the folder %s takes no files (%s)", path, dir,
                     refused == ENOENT ? "it does not exist" : file_write_words(refused));
            return -1;
        }
    }
    if (!(s->mem = open_memstream(&s->buf, &s->len)) || fputs(SCORES_HEADER, s->mem) < 0) {
        snprintf(msg, msglen, "out of memory for eval.scores");
        if (s->mem) fclose(s->mem), free(s->buf);
        if (s->fd >= 0) close(s->fd);
        return -1;
    }
    return 0;
}

/* Write all of buf to fd: 0, or errno. */
static int write_all(int fd, const char *buf, size_t len)
{
    for (size_t at = 0; at < len;) {
        ssize_t w = write(fd, buf + at, len - at);
        if (w < 0 && errno != EINTR) return errno;
        if (w > 0) at += (size_t)w;
    }
    return 0;
}

/* The lines written where keep (not a stop): a regular file through its
 * temporary, flushed to the disk and renamed over path (the temporary
 * removed where that fails).  0, or -1 with msg. */
static int scores_close(struct scores *s, const char *path, int keep, char *msg, size_t msglen)
{
    int e = fclose(s->mem) != 0 ? ENOMEM : 0;
    fflush(stdout); /* (what was printed before comes first, where the scores go to stdout) */
    if (s->fd >= 0) {
        if (!e && keep) e = write_all(s->fd, s->buf, s->len);
        if (close(s->fd) != 0 && !e && keep) e = errno;
    } else if (!e && keep) {
        char tmp[CONFIG_STRLEN + 16];
        snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
        int fd = mkstemp(tmp);
        if (fd < 0) e = errno;
        else {
            e = write_all(fd, s->buf, s->len);
            mode_t mask = umask(0); /* (mkstemp's 0600 made what fopen would: 0666 less the umask) */
            umask(mask);
            if (!e && (fchmod(fd, 0666 & ~mask) != 0 || fsync(fd) != 0)) e = errno;
            if (close(fd) != 0 && !e) e = errno;
            if (!e && rename(tmp, path) != 0) e = errno;
            if (e) unlink(tmp);
        }
    }
    free(s->buf);
    if (e)
        snprintf(msg, msglen, "writing eval.scores = '%s' failed (%s): nothing of it is left, an earlier file "
                 "there is kept", path, strerror(e));
    return e ? -1 : 0;
}

/* Each task's acc and acc_norm; eval.scores gets every choice.  Collective.
 * 1 where a stop (a signal) gave the tasks up, else 0. */
static int tasks(const struct config *cfg, const char *ckpt, const struct run_shape *s, const struct grid *g,
                 struct model *m, struct comm *c)
{
    struct mc_eval mc;
    mc_eval_init(&mc, cfg, ckpt, NULL, s, g, m->d.V, m->d.T);
    struct scores sc;
    char msg[2 * CONFIG_STRLEN + 256] = "";
    const char *hint = "";
    int scores = g->rank == 0 && cfg->eval.scores[0];
    if (scores && scores_open(&sc, cfg->eval.scores, msg, sizeof msg, &hint) != 0) scores = 0;
    die_all_if(g->world_comm, msg[0] != '\0', msg, hint);
    double t0 = wtime();
    int stopped = mc_eval_run(&mc, m, c, scores ? sc.mem : NULL, train_stop_signal());
    double dt = wtime() - t0;
    int bad = scores && scores_close(&sc, cfg->eval.scores, !stopped, msg, sizeof msg) != 0;
    die_all_if(g->world_comm, bad, msg, "free space where eval.scores points, or name another folder");
    if (stopped) {
        mc_eval_free(&mc);
        return 1;
    }
    for (int i = 0; g->rank == 0 && i < mc.ntask; i++)
        printf("task %s: acc %.6f | acc_norm %.6f | %lld examples, %lld choices\n", mc.name[i], mc.score[i].acc,
               mc.score[i].acc_norm, (long long)mc.task[i].n, (long long)mc.task[i].rows);
    if (g->rank == 0)
        printf("tasks scored in %.2f s%s%s\n", dt, scores ? "; each choice's log-probability in " : "",
               scores ? cfg->eval.scores : "");
    mc_eval_free(&mc);
    return 0;
}

int evaluate_checkpoint(const char *ckpt, int noverride, char **overrides)
{
    int rank, world;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
    struct config cfg;
    int rc = rank == 0 ? eval_deck(&cfg, ckpt, noverride, overrides, world) : 0;
    MPI_CHECK(MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (rc != 0) return EXIT_ERROR;
    MPI_CHECK(MPI_Bcast(&cfg, (int)sizeof cfg, MPI_BYTE, 0, MPI_COMM_WORLD));
    if (cfg.train.threads > 0) omp_set_num_threads((int)cfg.train.threads);

    char why[1024] = "";
    const struct device *k = device_for(cfg.train.device_id == TRAIN_DEVICE_cuda, cfg.diag.stage_through_host, why,
                                        sizeof why);
    die_all_if(MPI_COMM_WORLD, !k, why, "the CUDA backend is loaded only for train.device = 'cuda' (docs/cuda.md)");
    struct run_shape s;
    run_shape_init(&s, &cfg, world, device_staged(k));
    struct grid g;
    grid_init(&g, s.tp, s.cp, s.dp, s.pp, s.ep);
    struct device_options dopt = {.allow_shared = (int)cfg.train.share_gpus, .tf32 = (int)cfg.train.tf32};
    die_all_if(g.world_comm, device_open(k, g.world_comm, &dopt, why, sizeof why) < 0, why,
               DEVICE_OPEN_HINT);
    /* the model as the schedule's forwards need it, the checkpoint's weights in it */
    struct pp_exec forwards;
    struct model_buffers nb = pp_exec_init_forward(&forwards, s.sched, s.schedule_file, &g, s.v, s.n_micro);
    pp_exec_free(&forwards);
    struct model_dims d;
    model_dims_init(&d, &cfg, &s, &g);
    struct model m;
    model_init(&m, &d, k, s.micro_batch, nb, (uint64_t)cfg.train.seed);
    struct comm c;
    comm_init(&c, &g);
    comm_use_device(&c, k);
    struct ckpt_state st;
    memset(&st, 0, sizeof st);
    int loaded = ckpt_load_model_counters(ckpt, &m, &st, &g, why, sizeof why);
    if (loaded != 0)
        die_all(loaded == -3 ? "check the file system from that rank's node, then run it again"
                             : "triad eval reads a triad checkpoint (run_dir/ckpt_<step>.h5) of any grid",
                "triad eval %s: %s", ckpt, why);
    if (d.prec != PREC_FP32) k->lp_round(d.prec, m.params_mem, m.flat); /* what a run of that precision computes with */

    /* the tokenizer of bits per byte (tokens decoded to text): rank 0's */
    struct tokenizer *tok = NULL;
    if (rank == 0 && cfg.data.val_path[0] && cfg.data.kind_id != DATA_KIND_text)
        tok = hf_open_tokenizer(cfg.eval.tokenizer, &cfg, ckpt, d.V, why, sizeof why);
    else why[0] = '\0';
    die_all_if(g.world_comm, why[0] != '\0', why, "eval.tokenizer names the model's tokenizer (a tokenizer.json or "
               "its folder), or 'none'");
    char desc[256];
    grid_describe(&g, desc, sizeof desc);
    log_info("triad eval %s: step %lld, %lld tokens trained on; %s; device %s; %s, %d micro-batch(es) of %d "
             "sequences per replica\n", ckpt, (long long)st.step, (long long)st.tokens, desc, k->name,
             cfg.train.precision, s.n_micro, s.micro_batch);
    int stopped = cfg.data.val_path[0] && held_out(&cfg, &s, &g, &m, &c, tok);
    tok_close(tok);
    if (!stopped && cfg.eval.tasks[0]) stopped = tasks(&cfg, ckpt, &s, &g, &m, &c);
    int sig = stopped ? (int)*train_stop_signal() : 0; /* (the ranks agreed to stop: the signal some rank had) */
    if (stopped) comm_allreduce_max_int(&c, CG_WORLD, &sig, 1);
    if (stopped && rank == 0)
        fprintf(stderr, "triad eval: stopped by signal %d before the end: the results are not complete%s (status 3: "
                "run it again, or a requeued job does)\n", sig, cfg.eval.scores[0] ? ", and nothing of eval.scores "
                "is written" : "");
    fflush(stdout);
    model_free(&m);
    comm_free(&c);
    grid_free(&g);
    if (k->close) k->close();
    return stopped ? EXIT_STOPPED : EXIT_DONE;
}
