/* test_hf_alloc.c -- the weights' importers when memory runs out: every
 * allocation triad's own code makes while loading, one at a time, refused
 * (alloc_sweep.h, counting only the program's own code: Open MPI, called
 * inside for the ranks to agree, aborts where its own allocations fail).
 * The weights are the fuzzing harness's seeds (regression/fuzz/corpus,
 * made by the independent writer, regression/hf_files.py): a Hugging Face
 * folder of a tiny LLaMA, the same in two shards with an index, a tiny
 * Qwen2-MoE, a tiny GPT-2, and a GPT-2 llm.c checkpoint.  A run that loads
 * must give the reference's parameters bit for bit.  And the checkpoints:
 * the seeds' triad checkpoint of the LLaMA read as io.init_from reads it;
 * the model written to a new checkpoint (ckpt_save) beside an earlier one
 * and read back (a failed save leaves the directory as it was); the seeds'
 * checkpoint exported to a Hugging Face folder (`triad export`, in f32 and
 * bf16): an export must write the reference's files byte for byte, and one
 * that fails must leave none of them behind. */
#include <dirent.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc_sweep.h"
#include "ckpt.h"
#include "config.h"
#include "device.h"
#include "file.h"
#include "hash.h"
#include "hf.h"
#include "model.h"
#include "shape.h"
#include "topo.h"

struct load {
    const char *path;
    int llmc; /* 1: an llm.c checkpoint; 2: a triad checkpoint */
    struct model m;
    struct grid *g;
};

/* FNV-1a over the model's parameters' bytes. */
static uint64_t params_fnv(const struct model *m) { return fnv1a(FNV1A_INIT, m->params_mem, m->flat * sizeof(float)); }

static void load_run(void *ctx, struct sweep_outcome *o)
{
    struct load *l = ctx;
    memset(l->m.params_mem, 0, l->m.flat * sizeof(float));
    int rc = l->llmc == 2 ? ckpt_load_model(l->path, &l->m, l->g, o->err, sizeof o->err)
             : l->llmc    ? llmc_load(l->path, &l->m, l->g, 0, o->err, sizeof o->err)
                          : hf_load(l->path, &l->m, l->g, 0, o->err, sizeof o->err);
    if (rc) return;
    size_t on = 0;
    if (sweep_printf(o, &on, "%zu floats, FNV-1a %016llx", l->m.flat, (unsigned long long)params_fnv(&l->m)))
        free(o->text), o->text = NULL;
}

/* ------------------------------------------------------------ export */

struct export {
    const char *ckpt;
    char dir[4200];
    enum st_dtype dtype;
};

/* The files in dir, in name order, each "name bytes FNV-1a" into o's text
 * (at most 32); -1 where one cannot be read.  *n: how many. */
