/* main.c -- triad: train a GPT across tp x dp x pp MPI ranks.
 *
 *   init MPI -> read the deck -> the process grid -> train -> finalize
 *
 * `triad DECK` trains (train); the subcommands that only look at a deck
 * (check, schedule, plan) and the options that need none (--help,
 * --version, --doc) are the tables below main's helpers; `triad export`
 * turns a checkpoint into a Hugging Face folder, `triad sample` generates
 * from one, `triad eval` judges one. */
#include <dirent.h>
#include <errno.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ckpt_name.h"
#include "config.h"
#include "cpu.h"
#include "evaluate.h"
#include "hf.h"
#include "pipeline.h"
#include "plan.h"
#include "sample.h"
#include "shape.h"
#include "tokenize.h"
#include "log.h"
#include "topo.h"
#include "train.h"
#include "version.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: mpirun -n N triad DECK [group.key=value ...]\n"
            "   or: triad check DECK [world=N] [group.key=value ...]\n"
            "   or: triad schedule DECK [world=N] [group.key=value ...]\n"
            "   or: triad plan DECK [world=N] [group.key=value ...]\n"
            "   or: triad export CKPT DIR [export.dtype=fp32|bf16|fp16]\n"
            "   or: mpirun -n N triad sample CKPT [sample.key=value ...]\n"
            "   or: mpirun -n N triad eval CKPT [group.key=value ...]\n"
            "   or: mpirun -n N triad tokenize tokenize.tokenizer=T tokenize.input=GLOB tokenize.output=PREFIX\n"
            "   or: triad --doc | --help | --version\n"
            "\n"
            "  DECK         train as the deck says, on N = tp * cp * dp * pp ranks\n"
            "  check        validate the deck for N ranks (world=N; else the launched ranks, or the\n"
            "               deck's own grid on one process) and print the effective deck\n"
            "  schedule     print the pipeline schedule (F, B, W) and its bubble, also with the FLOPs'\n"
            "               and a finished run's own times\n"
            "  plan         memory per rank, fit, advice, traffic and bubble, without launching\n"
            "  export       write checkpoint CKPT as a Hugging Face model folder DIR (config.json,\n"
            "               model.safetensors), whatever grid wrote it\n"
            "  sample       generate from checkpoint CKPT (&sample: prompt, prompt_tokens or prompt_file,\n"
            "               max_new_tokens, temperature, top_k, top_p, seed, batch_size, tokenizer, stop_ids) on\n"
            "               the grid of parallel.tp, pp and dp (none given: tp = N, or the most ranks the model\n"
            "               divides, the rest dp), on train.device\n"
            "  eval         judge checkpoint CKPT on the launched ranks, any grid (parallel.tp, cp, pp; dp takes\n"
            "               the rest): the held-out loss of data.val_path, its perplexity and bits per byte; the\n"
            "               multiple-choice tasks of eval.tasks (llm.c eval files, JSON Lines): acc, acc_norm\n"
            "  tokenize     text files (&tokenize: format text or jsonl) through a model's tokenizer (tokenizer.json,\n"
            "               or GPT-2's vocab.json + merges.txt) into llm.c token shards (uint16, or uint32 for a\n"
            "               vocabulary over 65536); N ranks share the work\n"
            "  --doc        print the input reference (docs/input.md)\n"
            "  --version    the build: version, commit, compiler, SIMD path, BLAS, MPI, HDF5, CUDA\n"
            "\n"
            "DECK is a Fortran namelist (&model, &parallel, &train, &data, &io, &eval, &export, &tokenize, &sample,\n"
            "&diag); any key can be overridden on the command line, e.g. `triad input/demo.nml train.steps=100`.\n"
            "The number of ranks must equal tp * cp * dp * pp (dp = 0 in the deck takes the rest).\n"
            "Exit status: 0 done, 1 error, 3 stopped cleanly (requeue: training by a signal, io.max_seconds or the\n"
            "stop file, with a checkpoint; tokenize, eval and export by a signal, nothing of their output left),\n"
            "4 hung (diag.hang_timeout; run_dir/hang.rank*.txt).\n"
            "Environment: TRIAD_ISA=generic|avx2|avx512|avx512bf16 forces a lower SIMD path (--version says which runs);\n"
            "TRIAD_GEMM=blas multiplies fp32 products with the BLAS instead of triad's kernels.\n"
            "Reference: docs/input.md; files: docs/formats.md.\n");
}

