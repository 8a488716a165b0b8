/* ckpt_tok.c -- the model's tokenizer kept inside each checkpoint
 * (ckpt_tok.h): its files as byte datasets under /tokenizer, each with its
 * checksum. */
#include "ckpt_tok.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_layout.h"
#include "ckpt_name.h"
#include "hash.h"
#include "log.h"

const char *ckpt_tok_name(enum ckpt_tok_file i)
{
    static const char *const names[CKPT_TOK_NFILES] = {"tokenizer.json", "tokenizer_config.json",
                                                       "special_tokens_map.json", "generation_config.json",
                                                       "vocab.json", "merges.txt"};
    return names[i];
}

#define PIECE ((size_t)1 << 20) /* bytes read or written at a time */

/* The size of dir/name, or -1 when it is no regular file. */
static int64_t file_size(const char *dir, const char *name)
{
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? (int64_t)sb.st_size : -1;
}

/* Which of the files dir's tokenizer is made of, with their sizes (-1: not
 * one of them): tokenizer.json and the files that describe it, else GPT-2's
 * vocab.json and merges.txt (as tok_open reads a folder). */
static void survey(const char *dir, int64_t bytes[CKPT_TOK_NFILES])
{
    for (int i = 0; i < CKPT_TOK_NFILES; i++) bytes[i] = file_size(dir, ckpt_tok_name(i));
    int hf = bytes[CKPT_TOK_JSON] >= 0, gpt2 = !hf && bytes[CKPT_TOK_VOCAB] >= 0 && bytes[CKPT_TOK_MERGES] >= 0;
    for (int i = 0; i < CKPT_TOK_NFILES; i++)
        if (i < CKPT_TOK_VOCAB ? !hf : !gpt2) bytes[i] = -1;
}

int64_t ckpt_tokenizer_bytes(const char *dir)
{
    int64_t bytes[CKPT_TOK_NFILES], sum = 0;
    survey(dir, bytes);
    for (int i = 0; i < CKPT_TOK_NFILES; i++) sum += bytes[i] > 0 ? bytes[i] : 0;
    return sum;
}

/* A one-dimensional dataset of n bytes at /tokenizer/<name>, its space
 * allocated now (rank 0 writes it alone).  Collective. */
