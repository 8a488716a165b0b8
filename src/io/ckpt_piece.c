/* ckpt_piece.c -- a checkpoint written outside HDF5 (ckpt_piece.h): the
 * pieces listed, the file created with their space allocated, the file
 * sealed once they are written. */
#include "ckpt_piece.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_file.h"
#include "ckpt_sum.h"
#include "ckpt_tok.h"
#include "flight.h"
#include "log.h"

/* The owned selections, in walk order (w->pieces has room for every dataset). */
static int list_piece(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    (void)file;
    if (ckpt_owner(t, w->g) && t->elems > 0) w->pieces[w->npieces++] = (struct ckpt_piece){*t, 0, w->next};
    return 0;
}

int ckpt_pieces(const struct model *m, const struct optim *o, const struct grid *g, struct ckpt_piece **pieces,
                int *n)
{
    struct state_buf sb[3];
    ckpt_state_bufs(m, o, sb);
    int datasets = 3 * ckpt_datasets_per_prefix(m);
    char err[8];
    struct walk_ctx w = {.g = g, .err = err, .errlen = sizeof err,
                         .pieces = calloc((size_t)datasets, sizeof(struct ckpt_piece))};
    *pieces = w.pieces;
    *n = 0;
    if (!w.pieces) return -1;
    for (int p = 0; p < 3; p++) ckpt_walk(-1, ckpt_prefix[p], m, &sb[p], list_piece, &w);
    *n = w.npieces;
    return datasets;
}

/* A dataset stored in one piece, its space allocated now (its bytes written
 * later, at their offset); the owner notes where it starts. */
static int create_allocated(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    hid_t fs = H5Screate_simple(t->rank, t->dims, NULL);
    hid_t ds = ckpt_create_dataset(file, t, fs, 1);
    haddr_t at = ds < 0 ? HADDR_UNDEF : H5Dget_offset(ds);
    struct ckpt_piece *mine = w->cursor < w->npieces && w->pieces[w->cursor].index == w->next
                                  ? &w->pieces[w->cursor++] : NULL;
    if (mine) mine->offset = (uint64_t)at;
    if (ds >= 0) H5Dclose(ds);
    H5Sclose(fs);
    if (ds < 0 || at == HADDR_UNDEF) ckpt_walk_fail(w, "rank %d: creating %s failed", w->g->rank, t->path);
    return ds < 0 || at == HADDR_UNDEF ? -1 : 0;
}

int ckpt_create_allocated(const char *run_dir, const struct ckpt_state *st, const struct model *m,
                          const struct optim *o, const char *deck, const struct grid *g, struct ckpt_piece *pieces,
                          int n, char *tmp, size_t tmplen, int *reserved, char *err, size_t errlen)
{
    hid_t f = ckpt_create_tmp(run_dir, st->step, m, g, tmp, tmplen, err, errlen);
    if (f < 0) return -1;
    int rc = 0;
    struct state_buf sb[3];
    ckpt_state_bufs(m, o, sb);
    struct walk_ctx w = {.g = g, .err = err, .errlen = errlen, .pieces = pieces, .npieces = n};
    for (int p = 0; p < 3; p++) rc |= ckpt_walk(f, ckpt_prefix[p], m, &sb[p], create_allocated, &w);
    rc = ckpt_agree(rc, err, errlen, g); /* (the attributes are collective metadata) */
    if (rc == 0) ckpt_write_attributes(f, st, deck, g);
    if (rc == 0) rc = ckpt_write_tokenizer(f, run_dir, g, err, errlen);
    rc = ckpt_close_and_flush(f, tmp, rc, g, err, errlen); /* (a failed write: left open, the job aborts) */
    /* the data's blocks reserved now (HDF5 only reserved addresses): a disk
     * that cannot hold the file says so here, and the free space the run
     * checks is what is left; 1 in *reserved where that was done */
    uint64_t end = 0;
    for (int i = 0; i < n; i++) {
        const struct tensor_ref *t = &pieces[i].t;
        uint64_t e = pieces[i].offset + 4 * (uint64_t)t->dims[0] * (t->rank == 2 ? t->dims[1] : 1);
        if (e > end) end = e;
    }
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &end, 1, MPI_UINT64_T, MPI_MAX, g->world_comm));
    *reserved = 0;
    if (rc == 0 && g->rank == 0) {
        int fd = open(tmp, O_WRONLY), e = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)end);
        if (fd >= 0) close(fd);
        if (e == 0) *reserved = 1;
        else if (e != EINVAL && e != EOPNOTSUPP) { /* (a file system without the call: the run counts the file) */
            snprintf(err, errlen, "rank 0: cannot reserve the %.0f KiB of %s: %s", (double)end / 1024, tmp,
                     strerror(e));
            rc = -1;
        }
    }
    rc = ckpt_agree(rc, err, errlen, g);
    if (rc != 0) ckpt_discard_tmp(tmp, g);
    return rc;
}

int ckpt_seal(const char *run_dir, const char *tmp, int64_t step, const struct model *m, const struct optim *o,
              uint64_t *sums, int failed, const struct grid *g, int keep, char *err, size_t errlen)
{
    int rc = ckpt_agree(failed, err, errlen, g), datasets = 3 * ckpt_datasets_per_prefix(m);
    struct state_buf sb[3];
    ckpt_state_bufs(m, o, sb);
    struct walk_ctx w = {.g = g, .sums = sums, .err = err, .errlen = errlen};
    hid_t f = -1;
    if (rc == 0) { /* the checksums, now that the owners' sums can meet */
        ckpt_sums_reduce(sums, datasets, g);
        f = ckpt_open(tmp, CKPT_OPEN_UPDATE, g);
        if (f < 0) snprintf(err, errlen, "rank %d: %s does not open as HDF5 after writing it", g->rank, tmp);
        rc = ckpt_agree(f < 0, err, errlen, g);
        if (rc != 0) flight_within(NULL); /* (open on some ranks only: left open, its close is collective) */
    }
    if (rc == 0) {
        for (int p = 0; p < 3; p++) rc |= ckpt_walk(f, ckpt_prefix[p], m, &sb[p], ckpt_attach_checksum, &w);
        rc = ckpt_close_and_flush(f, tmp, rc, g, err, errlen);
    }
    if (rc == 0) { /* what is stored beside the data (each owner read its data back already) */
        f = ckpt_open(tmp, CKPT_OPEN_READ, g);
        if (f < 0) snprintf(err, errlen, "rank %d: %s does not open as HDF5 after writing it", g->rank, tmp);
        rc = ckpt_agree(f < 0, err, errlen, g);
        w.next = 0;
        for (int p = 0; p < 3 && rc == 0; p++)
            rc |= ckpt_walk(f, ckpt_prefix[p], m, &sb[p], ckpt_verify_checksum, &w);
        if (rc == 0) rc = ckpt_check_step(f, tmp, step, g, err, errlen);
        rc = ckpt_agree(rc, err, errlen, g);
        if (rc == 0) rc = ckpt_verify_tokenizer(f, g, err, errlen);
        if (f >= 0) H5Fclose(f);
        rc = ckpt_agree(rc, err, errlen, g);
    }
    return ckpt_publish(run_dir, tmp, step, keep, rc, g, err, errlen);
}
