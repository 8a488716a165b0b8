/* ckpt.c -- checkpoint write and read with parallel HDF5 (ckpt.h): every
 * rank takes part in every dataset operation (metadata is collective in
 * parallel HDF5) and writes or reads its own selection of each tensor
 * (ckpt_layout.h); the file's mechanics are ckpt_file.c's, the checksums
 * ckpt_sum.c's.  The tensors' bytes are read outside HDF5 where the file
 * holds them plain (ckpt_raw.h), HDF5 reading the metadata. */
#include "ckpt.h"

#include <dirent.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "ckpt_layout.h"
#include "ckpt_name.h"
#include "ckpt_raw.h"
#include "ckpt_sum.h"
#include "ckpt_tok.h"
#include "config.h"
#include "lineage.h"
#include "log.h"
#include "shape.h"

static int write_tensor(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    hid_t fs = H5Screate_simple(t->rank, t->dims, NULL);
    hid_t ds = ckpt_create_dataset(file, t, fs, 0);
    int writer = ckpt_owner(t, w->g);
    hsize_t n = writer ? t->elems : 0;
    hid_t ms = H5Screate_simple(1, &n, NULL);
    ckpt_select_blocks(fs, t, writer);
    hid_t dx = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dx, H5FD_MPIO_COLLECTIVE);
    static const float nothing = 0; /* HDF5 wants a buffer even for an empty selection */
    herr_t rc = ds < 0 ? -1 : H5Dwrite(ds, H5T_NATIVE_FLOAT, ms, fs, dx, writer ? t->local : &nothing);
    if (writer) w->sums[w->next] = ckpt_partial_checksum(t, t->local);
    H5Pclose(dx);
    H5Sclose(ms);
    if (ds >= 0) H5Dclose(ds);
    H5Sclose(fs);
    if (rc < 0) ckpt_walk_fail(w, "rank %d: writing %s failed", w->g->rank, t->path);
    if (rc < 0 && ds >= 0) w->write_failed = 1;
    return rc < 0 ? -1 : 0;
}

/* Where the file holds dataset ds of tensor t as plain floats (contiguous,
 * native float, all of its space allocated: every triad checkpoint), its
 * first byte in the file, for a read outside HDF5 (ckpt_raw.h); else
 * HADDR_UNDEF. */
static haddr_t plain_offset(hid_t ds, const struct tensor_ref *t)
{
    hid_t type = H5Dget_type(ds), dcpl = H5Dget_create_plist(ds);
    hsize_t bytes = 4 * t->dims[0] * (t->rank == 2 ? t->dims[1] : 1);
    int plain = type >= 0 && dcpl >= 0 && H5Tequal(type, H5T_NATIVE_FLOAT) > 0 &&
                H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Pget_external_count(dcpl) == 0 &&
                H5Dget_storage_size(ds) == bytes;
    if (dcpl >= 0) H5Pclose(dcpl);
    if (type >= 0) H5Tclose(type);
    return plain ? H5Dget_offset(ds) : HADDR_UNDEF;
}

/* A selection to read outside HDF5 once every dataset is located. */
static void add_piece(struct walk_ctx *w, const struct tensor_ref *t, haddr_t at)
{
    w->pieces[w->npieces++] = (struct ckpt_piece){*t, (uint64_t)at, w->next};
}

/* This rank's written selection (if it owns one), listed to be read back
 * and summed as write_tensor did, for verify_written. */
static int reread_tensor(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    hid_t ds = H5Dopen2(file, t->path, H5P_DEFAULT);
    if (ds < 0) {
        ckpt_walk_fail(w, "rank %d: dataset %s is missing", w->g->rank, t->path);
        return -1;
    }
    if (ckpt_owner(t, w->g) && t->elems > 0) {
        haddr_t at = plain_offset(ds, t); /* (write_tensor's datasets are contiguous floats, allocated at creation) */
        if (at != HADDR_UNDEF) add_piece(w, t, at);
        else ckpt_walk_fail(w, "rank %d: %s was not stored as contiguous floats", w->g->rank, t->path);
    }
    H5Dclose(ds);
    return w->failed ? -1 : 0;
}