static int list_folder(const char *dir, struct sweep_outcome *o, size_t *on, int *n)
{
    char names[32][256], path[4500 + 256];
    *n = 0;
    DIR *dp = opendir(dir);
    if (!dp) return 0; /* (no folder: nothing in it) */
    for (struct dirent *e; (e = readdir(dp)) && *n < 32;)
        if (e->d_name[0] != '.') snprintf(names[(*n)++], sizeof names[0], "%s", e->d_name);
    closedir(dp);
    qsort(names, (size_t)*n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    int rc = 0;
    for (int i = 0; i < *n && rc == 0; i++) {
        snprintf(path, sizeof path, "%.4400s/%.255s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        if (!f) return -1;
        uint64_t h = FNV1A_INIT, bytes = 0;
        for (int c; (c = getc(f)) != EOF; bytes++) h = fnv1a(h, &(unsigned char){(unsigned char)c}, 1);
        fclose(f);
        rc = o ? sweep_printf(o, on, " %s %llu %016llx", names[i], (unsigned long long)bytes, (unsigned long long)h)
               : 0;
    }
    return rc;
}

static void empty_folder(const char *dir)
{
    char path[4500 + 256];
    DIR *dp = opendir(dir);
    for (struct dirent *e; dp && (e = readdir(dp));)
        if (e->d_name[0] != '.') snprintf(path, sizeof path, "%s/%s", dir, e->d_name), unlink(path);
    if (dp) closedir(dp);
    rmdir(dir);
}

/* triad export of the checkpoint into a new folder: its files are the
 * outcome; a failed export must leave none. */
static void export_run(void *ctx, struct sweep_outcome *o)
{
    struct export *x = ctx;
    empty_folder(x->dir);
    size_t on = 0;
    int n;
    if (hf_export(x->ckpt, x->dir, x->dtype, NULL, o->err, sizeof o->err) != 0) {
        if (list_folder(x->dir, NULL, NULL, &n) != 0 || n > 0)
            snprintf(o->err, sizeof o->err, "a failed export left %d files in its folder", n);
        return;
    }
    if (list_folder(x->dir, o, &on, &n) != 0) {
        free(o->text), o->text = NULL;
        if (!o->err[0]) snprintf(o->err, sizeof o->err, "(the test) cannot read the exported folder");
    }
}

/* The model of corpus deck `deck` on one rank. */
static int model_of_cfg(const char *corpus, const char *deck, struct grid *g, struct model *m, struct config *out,
                        struct run_shape *shape)
{
    char path[4200];
    struct config cfg;
    struct deck_error de;
    snprintf(path, sizeof path, "%s/%s", corpus, deck);
    config_defaults(&cfg);
    if (config_read_file(&cfg, path, &de) != 0) {
        tap_diag("%s: %s", path, de.what);
        return -1;
    }
    config_resolve(&cfg);
    struct run_shape s;
    run_shape_init(&s, &cfg, 1, 0);
    struct model_dims d;
    model_dims_init(&d, &cfg, &s, g);
    model_init(m, &d, &cpu_device, 1, (struct model_buffers){.slots = 1}, 0);
    if (out) *out = cfg;
    if (shape) *shape = s;
    return 0;
}

static int model_of(const char *corpus, const char *deck, struct grid *g, struct model *m)
{
    return model_of_cfg(corpus, deck, g, m, NULL, NULL);
}

/* ------------------------------------------------------------ a checkpoint written */

struct save {
    char dir[4200];
    struct model m, back;
    struct optim o;
    struct grid *g;
    char *deck; /* the model's deck, stored in the checkpoint */
};

/* ckpt_save (the synchronous writer: the file, its checksums, the read-back,
 * the rename) of step 1 into a run directory that holds a checkpoint of step
 * 0 (a stand-in, whose bytes must stay as they are); the file written read
 * back into a second model.  A save that fails must leave the folder as it
 * found it. */
static const char step0[] = "the checkpoint of step 0\n";

/* Does dir/ckpt_0.h5 still hold step0? */
static int step0_intact(const char *dir)
{
    char path[4400], buf[64];
    snprintf(path, sizeof path, "%s/ckpt_0.h5", dir);
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    return n == sizeof step0 - 1 && memcmp(buf, step0, n) == 0;
}
static void save_run(void *ctx, struct sweep_outcome *o)
{
    struct save *x = ctx;
    char path[4400];
    empty_folder(x->dir);
    snprintf(path, sizeof path, "%s/ckpt_0.h5", x->dir);
    FILE *f = mkdir(x->dir, 0777) == 0 ? fopen(path, "w") : NULL;
    int bad = !f || fputs(step0, f) < 0;
    if ((f && fclose(f) != 0) || bad) {
        snprintf(o->err, sizeof o->err, "(the test) cannot write %.900s", path);
        return;
    }
    struct ckpt_state st = {.step = 1, .tokens = 16, .updates = 1};
    struct sweep_outcome l = {0};
    size_t on = 0, lon = 0;
    int n, rc = ckpt_save(x->dir, &st, &x->m, &x->o, x->deck, x->g, 2, o->err, sizeof o->err);
    if (list_folder(x->dir, &l, &lon, &n) != 0 || !l.text) {
        snprintf(o->err, sizeof o->err, "(the test) cannot list %.900s", x->dir);
    } else if (rc) {
        if (n != 1 || !step0_intact(x->dir))
            snprintf(o->err, sizeof o->err, "a failed save left its folder holding%.900s", l.text);
    } else if (n != 3 || !step0_intact(x->dir) || !strstr(l.text, " ckpt_1.h5 ") ||
               !strstr(l.text, " checkpoints.txt ")) {
        snprintf(o->err, sizeof o->err, "a save left its folder holding%.900s", l.text);
    } else {
        snprintf(path, sizeof path, "%s/ckpt_1.h5", x->dir);
        memset(x->back.params_mem, 0, x->back.flat * sizeof(float));
        if (ckpt_load_model(path, &x->back, x->g, o->err, sizeof o->err) == 0) {
            if (params_fnv(&x->back) != params_fnv(&x->m))
                snprintf(o->err, sizeof o->err, "the checkpoint written reads back as other parameters");
            else if (sweep_printf(o, &on, "saved, read back: FNV-1a %016llx", (unsigned long long)params_fnv(&x->back)))
                free(o->text), o->text = NULL;
        }
    }
    free(l.text);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const char *top = getenv("top_srcdir");
    char corpus[4096];
    snprintf(corpus, sizeof corpus, "%s/regression/fuzz/corpus", top && *top ? top : ".");
    struct grid g;
    grid_init(&g, 1, 1, 1, 1, 1);
    static const struct {
        const char *name, *deck, *path;
        int llmc;
    } cases[] = {
        {"a Hugging Face folder (LLaMA, one safetensors file)", "llama.nml", "llama", 0},
        {"a Hugging Face folder in two shards with an index", "llama.nml", "sharded", 0},
        {"a Hugging Face folder (Qwen2-MoE)", "qwen2_moe.nml", "qwen2_moe", 0},
        {"a Hugging Face folder (GPT-2: Conv1D's weights transposed)", "gpt2.nml", "gpt2", 0},
        {"an llm.c checkpoint (GPT-2)", "gpt2.nml", "gpt2.bin", 1},
        {"a triad checkpoint (LLaMA), as io.init_from reads it", "llama.nml", "ckpt.h5", 2},
    };
    sweep_own_code = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[4200];
        struct load l = {.path = path, .llmc = cases[i].llmc, .g = &g};
        snprintf(path, sizeof path, "%s/%s", corpus, cases[i].path);
        if (model_of(corpus, cases[i].deck, &g, &l.m)) {
            tap_ok(0, "%s: the model of %s", cases[i].name, cases[i].deck);
            continue;
        }
        alloc_sweep(cases[i].name, load_run, &l);
        model_free(&l.m);
    }
    struct save sv = {.g = &g};
    struct config scfg;
    struct run_shape ss;
    char ckpt0[4200], deck[4200], why[1024] = "";
    size_t decklen;
    snprintf(ckpt0, sizeof ckpt0, "%s/ckpt.h5", corpus);
    snprintf(deck, sizeof deck, "%s/llama.nml", corpus);
    tap_tmp_template(sv.dir, sizeof sv.dir, "hf_alloc_save");
    if (model_of_cfg(corpus, "llama.nml", &g, &sv.m, &scfg, &ss) || model_of(corpus, "llama.nml", &g, &sv.back) ||
        ckpt_load_model(ckpt0, &sv.m, &g, why, sizeof why) ||
        file_read_all(deck, 1 << 20, "a deck", &sv.deck, &decklen, why, sizeof why)) {
        tap_ok(0, "the model to save (%s)", why);
    } else {
        optim_init(&sv.o, &sv.m, &scfg, &ss);
        alloc_sweep("a checkpoint written (ckpt_save) beside an earlier one", save_run, &sv);
        empty_folder(sv.dir);
        optim_free(&sv.o);
        model_free(&sv.m);
        model_free(&sv.back);
        free(sv.deck);
    }
    struct export x = {.dtype = ST_F32};
    char ckpt[4200];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.h5", corpus);
    x.ckpt = ckpt;
    tap_tmp_template(x.dir, sizeof x.dir, "hf_alloc_export");
    if (!mkdtemp(x.dir)) {
        tap_ok(0, "a folder for the export (%s)", x.dir);
    } else {
        alloc_sweep("triad export of a checkpoint (f32)", export_run, &x);
        x.dtype = ST_BF16;
        alloc_sweep("triad export of a checkpoint (bf16)", export_run, &x);
        empty_folder(x.dir);
    }
    grid_free(&g);
    int status = tap_done();
    MPI_Finalize();
    return status;
}