/* Does this deck resume a run: io.restart naming a checkpoint, or 'auto'
 * with one in io.run_dir? */
static int resuming(const struct config *cfg)
{
    if (!cfg->io.restart[0]) return 0;
    if (!config_is(cfg->io.restart, "auto")) return 1;
    DIR *d = opendir(cfg->io.run_dir); /* (a checkpoint's name as restart = 'auto' takes it: ckpt_<step>.h5) */
    int any = 0;
    int64_t step;
    for (struct dirent *e; d && !any && (e = readdir(d));) any = ckpt_step_of(e->d_name, &step) == 0;
    if (d) closedir(d);
    return any;
}

/* Rank 0 reads and validates for *world ranks (0: the deck's own grid,
 * tp * cp * pp * dp with dp = 0 taken as 1, which *world then holds); everyone
 * gets the result.  On an error rank 0 prints it once and all ranks exit
 * with status 1. */
static void read_config(struct config *cfg, const char *path, int noverride, char **overrides, int *world, int plan)
{
    struct deck_error err;
    memset(&err, 0, sizeof err);
    int rank = 0, rc = 0;
    if (mpi_live()) MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (rank == 0) {
        config_defaults(cfg);
        rc = config_read_file(cfg, path, &err);
        for (int i = 0; rc == 0 && i < noverride; i++) rc = config_override(cfg, overrides[i], &err);
        if (rc == 0) config_resolve(cfg);
        if (rc == 0 && *world == 0) {
            int64_t w = cfg->parallel.tp * cfg->parallel.cp * cfg->parallel.pp * (cfg->parallel.dp ? cfg->parallel.dp : 1);
            *world = w > 0 && w <= INT32_MAX ? (int)w : 0;
        }
        if (rc == 0 && (rc = plan ? plan_validate(cfg, *world, &err) : config_validate(cfg, *world, &err)) == 0 &&
            config_check_unread(cfg, &err) != 0) {
            if (resuming(cfg)) /* (a campaign's requeued job is not stopped by a rule newer than its deck) */
                fprintf(stderr, "warning: %s: %s\n  hint: %s (a run that resumes from a checkpoint goes on)\n", path,
                        err.what, err.hint);
            else rc = -1;
        }
        if (rc != 0 && !err.file[0])
            snprintf(err.file, sizeof err.file, "%s", path); /* cross-checks have no line */
        if (rc != 0) config_error_print(stderr, &err);
    }
    if (mpi_live()) MPI_CHECK(MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (rc != 0) exit_all(EXIT_ERROR);
    if (!mpi_live()) return;
    MPI_CHECK(MPI_Bcast(cfg, (int)sizeof *cfg, MPI_BYTE, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Bcast(world, 1, MPI_INT, 0, MPI_COMM_WORLD));
}

/* `triad schedule`: the time x rank table of this rank's pipeline. */
static int print_schedule(const struct config *cfg, int world)
{
    struct run_shape s;
    run_shape_init(&s, cfg, world, 0);
    int dp = s.dp, m = s.n_micro, pp = s.pp, v = s.v;
    /* F = B = W = 1: a fused backward (input and weight gradients) takes twice the forward */
    struct pp_sim_opts o = {.t_fwd = 1, .t_bwd = 1, .send = PP_SEND_RENDEZVOUS, .lookahead = 1, .t_wgt = 1};
    struct pp_sim sim;
    char err[512];
    if (pp_simulate_schedule(s.sched, s.schedule_file, pp, v, m, &o, &sim, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        return EXIT_ERROR;
    }
    char cp[96] = "";
    if (s.cp > 1) /* the cp ranks of a replica run the same schedule, in step: ring attention pairs them in every layer */
        snprintf(cp, sizeof cp, "; cp = %d ranks run each stage's actions together (ring attention)", s.cp);
    printf("schedule %s%s%s%s: pp = %d, virtual_stages = %d, %d micro-batches per replica (dp = %d)%s\n"
           "F = forward, B = backward (taking twice the forward; where a W follows, the input gradient alone, "
           "as long as the forward), W = weight gradient, . = idle\n\n",
           cfg->parallel.schedule, s.schedule_file ? " (" : "", s.schedule_file ? s.schedule_file : "",
           s.schedule_file ? ")" : "", pp, v, m, dp, cp);
    pp_print_table(stdout, &sim, 0);
    pp_sim_free(&sim);
    plan_print_schedule_costs(stdout, cfg, world);
    return EXIT_DONE;
}

/* `triad plan`: the memory, traffic and bubble of a run on world ranks, without launching it. */
static int print_plan(const struct config *deck, int world)
{
    struct config *cfg = xmalloc(sizeof *cfg);
    *cfg = *deck;
    char err[512], source[256], why[512];
    double avail = plan_memory_available(cfg, world, source, sizeof source);
    if (cfg->train.memory_gb <= 0 && avail > 0)
        snprintf(source + strlen(source), sizeof source - strlen(source),
                 ": all ranks on this machine; set train.memory_gb for another");
    if (cfg->train.pack_activations < 0 && cfg->train.precision_id != TRAIN_PRECISION_fp32) {
        cfg->train.pack_activations = plan_pack_choice(cfg, world, 0, avail, why, sizeof why);
        printf("train.pack_activations unset: %s, the stored layers %s\n\n",
               cfg->train.pack_activations ? ".true." : ".false.", why);
    }
    struct plan p;
    int status = EXIT_DONE;
    if (plan_compute(&p, cfg, world, 0, err, sizeof err) != 0) {
        fprintf(stderr, "error: %s\n", err);
        status = EXIT_ERROR;
    } else {
        plan_print(stdout, &p, cfg, avail, source);
        plan_free(&p);
    }
    free(cfg);
    return status;
}

static char *echo_deck(const struct config *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) die("open_memstream failed");
    config_echo(f, cfg);
    fclose(f);
    return text;
}

/* `triad check`: the deck is valid for world ranks; print the effective deck. */
static int check_deck(const struct config *cfg, int world)
{
    char *deck = echo_deck(cfg);
    struct run_shape s;
    run_shape_init(&s, cfg, world, 0);
    if (s.cp > 1)
        log_info("%s! deck valid for %d rank(s): tp %d x cp %d x dp %d x pp %d\n", deck, world, s.tp, s.cp, s.dp, s.pp);
    else
        log_info("%s! deck valid for %d rank(s): tp %d x dp %d x pp %d\n", deck, world, s.tp, s.dp, s.pp);
    free(deck);
    return EXIT_DONE;
}

/* The subcommands that look at a deck without training: run on rank 0, for
 * world= ranks if given, else (deck_grid) the deck's own grid, or (check)
 * the launched ranks, the deck's own grid on one process. */
static const struct subcommand {
    const char *name;
    int deck_grid;          /* without world=: the deck's grid even when launched on several ranks */
    int planning;           /* validated as a plan: any device, built or not */
    int (*run)(const struct config *cfg, int world);
} subcommands[] = {
    {"check", 0, 0, check_deck},
    {"schedule", 1, 0, print_schedule},
    {"plan", 1, 1, print_plan},
};

/* The defaults with the overrides argv[first..argc): 0, or -1 with the
 * error printed (by rank 0). */
static int read_options(struct config *cfg, int argc, char **argv, int first, int rank)
{
    struct deck_error err;
    config_defaults(cfg);
    for (int i = first; i < argc; i++)
        if (config_override(cfg, argv[i], &err) != 0) {
            if (rank == 0) config_error_print(stderr, &err);
            return -1;
        }
    return 0;
}

/* The overrides argv[first..argc) name only keys of `read` (a list of
 * "group." for a whole group or "group.key", NULL-ended) that `command`
 * reads: 0, or -1 with the error printed (by rank 0).  The rest of a deck
 * is the checkpoint's (tokenize has none), so any other key would change
 * nothing. */
static int only_read_keys(int argc, char **argv, int first, const char *const *read, const char *command, int rank)
{
    const char *why = strcmp(command, "tokenize") ? "the model and the rest of the deck are the checkpoint's"
                                                  : "it reads its own group alone";
    char a[2 * CONFIG_STRLEN + 2];
    for (int i = first; i < argc; i++) {
        config_override_name(argv[i], a, sizeof a);
        size_t n = strlen(a);
        int ok = 0;
        for (int j = 0; read[j] && !ok; j++) {
            size_t k = strlen(read[j]);
            ok = read[j][k - 1] == '.' ? n > k && !strncmp(a, read[j], k) : !strcmp(a, read[j]);
        }
        if (ok) continue;
        if (rank == 0) {
            fprintf(stderr, "error: triad %s: %.*s is not read by triad %s: %s, so it would change nothing\n  hint: "
                            "remove it; triad %s takes ", command, (int)n, a, command, why, command);
            for (int j = 0; read[j]; j++)
                fprintf(stderr, "%s%s%s", j ? (read[j + 1] ? ", " : " and ") : "", read[j],
                        read[j][strlen(read[j]) - 1] == '.' ? "*" : "");
            fputc('\n', stderr);
        }
        return -1;
    }
    return 0;
}

/* The status of a subcommand whose product is what it prints, once that
 * has reached stdout: where stdout took not all of it (a full disk,
 * /dev/full, a closed pipe's EPIPE with SIGPIPE ignored) status 1 and the
 * error (unless one is said already), not a silent 0.  (export's product
 * is its folder, tokenize's its shards, which it checks itself.) */
static int with_output(int status)
{
    errno = 0;
    int flushed = fflush(stdout) == 0, e = errno;
    if (flushed && !ferror(stdout)) return status;
    if (status != EXIT_ERROR)
        fprintf(stderr, "error: the output could not all be written to stdout (%s): what was written of it is not "
                "complete\n  hint: free space where stdout goes, or send it elsewhere\n",
                !flushed && e ? strerror(e) : "a write failed");
    return EXIT_ERROR;
}

/* `triad export CKPT DIR [export.key=value ...]`: rank 0 writes the folder. */
static int export_checkpoint(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "error: triad export needs a checkpoint and a folder: triad export CKPT DIR\n");
        return EXIT_ERROR;
    }
    struct config cfg;
    static const char *const read[] = {"export.", NULL};
    if (read_options(&cfg, argc, argv, 4, 0) != 0 || only_read_keys(argc, argv, 4, read, "export", 0) != 0)
        return EXIT_ERROR;
    enum st_dtype dt = cfg.export.dtype_id == EXPORT_DTYPE_bf16   ? ST_BF16
                       : cfg.export.dtype_id == EXPORT_DTYPE_fp16 ? ST_F16
                                                                  : ST_F32;
    char why[1024];
    if (hf_export(argv[2], argv[3], dt, train_stop_signal(), why, sizeof why) != 0) {
        fprintf(stderr, "error: triad export %s %s: %s\n", argv[2], argv[3], why);
        return *train_stop_signal() ? EXIT_STOPPED : EXIT_ERROR;
    }
    printf("exported %s to %s (config.json, model.safetensors in %s)\n", argv[2], argv[3], st_dtype_name(dt));
    return EXIT_DONE;
}