/* A tensor to read: its shape checked, then its selection listed to be
 * read outside HDF5 where the file holds it plain, else read now. */
static int read_tensor(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    haddr_t at;
    if (H5Lexists(file, t->path, H5P_DEFAULT) <= 0) {
        ckpt_walk_fail(w, "dataset %s is missing", t->path);
        return -1;
    }
    hid_t ds = H5Dopen2(file, t->path, H5P_DEFAULT);
    hid_t fs = ds < 0 ? -1 : H5Dget_space(ds);
    hsize_t dims[2] = {0, 0};
    int rank = fs < 0 ? -1 : H5Sget_simple_extent_ndims(fs);
    if (rank == t->rank) H5Sget_simple_extent_dims(fs, dims, NULL);
    int rc = 0;
    if (rank != t->rank || dims[0] != t->dims[0] || (rank == 2 && dims[1] != t->dims[1])) {
        ckpt_walk_fail(w, "dataset %s has shape [%llu%s%llu], the model needs [%llu%s%llu]: the deck's "
                       "n_layer/d_model/seq_len/vocab_size differ from the checkpoint's", t->path,
                       (unsigned long long)dims[0], rank == 2 ? ", " : "",
                       rank == 2 ? (unsigned long long)dims[1] : 0ull, (unsigned long long)t->dims[0],
                       t->rank == 2 ? ", " : "",
                       t->rank == 2 ? (unsigned long long)t->dims[1] : 0ull);
        rc = -1;
    } else if (t->local && (at = plain_offset(ds, t)) != HADDR_UNDEF) {
        add_piece(w, t, at);
    } else if (t->local) { /* (a file from another tool: chunked, compressed, another type; HDF5 converts) */
        hsize_t n = t->elems;
        hid_t ms = H5Screate_simple(1, &n, NULL);
        ckpt_select_blocks(fs, t, 1);
        if (H5Dread(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, t->local) < 0) {
            ckpt_walk_fail(w, "reading %s failed (truncated or corrupted file?)", t->path);
            rc = -1;
        }
        H5Sclose(ms);
        if (rc == 0 && ckpt_owner(t, w->g)) w->sums[w->next] = ckpt_partial_checksum(t, t->local);
    }
    if (fs >= 0) H5Sclose(fs);
    if (ds >= 0) H5Dclose(ds);
    return rc;
}

/* A file without /model (metrics.h5 has a stored deck too): -1 with err
 * saying what it is, else 0. */
static int not_a_checkpoint(hid_t f, const char *path, char *err, size_t errlen)
{
    if (H5Lexists(f, "/model", H5P_DEFAULT) > 0) return 0;
    int metrics = H5Lexists(f, "/metrics", H5P_DEFAULT) > 0;
    return errorf(err, errlen, "%s %s, not a checkpoint: give one of the run's checkpoints, run_dir/ckpt_<step>.h5 "
                  "(checkpoints.txt lists them)", path,
                  metrics ? "is a run's metrics file (metrics.h5: /metrics, /timers, ...)" : "has no /model group");
}

/* (the message for ckpt_stored_deck's -2, of path) */
#define DAMAGED_DECK "%s: the file is corrupted: its stored deck is empty, or not the text its checksum was made of"

void ckpt_trained_grid(const char *path, int64_t *dp, int64_t *cp)
{
    *dp = *cp = 0;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = access(path, R_OK) == 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    if (f < 0) return;
    ckpt_stored_grid(f, dp, cp);
    H5Fclose(f);
}