static hid_t create_bytes(hid_t grp, const char *name, int64_t n)
{
    hsize_t dims[1] = {(hsize_t)n};
    hid_t fs = H5Screate_simple(1, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t ds = H5Dcreate2(grp, name, H5T_NATIVE_UINT8, fs, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(fs);
    return ds;
}

/* Move piece [at, at + n) of the byte dataset ds to or from buf (this
 * process alone: independent transfer).  0, or -1. */
static int transfer_piece(hid_t ds, int writing, hsize_t at, size_t n, void *buf)
{
    hsize_t start[1] = {at}, count[1] = {n};
    hid_t fs = H5Dget_space(ds), ms = H5Screate_simple(1, count, NULL);
    int rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ? -1
             : writing ? (H5Dwrite(ds, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, buf) < 0 ? -1 : 0)
                       : (H5Dread(ds, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, buf) < 0 ? -1 : 0);
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

/* Rank 0: dir/name (n bytes) into ds, its hash in *sum.  0, or -1 with err. */
static int store_file(hid_t ds, const char *dir, const char *name, int64_t n, uint64_t *sum, char *err,
                      size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *in = fopen(path, "rb");
    if (!in) return errorf(err, errlen, "rank 0: cannot read the tokenizer's %s: %s", path, strerror(errno));
    unsigned char *buf = malloc(PIECE);
    int rc = buf ? 0 : errorf(err, errlen, "rank 0: out of memory for a buffer to store the tokenizer's %s", name);
    *sum = FNV1A_INIT;
    for (int64_t at = 0; rc == 0 && at < n;) {
        size_t want = n - at < (int64_t)PIECE ? (size_t)(n - at) : PIECE, got = fread(buf, 1, want, in);
        if (got != want)
            rc = errorf(err, errlen, "rank 0: %s changed while it was stored in the checkpoint (%lld bytes expected)",
                        path, (long long)n);
        else if (transfer_piece(ds, 1, (hsize_t)at, got, buf) != 0) {
            errorf(err, errlen, "rank 0: writing the tokenizer's %s into the checkpoint failed", name);
            rc = CKPT_WRITE_FAILED;
        }
        *sum = fnv1a(*sum, buf, got);
        at += (int64_t)got;
    }
    free(buf);
    fclose(in);
    return rc;
}

static void attach_checksum(hid_t ds, uint64_t sum)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(ds, "checksum", H5T_NATIVE_UINT64, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_UINT64, &sum);
    H5Aclose(a);
    H5Sclose(s);
}

int ckpt_write_tokenizer(hid_t f, const char *dir, const struct grid *g, char *err, size_t errlen)
{
    int64_t bytes[CKPT_TOK_NFILES];
    uint64_t sums[CKPT_TOK_NFILES] = {0};
    if (g->rank == 0) survey(dir, bytes);
    MPI_CHECK(MPI_Bcast(bytes, CKPT_TOK_NFILES, MPI_INT64_T, 0, g->world_comm));
    if (bytes[CKPT_TOK_JSON] < 0 && bytes[CKPT_TOK_VOCAB] < 0) return 0; /* (a run without a tokenizer of its own) */
    hid_t grp = H5Gcreate2(f, "/tokenizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), ds[CKPT_TOK_NFILES];
    if (grp < 0) snprintf(err, errlen, "rank %d: creating /tokenizer in the checkpoint failed", g->rank);
    /* (agreed before the datasets, whose creation every rank must make) */
    int rc = mpi_agree_error(g->world_comm, grp < 0, err, errlen), bad = 0;
    for (int i = 0; i < CKPT_TOK_NFILES; i++) {
        ds[i] = bytes[i] < 0 || rc != 0 ? -1 : create_bytes(grp, ckpt_tok_name(i), bytes[i]);
        if (bytes[i] >= 0 && rc == 0 && ds[i] < 0) bad = 1;
    }
    if (bad) snprintf(err, errlen, "rank %d: creating /tokenizer in the checkpoint failed", g->rank);
    if (rc == 0) rc = mpi_agree_error(g->world_comm, bad, err, errlen);
    for (int i = 0; i < CKPT_TOK_NFILES && rc == 0 && g->rank == 0; i++)
        if (ds[i] >= 0) rc = store_file(ds[i], dir, ckpt_tok_name(i), bytes[i], &sums[i], err, errlen);
    int wrote_badly = rc == CKPT_WRITE_FAILED;
    rc = mpi_agree_error(g->world_comm, rc != 0, err, errlen);
    MPI_CHECK(MPI_Bcast(sums, CKPT_TOK_NFILES, MPI_UINT64_T, 0, g->world_comm));
    for (int i = 0; i < CKPT_TOK_NFILES; i++) {
        if (ds[i] < 0) continue;
        if (rc == 0) attach_checksum(ds[i], sums[i]); /* (collective metadata: every rank) */
        H5Dclose(ds[i]);
    }
    if (grp >= 0) H5Gclose(grp);
    return rc != 0 && wrote_badly ? CKPT_WRITE_FAILED : rc;
}

/* The size of the byte dataset ds (file `name` of ckpt) in *n and its
 * checksum in *stored: metadata, so read by every process that opened the
 * file (collectively, in parallel HDF5).  0, or -1 with err. */
static int stored_file(hid_t ds, const char *ckpt, const char *name, hsize_t *n, uint64_t *stored, char *err,
                       size_t errlen)
{
    hid_t fs = H5Dget_space(ds), a = -1;
    int rc = 0;
    *n = 0;
    if (fs < 0 || H5Sget_simple_extent_ndims(fs) != 1 || H5Sget_simple_extent_dims(fs, n, NULL) < 0)
        rc = errorf(err, errlen, "%s: /tokenizer/%s is not a vector of bytes", ckpt, name);
    else if (H5Aexists(ds, "checksum") <= 0 || (a = H5Aopen(ds, "checksum", H5P_DEFAULT)) < 0 ||
             H5Aread(a, H5T_NATIVE_UINT64, stored) < 0)
        rc = errorf(err, errlen, "%s: /tokenizer/%s has no checksum: the checkpoint is damaged", ckpt, name);
    if (fs >= 0) H5Sclose(fs);
    if (a >= 0) H5Aclose(a);
    return rc;
}

/* Where a stored file's bytes go as they are read (NULL: only hashed). */
typedef int (*byte_sink)(void *ctx, const void *buf, size_t n);

/* Read the byte dataset ds (file `name` of ckpt) in pieces into sink and
 * compare their hash with its checksum (stored, n: what stored_file
 * read).  This process alone.  0, or -1 with err. */
static int read_checked(hid_t ds, const char *ckpt, const char *name, uint64_t stored, hsize_t n, byte_sink sink,
                        void *ctx, char *err, size_t errlen)
{
    uint64_t sum = FNV1A_INIT;
    unsigned char *buf = malloc(PIECE);
    int rc = buf ? 0 : errorf(err, errlen, "%s: out of memory for a buffer to read /tokenizer/%s", ckpt, name);
    for (hsize_t at = 0; rc == 0 && at < n; at += PIECE) {
        size_t len = n - at < PIECE ? (size_t)(n - at) : PIECE;
        if (transfer_piece(ds, 0, at, len, buf) != 0)
            rc = errorf(err, errlen, "%s: reading /tokenizer/%s failed (truncated or corrupted file?)", ckpt, name);
        else if (sink && sink(ctx, buf, len) != 0)
            rc = errorf(err, errlen, "writing the tokenizer's %s failed: %s", name, strerror(errno));
        else sum = fnv1a(sum, buf, len);
    }
    free(buf);
    if (rc == 0 && sum != stored)
        rc = errorf(err, errlen, "%s: the tokenizer's %s does not match its checksum (stored %016llx, data %016llx): "
                    "the checkpoint is damaged", ckpt, name, (unsigned long long)stored, (unsigned long long)sum);
    return rc;
}

/* Do the stored files (have[i]: ckpt_tok_name(i) is there) make a tokenizer, as
 * survey stores one?  0, or -1 with err. */
static int whole_set(const int have[CKPT_TOK_NFILES], const char *ckpt, char *err, size_t errlen)
{
    if (have[CKPT_TOK_JSON] || (have[CKPT_TOK_VOCAB] && have[CKPT_TOK_MERGES])) return 0;
    return errorf(err, errlen, "%s: /tokenizer holds neither tokenizer.json nor GPT-2's vocab.json and merges.txt: the "
                  "checkpoint is damaged", ckpt);
}

/* Every process opens the stored files (collective metadata, in parallel
 * HDF5); the reader checks their bytes.  0, or -1 with err. */
static int check_stored(hid_t f, const char *ckpt, int reader, char *err, size_t errlen)
{
    if (H5Lexists(f, "/tokenizer", H5P_DEFAULT) <= 0) return 0;
    int rc = 0, have[CKPT_TOK_NFILES] = {0};
    for (int i = 0; i < CKPT_TOK_NFILES; i++) {
        char path[64];
        snprintf(path, sizeof path, "/tokenizer/%s", ckpt_tok_name(i));
        if (H5Lexists(f, path, H5P_DEFAULT) <= 0) continue;
        have[i] = 1;
        hid_t ds = H5Dopen2(f, path, H5P_DEFAULT);
        hsize_t n;
        uint64_t stored;
        if (ds < 0) rc = errorf(err, errlen, "%s: %s does not open: the checkpoint is damaged", ckpt, path);
        else if (stored_file(ds, ckpt, ckpt_tok_name(i), &n, &stored, err, errlen) != 0) rc = -1;
        else if (reader && rc == 0) rc = read_checked(ds, ckpt, ckpt_tok_name(i), stored, n, NULL, NULL, err, errlen);
        if (ds >= 0) H5Dclose(ds);
    }
    return rc ? rc : whole_set(have, ckpt, err, errlen);
}

int ckpt_verify_tokenizer(hid_t f, const struct grid *g, char *err, size_t errlen)
{
    int rc = check_stored(f, "the checkpoint", g->rank == 0, err, errlen);
    return mpi_agree_error(g->world_comm, rc != 0, err, errlen);
}

int ckpt_check_tokenizer(hid_t f, const char *ckpt, char *err, size_t errlen)
{
    return check_stored(f, ckpt, 1, err, errlen);
}

static int to_file(void *ctx, const void *buf, size_t n) { return fwrite(buf, 1, n, ctx) == n ? 0 : -1; }

/* /tokenizer/<name> of ckpt to dir/name, through dir/name.tmp.  0, or -1. */
static int extract_file(hid_t f, const char *ckpt, const char *name, const char *dir, char *err, size_t errlen)
{
    char path[64], to[4200], tmp[4300];
    snprintf(path, sizeof path, "/tokenizer/%s", name);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", to);
    hid_t ds = H5Dopen2(f, path, H5P_DEFAULT);
    if (ds < 0) return errorf(err, errlen, "%s: %s does not open: the checkpoint is damaged", ckpt, path);
    FILE *out = fopen(tmp, "wb");
    hsize_t n;
    uint64_t stored;
    int rc = !out ? errorf(err, errlen, "cannot write %s: %s", tmp, strerror(errno))
             : stored_file(ds, ckpt, name, &n, &stored, err, errlen) != 0
                 ? -1
                 : read_checked(ds, ckpt, name, stored, n, to_file, out, err, errlen);
    H5Dclose(ds);
    if (out && rc == 0 && (fflush(out) != 0 || fsync(fileno(out)) != 0))
        rc = errorf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    if (out && fclose(out) != 0 && rc == 0) rc = errorf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, to) != 0) rc = errorf(err, errlen, "cannot rename %s: %s", tmp, strerror(errno));
    if (rc) unlink(tmp);
    return rc;
}

int ckpt_extract_tokenizer(const char *ckpt, const char *dir, char *err, size_t errlen)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(ckpt, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return ckpt_open_failed(ckpt, err, errlen);
    int rc = H5Lexists(f, "/tokenizer", H5P_DEFAULT) > 0 ? 1 : 0, have[CKPT_TOK_NFILES] = {0};
    for (int i = 0; i < CKPT_TOK_NFILES && rc == 1; i++) {
        char path[64];
        snprintf(path, sizeof path, "/tokenizer/%s", ckpt_tok_name(i));
        have[i] = H5Lexists(f, path, H5P_DEFAULT) > 0;
        if (have[i] && extract_file(f, ckpt, ckpt_tok_name(i), dir, err, errlen) != 0) rc = -1;
    }
    H5Fclose(f);
    return rc == 1 && whole_set(have, ckpt, err, errlen) ? -1 : rc;
}