/* `mpirun -n N triad sample CKPT [sample.key=value ...]`: every rank. */
static int sample_command(int argc, char **argv, int rank)
{
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "error: triad sample needs a checkpoint: triad sample CKPT [sample.key=value]\n");
        return EXIT_ERROR;
    }
    struct config opts;
    static const char *const read[] = {"sample.", "parallel.tp", "parallel.pp", "parallel.dp", "parallel.cp",
                                       "parallel.ep", "train.device", "train.share_gpus", "train.tf32",
                                       "diag.stage_through_host", NULL};
    if (read_options(&opts, argc, argv, 3, rank) != 0 || only_read_keys(argc, argv, 3, read, "sample", rank) != 0)
        return EXIT_ERROR;
    /* a signal ends it at once, as by default: it leaves no file (a stop asked for already, now; read after the
     * handlers are given back, so that none comes in between unseen) */
    train_release_signals();
    int asked = (int)*train_stop_signal();
    if (asked) raise(asked);
    int set = (config_override_given(argc - 3, argv + 3, "sample.temperature") ? SAMPLE_SET_TEMPERATURE : 0) |
              (config_override_given(argc - 3, argv + 3, "sample.top_k") ? SAMPLE_SET_TOP_K : 0) |
              (config_override_given(argc - 3, argv + 3, "sample.top_p") ? SAMPLE_SET_TOP_P : 0);
    return sample_checkpoint(argv[2], &opts, set);
}