int ckpt_read_config(const char *path, struct config *cfg, char *err, size_t errlen)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = access(path, R_OK) == 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    if (f < 0) return ckpt_open_failed(path, err, errlen);
    if (not_a_checkpoint(f, path, err, errlen)) {
        H5Fclose(f);
        return -1;
    }
    char *text;
    int rc = ckpt_stored_deck(f, &text);
    H5Fclose(f);
    if (rc == -1) return errorf(err, errlen, "%s: out of memory reading its stored deck", path);
    if (rc == -2) return errorf(err, errlen, DAMAGED_DECK, path);
    if (!text) return errorf(err, errlen, "%s has no stored deck: not a triad checkpoint", path);
    struct deck_error de;
    config_defaults(cfg);
    rc = config_read_string(cfg, text, "the stored deck", &de);
    free(text);
    if (rc != 0) {
        snprintf(err, errlen, "%s: the stored deck does not read (%d:%d: %s): the file is corrupted", path, de.line,
                 de.col, de.what);
        return -1;
    }
    config_resolve(cfg);
    return 0;
}

/* A restart continues the same function of the weights: llama's rotary
 * angles (rope_theta, rope_scaling and its keys) as the checkpoint's
 * stored deck has them; the differing ones appended to list.  (io.init_from
 * may change them: a longer context is trained by rescaling the rotary
 * frequencies of a model trained without.) */
static void rotary_keys(char *list, size_t len, const struct model_dims *d, const struct config *c)
{
    struct rope_scaling r = d->rope, s = {c->model.rope_scaling_id == MODEL_ROPE_SCALING_llama3,
                                          c->model.rope_factor, c->model.rope_low_freq_factor,
                                          c->model.rope_high_freq_factor,
                                          (double)c->model.rope_original_max_positions};
    if (r.llama3 != s.llama3)
        snprintf(list + strlen(list), len - strlen(list), "%srope_scaling = '%s' here, '%s' in the checkpoint",
                 list[0] ? "; " : "", r.llama3 ? "llama3" : "none", c->model.rope_scaling);
    struct { const char *name; double here, there; } k[] = {
        {"rope_theta", d->rope_theta, c->model.rope_theta},
        {"rope_factor", r.factor, s.factor}, {"rope_low_freq_factor", r.low_freq_factor, s.low_freq_factor},
        {"rope_high_freq_factor", r.high_freq_factor, s.high_freq_factor},
        {"rope_original_max_positions", r.original_max, s.original_max},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].here != k[i].there && (i == 0 || (r.llama3 && s.llama3)))
            snprintf(list + strlen(list), len - strlen(list), "%s%s = %.15g here, %.15g in the checkpoint",
                     list[0] ? "; " : "", k[i].name, k[i].here, k[i].there);
}

/* A restart or init_from must describe the same model: the stored deck's
 * &model keys against this run's (the rotary keys on a restart only),
 * every mismatch listed, before any tensor is read.  Files from elsewhere carry
 * no deck and are checked by shape. */
