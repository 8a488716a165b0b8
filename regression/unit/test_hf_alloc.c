/* test_hf_alloc.c -- the weights' importers when memory runs out: every
 * allocation triad's own code makes while loading, one at a time, refused
 * (alloc_sweep.h, counting only the program's own code: Open MPI, called
 * inside for the ranks to agree, aborts where its own allocations fail).
 * The weights are the fuzzing harness's seeds (regression/fuzz/corpus,
 * made by the independent writer, regression/hf_files.py): a Hugging Face
 * folder of a tiny LLaMA, the same in two shards with an index, a tiny
 * Qwen2-MoE, and a GPT-2 llm.c checkpoint.  A run that loads must give the
 * reference's parameters bit for bit. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_sweep.h"
#include "config.h"
#include "device.h"
#include "hf.h"
#include "model.h"
#include "shape.h"
#include "topo.h"

struct load {
    const char *path;
    int llmc;
    struct model m;
    struct grid *g;
};

static void load_run(void *ctx, struct sweep_outcome *o)
{
    struct load *l = ctx;
    memset(l->m.params_mem, 0, l->m.flat * sizeof(float));
    int rc = l->llmc ? llmc_load(l->path, &l->m, l->g, 0, o->err, sizeof o->err)
                     : hf_load(l->path, &l->m, l->g, 0, o->err, sizeof o->err);
    if (rc) return;
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the parameters' bytes */
    const unsigned char *b = (const unsigned char *)l->m.params_mem;
    for (size_t i = 0; i < l->m.flat * sizeof(float); i++) h = (h ^ b[i]) * 1099511628211ull;
    size_t on = 0;
    if (sweep_printf(o, &on, "%zu floats, FNV-1a %016llx", l->m.flat, (unsigned long long)h)) free(o->text), o->text = NULL;
}

/* The model of corpus deck `deck` on one rank. */
static int model_of(const char *corpus, const char *deck, struct grid *g, struct model *m)
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
    return 0;
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
    grid_free(&g);
    int status = tap_done();
    MPI_Finalize();
    return status;
}