/* `mpirun -n N triad eval CKPT [group.key=value ...]`: every rank. */
static int eval_command(int argc, char **argv, int rank)
{
    if (argc < 3 || strchr(argv[2], '=')) {
        if (rank == 0)
            fprintf(stderr, "error: triad eval needs a checkpoint: triad eval CKPT [group.key=value ...], e.g. "
                    "triad eval run/ckpt_100.h5 data.val_path='val.bin' eval.tasks='hellaswag_val.bin'\n");
        return EXIT_ERROR;
    }
    static const char *const read[] = {
        "eval.", "parallel.tp", "parallel.cp", "parallel.pp", "parallel.dp", "parallel.ep", "parallel.virtual_stages",
        "parallel.schedule", "parallel.schedule_file", "parallel.sequence_parallel", "parallel.zero_stage",
        "data.val_path", "data.kind", "data.tokenizer", "train.batch_size", "train.micro_batch_size",
        "train.eval_batches", "train.precision", "train.moe_capacity", "train.device", "train.share_gpus",
        "train.tf32", "train.threads", "diag.stage_through_host", "diag.slow_rank", "diag.slow_seconds", NULL};
    struct config opts; /* (the overrides' own errors first, as on the checkpoint's deck) */
    if (read_options(&opts, argc, argv, 3, rank) != 0 || only_read_keys(argc, argv, 3, read, "eval", rank) != 0)
        return EXIT_ERROR;
    return evaluate_checkpoint(argv[2], argc - 3, argv + 3);
}