static int check_model_keys(hid_t f, const char *path, const struct model_dims *d, int restart, char *err,
                            size_t errlen)
{
    char *text;
    int stored = ckpt_stored_deck(f, &text);
    if (stored == -1) return errorf(err, errlen, "%s: out of memory reading its stored deck", path);
    if (stored == -2) return errorf(err, errlen, DAMAGED_DECK, path);
    if (!text) return 0;
    struct config c;
    struct deck_error ce;
    config_defaults(&c);
    int rc = config_read_string(&c, text, "the stored deck", &ce);
    free(text);
    if (rc != 0) {
        snprintf(err, errlen, "the file is corrupted: the deck stored in %s does not read (%d:%d: %s)", path,
                 ce.line, ce.col, ce.what);
        return -1;
    }
    struct model_family fam;
    shape_family(&fam, &c); /* the stored deck's n_kv_head, ffn_hidden, tie_embeddings as they were in effect */
    /* the derived sizes only where the key they follow from agrees (n_head, d_model) */
    int kv = d->NH == c.model.n_head, ffn = d->C == c.model.d_model;
    int64_t F = fam.E ? fam.Fs : fam.F; /* (a mixture's d->F: its shared experts') */
    /* a mixture's keys where both are mixtures; the shared experts' gate where both have them */
    int moe = d->E && fam.E, gate = moe && d->F && fam.Fs, dense = moe && d->Ld && d->Ld == fam.Ld;
    enum { NUM, LOGICAL, ROUTER };
    static const char *const logical[] = {".false.", ".true."}, *const router[] = {"softmax", "sigmoid"};
    struct { const char *name; int64_t here, there; int kind; } k[] = {
        {"n_layer", d->L, c.model.n_layer, NUM},   {"n_head", d->NH, c.model.n_head, NUM},
        {"d_model", d->C, c.model.d_model, NUM},   {"seq_len", d->T, c.model.seq_len, NUM},
        {"vocab_size", d->V, c.model.vocab_size, NUM}, {"n_kv_head", kv ? d->NKV : 0, kv ? fam.NKV : 0, NUM},
        {d->E ? "n_shared_expert x moe_ffn_hidden" : "ffn_hidden", ffn ? d->F : 0, ffn ? F : 0, NUM},
        {"tie_embeddings", d->tied, fam.tied, LOGICAL}, {"qkv_bias", d->qkv_bias, fam.qkv_bias, LOGICAL},
        {"n_expert", d->E, fam.E, NUM}, {"n_expert_active", d->K, fam.K, NUM}, {"moe_ffn_hidden", d->Fe, fam.Fe, NUM},
        {"moe_dense_layers", moe ? d->Ld : 0, moe ? fam.Ld : 0, NUM},
        {"ffn_hidden (of the dense layers)", dense && ffn ? d->Fd : 0, dense && ffn ? fam.F : 0, NUM},
        {"moe_router", moe ? d->sigmoid_router : 0, moe ? c.model.moe_router_id == MODEL_MOE_ROUTER_sigmoid : 0,
         ROUTER},
        {"moe_norm_topk", moe ? d->norm_topk : 0, moe ? c.model.moe_norm_topk != 0 : 0, LOGICAL},
        {"moe_shared_gate", gate ? d->shared_gate : 0, gate ? c.model.moe_shared_gate != 0 : 0, LOGICAL},
    };
    char list[1024] = "";
    if (d->llama != fam.llama)
        snprintf(list, sizeof list, "arch = '%s' here, '%s' in the checkpoint", d->llama ? "llama" : "gpt2",
                 c.model.arch);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (k[i].here == k[i].there) continue;
        char *at = list + strlen(list);
        size_t room = sizeof list - strlen(list);
        const char *const *word = k[i].kind == LOGICAL ? logical : router;
        if (k[i].kind != NUM)
            snprintf(at, room, "%s%s = %s%s%s here, %s%s%s in the checkpoint", list[0] ? "; " : "", k[i].name,
                     k[i].kind == ROUTER ? "'" : "", word[k[i].here != 0], k[i].kind == ROUTER ? "'" : "",
                     k[i].kind == ROUTER ? "'" : "", word[k[i].there != 0], k[i].kind == ROUTER ? "'" : "");
        else
            snprintf(at, room, "%s%s = %lld here, %lld in the checkpoint", list[0] ? "; " : "", k[i].name,
                     (long long)k[i].here, (long long)k[i].there);
    }
    /* the norms' epsilon, as the model holds it (a float) */
    if (d->eps != (float)c.model.norm_eps) {
        char here[32], there[32];
        snprintf(here, sizeof here, "%g", (double)d->eps);
        snprintf(there, sizeof there, "%g", c.model.norm_eps);
        if (!strcmp(here, there)) {
            snprintf(here, sizeof here, "%.9g", (double)d->eps);
            snprintf(there, sizeof there, "%.9g", (double)(float)c.model.norm_eps);
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%snorm_eps = %s here, %s in the checkpoint",
                 list[0] ? "; " : "", here, there);
    }
    if (restart && d->llama && fam.llama) rotary_keys(list, sizeof list, d, &c);
    if (!list[0]) return 0;
    snprintf(err, errlen, "the checkpoint holds another model (&model: %s): set the deck's &model as the "
             "checkpoint's, or use another checkpoint", list);
    return -2;
}

