/* lineage.c -- run_dir/checkpoints.txt: the checkpoints of the run, in order. */
#include "lineage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_tok.h"
#include "log.h"

int lineage_read(const char *run_dir, struct lineage *l, char *err, size_t errlen)
{
    char path[4096], line[256];
    snprintf(path, sizeof path, "%s/%s", run_dir, LINEAGE_FILE);
    l->n = 0;
    l->present = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    l->present = 1;
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        long long step;
        char tail[8];
        if (sscanf(line, "ckpt_%lld.h5%7s", &step, tail) != 1 || l->n == LINEAGE_MAX) {
            snprintf(err, errlen, "%s:%d is not a checkpoint line ('ckpt_<step>.h5'): the manifest is damaged", path,
                     lineno);
            fclose(f);
            return -1;
        }
        l->step[l->n++] = step;
    }
    fclose(f);
    return 0;
}

int lineage_write(const char *run_dir, const struct lineage *l, char *err, size_t errlen)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", run_dir, LINEAGE_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int rc = f ? 0 : -1;
    if (f) {
        fprintf(f, "# the checkpoints of this run, oldest first (triad: rotation and restart = 'auto' follow it)\n");
        for (int i = 0; i < l->n; i++) fprintf(f, "ckpt_%lld.h5\n", (long long)l->step[i]);
        if (fflush(f) != 0 || fsync(fileno(f)) != 0) rc = -1;
        if (fclose(f) != 0) rc = -1;
    }
    if (rc == 0 && rename(tmp, path) != 0) rc = -1;
    if (rc != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
    return rc;
}

int lineage_find(const struct lineage *l, int64_t step)
{
    for (int i = 0; i < l->n; i++)
        if (l->step[i] == step) return i;
    return -1;
}

/* What kind of a run's output a directory entry is: 'm' metrics.h5, 'l' the
 * manifest, 'c' a checkpoint, 'o' another file of a run (a temporary
 * checkpoint, the trace, the copy of its tokenizer's files), 0 none. */
static int output_kind(const char *name)
{
    long long s;
    char tail[16];
    if (!strcmp(name, "metrics.h5")) return 'm';
    if (!strcmp(name, LINEAGE_FILE)) return 'l';
    int n = sscanf(name, "ckpt_%lld.h5%15s", &s, tail);
    if (n == 1) return 'c';
    for (int i = 0; i < CKPT_TOK_NFILES; i++) /* the run's copy of its tokenizer */
        if (!strcmp(name, ckpt_tok_name(i))) return 'o';
    return n == 2 || !strcmp(name, "trace.json") ? 'o' : 0;
}

int lineage_dir_in_use(const char *run_dir, char *what, size_t whatlen)
{
    DIR *dp = opendir(run_dir);
    int metrics = 0, manifest = 0, ckpts = 0;
    struct dirent *e;
    while (dp && (e = readdir(dp))) {
        int k = output_kind(e->d_name);
        metrics |= k == 'm', manifest |= k == 'l', ckpts += k == 'c';
    }
    if (dp) closedir(dp);
    static struct lineage l; /* (large: not on the stack) */
    char err[8];
    if (manifest && !metrics && !ckpts && lineage_read(run_dir, &l, err, sizeof err) == 0 && l.n == 0)
        manifest = 0; /* (one that lists nothing: a run that stopped before its first checkpoint left no output) */
    what[0] = '\0';
    if (metrics) snprintf(what, whatlen, "metrics.h5");
    if (ckpts)
        snprintf(what + strlen(what), whatlen - strlen(what), "%s%d checkpoint%s", what[0] ? " and " : "", ckpts,
                 ckpts > 1 ? "s" : "");
    if (manifest && !metrics && !ckpts) snprintf(what, whatlen, "%s", LINEAGE_FILE);
    return metrics || manifest || ckpts;
}

void lineage_fresh_dir(const char *run_dir, const char *base, char *out, size_t outlen)
{
    struct stat st;
    for (int k = 1; k < 100000; k++) {
        snprintf(out, outlen, "%s/%s.%d", run_dir, base, k);
        if (stat(out, &st) != 0) return;
    }
}

int lineage_move_aside(const char *run_dir, const char *sub, const char *name, char *err, size_t errlen)
{
    char from[4096], to[8400];
    snprintf(from, sizeof from, "%s/%s", run_dir, name);
    snprintf(to, sizeof to, "%s/%s", sub, name);
    if ((mkdir(sub, 0777) != 0 && errno != EEXIST) || rename(from, to) != 0) {
        snprintf(err, errlen, "cannot move %s to %s: %s", from, to, strerror(errno));
        return -1;
    }
    return 0;
}

static int cmp_step(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int lineage_move_later(const char *run_dir, int64_t step, char *sub, size_t sublen, char *err, size_t errlen)
{
    static int64_t later[LINEAGE_MAX];
    int n = 0;
    DIR *dp = opendir(run_dir);
    struct dirent *e;
    while (dp && (e = readdir(dp)) && n < LINEAGE_MAX) {
        long long s;
        char tail[8];
        if (sscanf(e->d_name, "ckpt_%lld.h5%7s", &s, tail) == 1 && s > step) later[n++] = s;
    }
    if (dp) closedir(dp);
    qsort(later, (size_t)n, sizeof later[0], cmp_step);
    sub[0] = '\0';
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "ckpt_%lld.h5", (long long)later[i]);
        if (!sub[0]) lineage_fresh_dir(run_dir, "abandoned", sub, sublen);
        if (lineage_move_aside(run_dir, sub, name, err, errlen) != 0) return -1;
        log_info("%s is later than the restart's checkpoint: moved to %s/\n", name, sub);
    }
    return n;
}

int lineage_move_output(const char *run_dir, char *sub, size_t sublen, char *err, size_t errlen)
{
    lineage_fresh_dir(run_dir, "superseded", sub, sublen);
    DIR *dp = opendir(run_dir);
    struct dirent *e;
    int rc = 0;
    while (dp && (e = readdir(dp)) && rc == 0)
        if (output_kind(e->d_name)) rc = lineage_move_aside(run_dir, sub, e->d_name, err, errlen);
    if (dp) closedir(dp);
    return rc;
}