/* The options that need no deck. */
static void print_usage(void) { usage(stdout); }
static void print_doc(void) { config_doc_markdown(stdout); }
static void print_version(void) { version_print(stdout); }
static const struct {
    const char *name;
    void (*print)(void);
} info_options[] = {
    {"--help", print_usage}, {"-h", print_usage}, {"--version", print_version}, {"--doc", print_doc},
};

/* world=N, an override of the subcommands: the rank count to check or
 * plan for.  Returns N, 0 if arg is another override; exits on a malformed
 * one. */
static int parse_world(const char *arg, int rank)
{
    if (strncmp(arg, "world=", 6) != 0) return 0;
    char *end;
    errno = 0;
    long w = strtol(arg + 6, &end, 10);
    if (errno || end == arg + 6 || *end || w < 1 || w > INT32_MAX) {
        if (rank == 0)
            fprintf(stderr, "error: world=%s is not a rank count: give a whole number from 1 to %d\n", arg + 6,
                    INT32_MAX);
        exit_all(EXIT_ERROR);
    }
    return (int)w;
}

/* Train on the launched ranks. */
static int train(struct config *cfg, int world)
{
    if (cfg->train.threads > 0) omp_set_num_threads((int)cfg->train.threads);
    struct run_shape s;
    run_shape_init(&s, cfg, world, 0);
    struct grid g;
    grid_init(&g, s.tp, s.cp, s.dp, s.pp, s.ep);
    char desc[256];
    grid_describe(&g, desc, sizeof desc);
    if (g.rank == 0) version_print(stdout);
    plan_resolve_pack(cfg, &g); /* (before the echo: the deck in effect) */
    char *deck = echo_deck(cfg);
    log_info("triad %s: %s\n", version_string(), desc);
    log_info("effective deck:\n%s", deck);
    int status = train_run(cfg, &g, deck);
    free(deck);
    grid_free(&g);
    return status;
}

/* The variables by which launchers tell a process its rank: Open MPI's
 * mpirun, PMIx, PMI (MPICH's and Intel MPI's hydra), Slurm's srun,
 * MVAPICH's mpirun_rsh, Cray's PALS and ALPS. */
static const char *const launcher_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "PMI_FD",
                                            "SLURM_PROCID", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_RANK", "MPIRUN_RANK",
                                            "PALS_RANKID", "ALPS_APP_PE"};

/* Was this process started by a launcher, which tells it its rank in the
 * environment? */
static int launched(void)
{
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
        if (getenv(launcher_vars[i])) return 1;
    return 0;
}