/* A newly written file, before it may replace anything: every tensor reads
 * back with the checksum stored beside it (each owner re-reads what it
 * wrote, outside HDF5 and after the flush: an I/O error lost inside a
 * collective write, or a short file, shows here), and its step is the one
 * written.  Collective. */
static int verify_written(const char *path, const struct model *m, const struct optim *o, int64_t step,
                          const struct grid *g, char *err, size_t errlen)
{
    hid_t f = ckpt_open(path, CKPT_OPEN_READ, g);
    int rc = 0;
    if (f < 0) {
        snprintf(err, errlen, "rank %d: %s does not open as HDF5 after writing it", g->rank, path);
        rc = -1;
    }
    if (ckpt_agree(rc, err, errlen, g)) return -1;
    struct state_buf sb[3];
    ckpt_state_bufs(m, o, sb);
    int per = ckpt_datasets_per_prefix(m);
    struct walk_ctx w = {.g = g, .sums = calloc((size_t)per * 3, sizeof(uint64_t)), .err = err, .errlen = errlen,
                         .pieces = calloc((size_t)per * 3, sizeof(struct ckpt_piece))};
    if (!w.sums || !w.pieces)
        rc = errorf(err, errlen, "rank %d: out of memory for the table of %d datasets to read back", g->rank, per * 3);
    int ready = ckpt_agree(rc, err, errlen, g) == 0; /* (before the walks, whose HDF5 calls are collective) */
    for (int p = 0; p < 3 && ready; p++) rc |= ckpt_walk(f, ckpt_prefix[p], m, &sb[p], reread_tensor, &w);
    rc = ready ? ckpt_agree(rc, err, errlen, g) : -1;
    if (rc == 0) rc = ckpt_agree(ckpt_raw_read_pieces(path, w.pieces, w.npieces, 0, w.sums, g, err, errlen), err,
                                 errlen, g);
    if (rc == 0) {
        ckpt_sums_reduce(w.sums, per * 3, g);
        w.next = 0;
        for (int p = 0; p < 3; p++) rc |= ckpt_walk(f, ckpt_prefix[p], m, &sb[p], ckpt_verify_checksum, &w);
        if (rc == 0) rc = ckpt_check_step(f, path, step, g, err, errlen);
        rc = ckpt_agree(rc, err, errlen, g);
    }
    if (rc == 0) rc = ckpt_verify_tokenizer(f, g, err, errlen);
    free(w.pieces);
    free(w.sums);
    H5Fclose(f);
    return rc;
}

/* Read (or write, then attach checksums to) the tensors under each prefix
 * of the file f at path.  Reading: the walk checks each dataset and lists
 * the selections to read outside HDF5, which follow in file order. */
