/* ckpt_name.c -- checkpoints' file names and the reasons a file does not
 * open as one (ckpt_name.h). */
#include "ckpt_name.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "log.h"

int ckpt_step_of(const char *name, int64_t *step)
{
    long long s;
    char tail[8];
    if (sscanf(name, "ckpt_%lld.h5%7s", &s, tail) != 1) return -1;
    *step = s;
    return 0;
}

/* The checkpoints ckpt_<step>.h5 folder dir holds: their number (-1: dir
 * does not list, errno set), the oldest and newest step. */
static int list_checkpoints(const char *dir, int64_t *oldest, int64_t *newest)
{
    DIR *dp = opendir(dir);
    if (!dp) return -1;
    int n = 0;
    int64_t s;
    struct dirent *d;
    *oldest = *newest = -1;
    while ((d = readdir(dp)))
        if (ckpt_step_of(d->d_name, &s) == 0) {
            n++;
            if (*newest < 0 || s > *newest) *newest = s;
            if (*oldest < 0 || s < *oldest) *oldest = s;
        }
    closedir(dp);
    return n;
}

/* "; DIR holds N checkpoints, ckpt_A.h5 to ckpt_B.h5", or " (DIR holds no
 * checkpoint ckpt_<step>.h5)", into out. */
static void say_checkpoints(const char *dir, int n, int64_t oldest, int64_t newest, char *out, size_t len)
{
    if (n == 0) snprintf(out, len, " (%s holds no checkpoint ckpt_<step>.h5)", dir);
    else if (n == 1) snprintf(out, len, "; %s holds 1 checkpoint, ckpt_%lld.h5", dir, (long long)oldest);
    else
        snprintf(out, len, "; %s holds %d checkpoints, ckpt_%lld.h5 to ckpt_%lld.h5", dir, n, (long long)oldest,
                 (long long)newest);
}

int ckpt_open_failed(const char *path, char *err, size_t errlen)
{
    struct stat sb;
    char held[4400];
    int64_t oldest = -1, newest = -1;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) { /* (a run directory for one of its checkpoints) */
        int n = list_checkpoints(path, &oldest, &newest);
        say_checkpoints(path, n < 0 ? 0 : n, oldest, newest, held, sizeof held);
        return errorf(err, errlen, "cannot open %s: it is a folder, not a checkpoint%s%s", path, held,
                      n > 0 ? "\n  hint: give one of those, e.g. ckpt_<step>.h5 of the newest step" : "");
    }
    if (access(path, R_OK) == 0) {
        long long size = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
        const char *llmc = file_llmc_kind_of(path);
        if (llmc) return errorf(err, errlen, "cannot open %s as HDF5: it is not a triad checkpoint but %s", path,
                                llmc);
        static const unsigned char hdf5[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'}; /* the format signature */
        unsigned char head[8] = {0};
        FILE *f = fopen(path, "rb");
        int signed_hdf5 = f && fread(head, 1, sizeof head, f) == sizeof head && !memcmp(head, hdf5, sizeof head);
        if (f) fclose(f);
        int e = file_read_probe(path);
        if (e) /* (not the file's fault, perhaps) */
            return errorf(err, errlen, "cannot read %s: %s%s", path, strerror(e), file_read_words(e));
        if (!signed_hdf5)
            return errorf(err, errlen, "cannot open %s: it is not an HDF5 file (%lld bytes, without HDF5's signature)",
                          path, size);
        if (file_locked_by_another(path))
            return errorf(err, errlen, "cannot open %s: another program holds it open with HDF5's file lock (a job "
                          "writing it, or h5py, h5dump, ... opened without HDF5_USE_FILE_LOCKING=FALSE); nothing is "
                          "wrong with the file\n  hint: wait for that program, or find it with fuser %s", path, path);
        return errorf(err, errlen, "cannot open %s: an HDF5 file (%lld bytes) that HDF5 could not open: truncated or "
                      "damaged\n  hint: copy it again, or give an earlier checkpoint", path, size);
    }
    int e = errno;
    if (e != ENOENT) return errorf(err, errlen, "cannot open %s: %s", path, strerror(e));
    /* missing: what its directory holds instead (a run keeps its newest
     * io.keep_checkpoints alone) */
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
    int n = list_checkpoints(dir, &oldest, &newest);
    if (n < 0)
        return errorf(err, errlen, "cannot open %s: no such file (its directory %s: %s)", path, dir, strerror(errno));
    say_checkpoints(dir, n, oldest, newest, held, sizeof held);
    int64_t step;
    int rotated = n > 0 && ckpt_step_of(base, &step) == 0; /* (a checkpoint's name: rotated out, perhaps) */
    return errorf(err, errlen, "cannot open %s: no such file%s%s%s", path, held,
                  rotated ? " (a run keeps its newest io.keep_checkpoints alone)" : "",
                  n > 0 ? "\n  hint: give one of those" : "");
}