/* The commands one process answers, alone or as rank 0 of a launch:
 * check, schedule, plan, export, --help, --version, --doc (and no
 * command).  Started without a launcher they run without MPI: a singleton
 * MPI_Init costs about 0.3 s, and Open MPI 4's singleton start and end
 * crash about once in a thousand (its issue 10117). */
static int one_process_command(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "export")) return 1;
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(argv[1], subcommands[i].name)) return 1;
    for (size_t i = 0; i < sizeof info_options / sizeof info_options[0]; i++)
        if (!strcmp(argv[1], info_options[i].name)) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int provided, rank, world;
    /* HDF5 never uses MPI-IO's shared file pointers, but Open MPI 4.1's OMPIO
     * opens a shared-file-pointer component with every file: sharedfp/sm can
     * hang in MPI_File_open when two jobs open files at once, and
     * sharedfp/lockedfile writes a .lock file beside each one and spins
     * forever when the disk is full (or leaves the file behind when killed).
     * sharedfp/individual needs neither, unless the user chose otherwise. */
    setenv("OMPI_MCA_sharedfp", "individual", 0);
    train_catch_signals(); /* a stop asked for during start-up ends it with status 3 */
    rank = 0, world = 1;
    if (launched() || !one_process_command(argc, argv)) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
        MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
    }
    log_set_rank(rank);

    char isa_err[256];
    if (isa_init(isa_err, sizeof isa_err) != 0) { /* every rank sees the same environment */
        if (rank == 0) fprintf(stderr, "error: %s\n", isa_err);
        exit_all(EXIT_ERROR);
    }
    if (argc < 2) {
        if (rank == 0) usage(stderr);
        exit_all(EXIT_ERROR);
    }
    for (size_t i = 0; i < sizeof info_options / sizeof info_options[0]; i++)
        if (!strcmp(argv[1], info_options[i].name)) {
            train_release_signals(); /* (nothing to stop cleanly: a signal ends it as by default) */
            if (rank == 0) info_options[i].print();
            exit_all(with_output(EXIT_DONE));
        }
    if (!strcmp(argv[1], "export")) exit_all(rank == 0 ? export_checkpoint(argc, argv) : EXIT_DONE);
    if (!strcmp(argv[1], "sample")) exit_all(with_output(sample_command(argc, argv, rank)));
    if (!strcmp(argv[1], "eval")) exit_all(with_output(eval_command(argc, argv, rank)));
    if (!strcmp(argv[1], "tokenize")) {
        struct config opts;
        static const char *const read[] = {"tokenize.", NULL};
        exit_all(read_options(&opts, argc, argv, 2, rank) != 0 || only_read_keys(argc, argv, 2, read, "tokenize", rank)
                     ? EXIT_ERROR
                     : tokenize_run(&opts));
    }
    const struct subcommand *sc = NULL;
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(argv[1], subcommands[i].name)) sc = &subcommands[i];
    int first = sc ? 2 : 1; /* the deck */
    if (first >= argc || argv[first][0] == '-') {
        if (rank == 0) {
            fprintf(stderr, "error: %s\n", first >= argc ? "no deck given" : "unknown option");
            usage(stderr);
        }
        exit_all(EXIT_ERROR);
    }
    int nover = argc - first - 1;
    char **over = argv + first + 1;
    if (sc) {
        int w = 0;
        for (int i = 0; i < nover; i++) /* world=N anywhere among the overrides (the last one counts) */
            if (strncmp(over[i], "world=", 6) == 0) {
                w = parse_world(over[i], rank);
                memmove(over + i, over + i + 1, (size_t)(nover - i - 1) * sizeof *over);
                nover--, i--;
            }
        if (w > 0) world = w;
        else if (sc->deck_grid || world == 1) world = 0; /* the deck's tp * cp * pp * dp, dp = 0 taken as 1 */
    }
    if (sc) train_release_signals(); /* (check, plan, schedule: nothing to stop cleanly) */
    struct config cfg;
    read_config(&cfg, argv[first], nover, over, &world, sc && sc->planning);
    int status = sc ? with_output(rank == 0 ? sc->run(&cfg, world) : EXIT_DONE) : train(&cfg, world);
    if (!sc) exit_aborts_agree(); /* (a file left open on some rank: MPI_Finalize would close it) */
    if (sc || exit_aborts()) exit_all(status);
    MPI_Finalize();
    return status;
}