static int transfer(hid_t f, const char *path, const struct model *m, const struct optim *o, int with_optim,
                    int writing, const struct grid *g, char *err, size_t errlen)
{
    struct state_buf sb[3];
    ckpt_state_bufs(m, o, sb);
    int np = with_optim ? 3 : 1, per = ckpt_datasets_per_prefix(m), rc = 0;
    struct walk_ctx w = {.g = g, .sums = calloc((size_t)per * np, sizeof(uint64_t)), .err = err, .errlen = errlen,
                         .pieces = writing ? NULL : calloc((size_t)per * np, sizeof(struct ckpt_piece))};
    if (!w.sums || (!writing && !w.pieces))
        rc = errorf(err, errlen, "rank %d: out of memory for the table of %d datasets", g->rank, per * np);
    /* state in device memory: HDF5 reads and writes a host copy of each buffer */
    float *dev[3] = {NULL, NULL, NULL}, *host[3] = {NULL, NULL, NULL};
    for (int p = 0; p < np && rc == 0 && m->k->on_device; p++) {
        size_t bytes = sb[p].z.floats * sizeof(float);
        if (!(host[p] = alloc_aligned(bytes))) {
            rc = errorf(err, errlen, "rank %d: out of memory for a host copy of %zu MiB of the state", g->rank,
                        bytes >> 20);
            break;
        }
        dev[p] = sb[p].mem, sb[p].mem = host[p];
        m->k->to_host(sb[p].mem, dev[p], bytes); /* (reading too: what the file lacks stays) */
    }
    int ready = ckpt_agree(rc, err, errlen, g) == 0; /* (before the walks, whose HDF5 calls are collective) */
    for (int p = 0; p < np && ready; p++)
        rc |= ckpt_walk(f, ckpt_prefix[p], m, &sb[p], writing ? write_tensor : read_tensor, &w);
    rc = ready ? ckpt_agree(rc, err, errlen, g) : -1;
    if (rc == 0 && !writing)
        rc = ckpt_agree(ckpt_raw_read_pieces(path, w.pieces, w.npieces, 1, w.sums, g, err, errlen), err, errlen, g);
    for (int p = 0; p < np && dev[p] && !writing && rc == 0; p++)
        m->k->to_device(dev[p], sb[p].mem, sb[p].z.floats * sizeof(float));
    if (rc == 0) {
        ckpt_sums_reduce(w.sums, per * np, g);
        w.next = 0;
        for (int p = 0; p < np; p++)
            rc |= ckpt_walk(f, ckpt_prefix[p], m, &sb[p], writing ? ckpt_attach_checksum : ckpt_verify_checksum, &w);
        rc = ckpt_agree(rc, err, errlen, g);
    }
    free(w.pieces);
    free(w.sums);
    for (int p = 0; p < np; p++) free(host[p]);
    return rc != 0 && w.write_failed ? CKPT_WRITE_FAILED : rc;
}

int ckpt_save(const char *run_dir, const struct ckpt_state *st, const struct model *m, const struct optim *o,
              const char *deck, const struct grid *g, int keep, char *err, size_t errlen)
{
    char tmp[4200];
    hid_t f = ckpt_create_tmp(run_dir, st->step, m, g, tmp, sizeof tmp, err, errlen);
    if (f < 0) return -1;
    int rc = transfer(f, tmp, m, o, 1, 1, g, err, errlen);
    if (rc == 0) ckpt_write_attributes(f, st, deck, g);
    if (rc == 0) rc = ckpt_write_tokenizer(f, run_dir, g, err, errlen);
    rc = ckpt_close_and_flush(f, tmp, rc, g, err, errlen);
    if (rc == 0 && verify_written(tmp, m, o, st->step, g, err, errlen) != 0 &&
        (rc = -1, !ckpt_read_trouble(tmp, g, err, errlen))) { /* (a rank that cannot read it: err says so) */
        /* (a write error can be lost inside MPI-IO's collective writes: say what the disk has) */
        char why[1024];
        snprintf(why, sizeof why, "%s", err);
        struct statvfs fs;
        if (statvfs(run_dir, &fs) == 0)
            snprintf(err, errlen, "%s does not read back as written (%s); the file system of %s has %llu KiB free",
                     tmp, why, run_dir, (unsigned long long)fs.f_bavail * fs.f_frsize / 1024);
        else
            snprintf(err, errlen, "%s does not read back as written (%s)", tmp, why);
    }
    return ckpt_publish(run_dir, tmp, st->step, keep, rc, g, err, errlen);
}

static int load(const char *path, struct model *m, struct optim *o, struct ckpt_state *st, const struct grid *g,
                char *err, size_t errlen)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rc = 0;
    hid_t f = access(path, R_OK) == 0 ? ckpt_open(path, CKPT_OPEN_READ, g) : -1;
    if (f < 0) rc = ckpt_open_failed(path, err, errlen);
    else rc = not_a_checkpoint(f, path, err, errlen);
    if (ckpt_agree(rc, err, errlen, g)) {
        if (f >= 0) H5Fclose(f);
        return -1;
    }
    int keys = check_model_keys(f, path, &m->d, o != NULL, err, errlen); /* (the same file and deck on every rank) */
    rc = ckpt_agree(keys, err, errlen, g);
    if (rc == 0) rc = transfer(f, path, m, o, o != NULL, 0, g, err, errlen);
    if (rc == 0 && st) rc = ckpt_read_state(f, path, st, err, errlen);
    H5Fclose(f);
    rc = ckpt_agree(rc, err, errlen, g);
    return rc != 0 && keys == -2 ? -2 : rc;
}

/* load, a failure where a rank cannot read the file at all said as such
 * (-3): not a damaged file, which the messages above would call it. */
static int load_said(const char *path, struct model *m, struct optim *o, struct ckpt_state *st, const struct grid *g,
                     char *err, size_t errlen)
{
    int rc = load(path, m, o, st, g, err, errlen);
    return rc == -1 && ckpt_read_trouble(path, g, err, errlen) ? -3 : rc;
}

int ckpt_load_model(const char *path, struct model *m, const struct grid *g, char *err, size_t errlen)
{
    return load_said(path, m, NULL, NULL, g, err, errlen);
}

int ckpt_load_model_counters(const char *path, struct model *m, struct ckpt_state *st, const struct grid *g,
                             char *err, size_t errlen)
{
    return load_said(path, m, NULL, st, g, err, errlen);
}

int ckpt_load_all(const char *path, struct model *m, struct optim *o, struct ckpt_state *st,
                  const struct grid *g, char *err, size_t errlen)
{
    return load_said(path, m, o, st, g, err, errlen);
}

int ckpt_restart_auto(const char *run_dir, struct model *m, struct optim *o, struct ckpt_state *st,
                      const struct grid *g, char *path, size_t len, char *err, size_t errlen)
{
    /* rank 0 lists the checkpoints, newest first; everyone tries them in turn */
    int64_t steps[4096];
    int n = 0;
    static struct lineage l;
    char lerr[1024];
    if (g->rank == 0 && lineage_read(run_dir, &l, lerr, sizeof lerr) != 0) {
        fprintf(stderr, "warning: %s; taking the checkpoints by step number\n", lerr);
        l.n = 0;
    }
    if (g->rank == 0 && l.n > 0) { /* the lineage, newest first */
        for (int i = l.n - 1; i >= 0; i--) steps[n++] = l.step[i];
    } else if (g->rank == 0) { /* no manifest (a directory from elsewhere): by step number */
        DIR *dp = opendir(run_dir);
        struct dirent *e;
        while (dp && (e = readdir(dp)) && n < 4096) {
            int64_t s;
            if (ckpt_step_of(e->d_name, &s) == 0) steps[n++] = s;
        }
        if (dp) closedir(dp);
        for (int i = 1; i < n; i++) /* insertion sort, newest first */
            for (int j = i; j > 0 && steps[j] > steps[j - 1]; j--) {
                int64_t t = steps[j];
                steps[j] = steps[j - 1];
                steps[j - 1] = t;
            }
    }
    MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT, 0, g->world_comm));
    MPI_CHECK(MPI_Bcast(steps, n, MPI_INT64_T, 0, g->world_comm));
    char why[1024] = "", newest[1024] = "";
    for (int i = 0; i < n; i++) {
        snprintf(path, len, "%s/ckpt_%lld.h5", run_dir, (long long)steps[i]);
        int rc = load_said(path, m, o, st, g, why, sizeof why);
        if (rc == 0) return 1;
        if (rc == -2 || rc == -3) { /* another model: the deck differs, not the file (the earlier ones are the same
                                     * run's); not read: an earlier one would lose the steps since (and move it aside) */
            if (rc == -3) snprintf(err, errlen, "%s", why); /* (the path is in it) */
            else snprintf(err, errlen, "%s: %s", path, why);
            return rc;
        }
        if (i == 0) snprintf(newest, sizeof newest, "%s", why);
        if (g->rank == 0)
            fprintf(stderr, "warning: checkpoint %s is unusable (%s); trying the previous one\n", path, why);
    }
    if (n == 0) return 0;
    snprintf(err, errlen, "none of the %d checkpoints in %s is usable; the newest (ckpt_%lld.h5) failed with: %s", n,
             run_dir, (long long)steps[0], newest);
    return -1;
}
