/* tokenize.c -- `triad tokenize`: text files as llm.c token shards
 * (tokenize.h, docs/data.md).  Every rank reads the documents in the same
 * order; a batch of them is split between the ranks, each encodes its part,
 * and rank 0 gathers the ids in document order and writes them, so the
 * shards are the same bytes whatever the number of ranks. */
#include "tokenize.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "json.h"
#include "log.h"
#include "tokenizer.h"
#include "train.h"

enum { BATCH_DOCS = 2048, SHARD_HEADER = 256 };

/* ------------------------------------------------------------ the documents */

struct reader {
    const struct config *cfg;
    glob_t files;
    size_t file;       /* the file being read */
    FILE *fp;
    long line;         /* its line number */
    char *buf;         /* the current line */
    size_t cap;
    double bytes_read, bytes_total;
};

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* What a file that is no text is, by its first bytes: an llm.c file (a
 * token shard: this command's own output among them), HDF5 (a checkpoint,
 * metrics.h5) or a Megatron-LM index; NULL for anything else (text, whose
 * invalid UTF-8 is replaced as the tokenizer does). */
static const char *not_text(const char *path)
{
    unsigned char b[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    if (got == sizeof b && !memcmp(b, "\x89HDF\r\n\x1a\n", 8)) return "an HDF5 file (a checkpoint or a metrics.h5?)";
    if (got == sizeof b && !memcmp(b, "MMIDIDX\0", 8)) return "a Megatron-LM index (.idx)";
    return file_llmc_kind_of(path);
}

static int reader_open(struct reader *r, const struct config *cfg, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    if (!cfg->tokenize.input[0]) return errorf(err, errlen, "tokenize.input is empty: name the text files (a glob)");
    int rc = glob(cfg->tokenize.input, 0, NULL, &r->files);
    if (rc != 0)
        return errorf(err, errlen, "no file matches tokenize.input = '%s'", cfg->tokenize.input);
    qsort(r->files.gl_pathv, r->files.gl_pathc, sizeof *r->files.gl_pathv, cmp_str);
    for (size_t i = 0; i < r->files.gl_pathc; i++) {
        struct stat sb;
        const char *f = r->files.gl_pathv[i];
        if (stat(f, &sb) != 0) return errorf(err, errlen, "%s: %s", f, strerror(errno));
        if (!S_ISREG(sb.st_mode)) {
            int named = strcmp(f, cfg->tokenize.input) == 0, dir = S_ISDIR(sb.st_mode);
            return errorf(err, errlen, "%s (matched by tokenize.input = '%s') is %s, not a regular file of text: %s%s%s",
                          f, cfg->tokenize.input,
                          dir ? "a folder" : S_ISFIFO(sb.st_mode) ? "a pipe (FIFO)"
                          : S_ISCHR(sb.st_mode) ? "a character device" : S_ISSOCK(sb.st_mode) ? "a socket"
                          : "a special file",
                          named && dir ? "name the files in it, e.g. '" : "name only text files (a glob such as "
                          "'folder/*.txt')", named && dir ? f : "", named && dir ? "/*.txt'" : "");
        }
        const char *kind = not_text(f);
        if (kind)
            return errorf(err, errlen, "%s (matched by tokenize.input = '%s') is %s, not text: name only text files "
                          "(a glob such as 'folder/*.txt' that matches no shard or other output)", f,
                          cfg->tokenize.input, kind);
        r->bytes_total += (double)sb.st_size;
    }
    return 0;
}

static void reader_close(struct reader *r)
{
    if (r->fp) fclose(r->fp);
    free(r->buf);
    globfree(&r->files);
}

/* The next line of the current file into r->buf (with its newline):
 * its length, 0 at the file's end, -1 on a read error. */
static ssize_t next_line(struct reader *r) { return getline(&r->buf, &r->cap, r->fp); }

static int append(char **doc, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < *len + n + 1) c *= 2;
        char *g = realloc(*doc, c);
        if (!g) return -1;
        *doc = g, *cap = c;
    }
    memcpy(*doc + *len, s, n);
    *len += n;
    (*doc)[*len] = 0;
    return 0;
}

/* The next document into *doc (its length in *len): 1, 0 when there are no
 * more, -1 with err (the file and line). */
static int next_document(struct reader *r, char **doc, size_t *len, size_t *cap, char *err, size_t errlen)
{
    const struct config *c = r->cfg;
    int jsonl = c->tokenize.format_id == TOKENIZE_FORMAT_jsonl, whole = !jsonl && !c->tokenize.separator[0];
    *len = 0;
    for (;;) {
        if (!r->fp) {
            if (r->file == r->files.gl_pathc) return *len > 0;
            const char *path = r->files.gl_pathv[r->file];
            if (!(r->fp = fopen(path, "rb"))) return errorf(err, errlen, "%s: cannot open it: %s", path, strerror(errno));
            r->line = 0;
        }
        const char *path = r->files.gl_pathv[r->file];
        errno = 0;
        ssize_t n = next_line(r);
        if (n < 0) {
            if (errno) return errorf(err, errlen, "%s: cannot read it: %s", path, strerror(errno));
            fclose(r->fp), r->fp = NULL, r->file++;
            if ((whole || (!jsonl && *len > 0))) return 1; /* (a file ends its last document) */
            continue;
        }
        r->line++;
        r->bytes_read += (double)n;
        if (jsonl) { /* the line as it is, and where it is: parsed by the rank that encodes it (jsonl_text) */
            size_t k = (size_t)n;
            while (k && (r->buf[k - 1] == '\n' || r->buf[k - 1] == '\r' || r->buf[k - 1] == ' ')) k--;
            if (k == 0) continue; /* a blank line */
            char where[64];
            int w = snprintf(where, sizeof where, "%zu:%ld:", r->file, r->line);
            if (append(doc, len, cap, where, (size_t)w) || append(doc, len, cap, r->buf, k))
                return errorf(err, errlen, "out of memory");
            return 1;
        }
        size_t k = (size_t)n, sl = strlen(c->tokenize.separator), e = k;
        if (e && r->buf[e - 1] == '\n') e--;
        if (e && r->buf[e - 1] == '\r') e--; /* (the line without its end, LF or CR LF) */
        if (!whole && e == sl && memcmp(r->buf, c->tokenize.separator, sl) == 0) {
            if (*len > 0) return 1;
            continue; /* (an empty document is none) */
        }
        if (append(doc, len, cap, r->buf, k)) return errorf(err, errlen, "out of memory");
    }
}

/* A JSON Lines document (as next_document gives it: "FILE:LINE:" then the
 * line) as its text: the field tokenize.field.  0, or -1 with err naming
 * the file and line. */
static int jsonl_text(const struct reader *r, const char *doc, size_t len, char **text, size_t *tlen, char *err,
                      size_t errlen)
{
    size_t file = 0;
    long line = 0;
    int at = 0;
    sscanf(doc, "%zu:%ld:%n", &file, &line, &at);
    const char *path = file < r->files.gl_pathc ? r->files.gl_pathv[file] : "?";
    char jerr[256];
    struct json *j = json_parse_object(doc + at, len - (size_t)at, jerr, sizeof jerr);
    const struct json *v = json_get(j, r->cfg->tokenize.field);
    int rc = 0;
    if (!j)
        rc = errorf(err, errlen, "%s:%ld: %s", path, line, jerr);
    else if (!v || v->kind != JSON_STRING)
        rc = errorf(err, errlen, "%s:%ld: no string member \"%s\" (tokenize.field)", path, line, r->cfg->tokenize.field);
    else if (!(*text = strdup(v->string)))
        rc = errorf(err, errlen, "out of memory");
    else
        *tlen = strlen(v->string);
    json_free(j);
    return rc;
}

/* ------------------------------------------------------------ the shards */

struct writer {
    const struct config *cfg;
    int wide;              /* uint32 tokens (the vocabulary does not fit 16 bits) */
    FILE *fp;
    char name[CONFIG_STRLEN + 64], tmp[CONFIG_STRLEN + 72];
    long long in_shard, total[2];
    int split, index[2];   /* 0 val, 1 train; the next shard's number in each */
    char **done;           /* the shards written, removed again on an error */
    int ndone;
    struct file_made_dirs made; /* the folders of the prefix this run made */
};

/* A file system without hard links (link's errno): the shard is renamed
 * into place there, as it is written. */
static int no_links(int e)
{
    return e == EPERM || e == ENOTSUP || e == EOPNOTSUPP || e == ENOSYS;
}

/* A shard or temporary at path that another process made under the
 * prefix while this run wrote: -1 with err. */
static int made_by_another(const struct writer *w, const char *path, char *err, size_t errlen)
{
    return errorf(err, errlen, "%s appeared while this run wrote its shards: another process writes to "
                  "tokenize.output = '%s'; it is left as it is\n  hint: give each run its own tokenize.output", path,
                  w->cfg->tokenize.output);
}

static int shard_close(struct writer *w, char *err, size_t errlen)
{
    if (!w->fp) return 0;
    int32_t h[SHARD_HEADER] = {w->wide ? 20240801 : 20240520, w->wide ? 7 : 1, (int32_t)w->in_shard};
    int rc = fseek(w->fp, 0, SEEK_SET) != 0 || fwrite(h, sizeof h, 1, w->fp) != 1 || fflush(w->fp) != 0 ||
             fsync(fileno(w->fp)) != 0;
    rc |= fclose(w->fp) != 0;
    w->fp = NULL;
    /* (link, not rename: a shard that appeared since no_old_shards looked,
     * another process's, is never replaced) */
    if (rc || (link(w->tmp, w->name) != 0 && !(no_links(errno) && rename(w->tmp, w->name) == 0))) {
        int e = errno;
        unlink(w->tmp);
        if (e == EEXIST) return made_by_another(w, w->name, err, errlen);
        return errorf(err, errlen, "%s: %s", w->name, strerror(e));
    }
    unlink(w->tmp);
    char **g = realloc(w->done, (size_t)(w->ndone + 1) * sizeof *g);
    if (g) w->done = g, w->done[w->ndone++] = strdup(w->name);
    return 0;
}

static int shard_open(struct writer *w, char *err, size_t errlen)
{
    snprintf(w->name, sizeof w->name, "%s_%s_%06d.bin", w->cfg->tokenize.output, w->split ? "train" : "val",
             w->index[w->split]++);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp", w->name);
    int32_t h[SHARD_HEADER] = {0};
    char dir[CONFIG_STRLEN + 64];
    snprintf(dir, sizeof dir, "%s", w->name);
    char *slash = strrchr(dir, '/');
    char why[1024];
    if (slash && slash != dir && w->made.n == 0) { /* (the prefix's folders, noted by the first shard that makes them) */
        *slash = 0;
        if (file_make_dirs_noted(dir, &w->made, why, sizeof why) != 0) {
            file_remove_made_dirs(&w->made);
            return errorf(err, errlen, "tokenize.output = '%s': %s", w->cfg->tokenize.output, why);
        }
    }
    int fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL, 0666); /* (a temporary of another process is not taken over) */
    if (fd < 0 && errno == EEXIST) return made_by_another(w, w->tmp, err, errlen);
    if (fd >= 0 && !(w->fp = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd), unlink(w->tmp); /* (ours: made just now) */
        errno = e;
    }
    if (!w->fp || fwrite(h, sizeof h, 1, w->fp) != 1) {
        int e = errno;
        if (w->fp) fclose(w->fp), w->fp = NULL, unlink(w->tmp);
        return errorf(err, errlen, "%s: %s", w->tmp, strerror(e));
    }
    w->in_shard = 0;
    return 0;
}

/* A document's ids into the split it belongs to. */
static int write_document(struct writer *w, const int32_t *ids, size_t n, char *err, size_t errlen)
{
    int split = w->total[0] < w->cfg->tokenize.val_tokens ? 0 : 1;
    if (split != w->split && shard_close(w, err, errlen)) return -1;
    w->split = split;
    for (size_t i = 0; i < n;) {
        if (!w->fp && shard_open(w, err, errlen)) return -1;
        size_t k = n - i, room = (size_t)(w->cfg->tokenize.shard_tokens - w->in_shard);
        if (k > room) k = room;
        if (w->wide) { /* (int32 ids, little-endian as this processor: their bytes are the uint32's) */
            if (fwrite(ids + i, 4, k, w->fp) != k) return errorf(err, errlen, "%s: %s", w->tmp, strerror(errno));
        } else {
            uint16_t buf[4096];
            for (size_t j = 0; j < k; j += 4096) {
                size_t m = k - j < 4096 ? k - j : 4096;
                for (size_t q = 0; q < m; q++) buf[q] = (uint16_t)ids[i + j + q];
                if (fwrite(buf, 2, m, w->fp) != m) return errorf(err, errlen, "%s: %s", w->tmp, strerror(errno));
            }
        }
        w->in_shard += (long long)k, w->total[split] += (long long)k, i += k;
        if (w->in_shard == w->cfg->tokenize.shard_tokens && shard_close(w, err, errlen)) return -1;
    }
    return 0;
}

/* After an error: nothing of this run is left. */
static void writer_abandon(struct writer *w)
{
    if (w->fp) fclose(w->fp), unlink(w->tmp);
    for (int i = 0; i < w->ndone; i++) unlink(w->done[i]);
    file_remove_made_dirs(&w->made);
}

static void writer_free(struct writer *w)
{
    for (int i = 0; i < w->ndone; i++) free(w->done[i]);
    free(w->done);
}

/* Is name (in the prefix's folder, base the prefix's last part) a shard of
 * the prefix: BASE_train_*.bin or BASE_val_*.bin (the globs a deck's
 * data.path names), or one of their .tmp temporaries? */
static int is_shard_of(const char *name, const char *base)
{
    size_t bl = strlen(base), n;
    if (strncmp(name, base, bl) != 0) return 0;
    name += bl;
    if (!strncmp(name, "_train_", 7)) name += 7;
    else if (!strncmp(name, "_val_", 5)) name += 5;
    else return 0;
    n = strlen(name);
    return (n >= 4 && !strcmp(name + n - 4, ".bin")) || (n >= 8 && !strcmp(name + n - 8, ".bin.tmp"));
}

/* Does the folder of tokenize.output, or the nearest one above it that
 * exists (where shard_open makes the rest), take files?  0, or -1 with err
 * saying why not: found before the input is read, not after it is all
 * tokenized.  Rank 0. */
static int output_writable(const char *prefix, char *err, size_t errlen)
{
    char dir[CONFIG_STRLEN + 2];
    snprintf(dir, sizeof dir, "%s", prefix);
    char *up;
    do { /* the prefix's folder, or one above it */
        up = strrchr(dir, '/');
        if (up) *up = '\0';
    } while (up && up != dir && access(dir, F_OK) != 0);
    if (!up) snprintf(dir, sizeof dir, ".");
    else if (up == dir) snprintf(dir, sizeof dir, "/");
    int refused = file_write_probe(dir);
    return refused ? errorf(err, errlen, "tokenize.output = '%s': the folder %s takes no files (%s), so nothing is "
                            "tokenized\n  hint: choose a tokenize.output in a writable folder", prefix, dir,
                            file_write_words(refused)) : 0;
}

/* The shards an earlier run left under tokenize.output would mix with this
 * run's under PREFIX_train_*.bin: 0 when there are none, else -1 with err
 * naming the first (in name order) and how many, and what to do.  Rank 0,
 * before anything is written. */
static int no_old_shards(const char *prefix, char *err, size_t errlen)
{
    const char *slash = strrchr(prefix, '/'), *base = slash ? slash + 1 : prefix;
    char dir[CONFIG_STRLEN + 2];
    snprintf(dir, sizeof dir, "%.*s", slash ? (slash == prefix ? 1 : (int)(slash - prefix)) : 1, slash ? prefix : ".");
    DIR *d = opendir(dir);
    if (!d) /* (no folder yet: no shards; shard_open makes it) */
        return errno == ENOENT ? 0 : errorf(err, errlen, "cannot list %s, the folder of tokenize.output = '%s': %s",
                                            dir, prefix, strerror(errno));
    char first[1024] = "";
    long count = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (is_shard_of(e->d_name, base) && (count++ == 0 || strcmp(e->d_name, first) < 0))
            snprintf(first, sizeof first, "%s", e->d_name);
    closedir(d);
    if (count == 0) return 0;
    char more[48] = "";
    if (count > 1) snprintf(more, sizeof more, " and %ld more", count - 1);
    return errorf(err, errlen, "tokenize.output = '%s' already holds %ld shard%s of an earlier run (%.*s%s%s): this "
                  "run's would mix with %s under the globs %s_train_*.bin and %s_val_*.bin, so nothing is written\n"
                  "  hint: remove them (%s_train_*.bin, %s_val_*.bin and any .bin.tmp beside them) or choose another "
                  "tokenize.output", prefix, count, count == 1 ? "" : "s", (int)(base - prefix), prefix, first, more,
                  count == 1 ? "it" : "them", prefix, prefix, prefix, prefix);
}

/* ------------------------------------------------------------ the run */

/* A key of &tokenize set (away from its default) that the chosen format or
 * print does not read: an error, never a silent no-op. */
static int unread_key(const struct config *cfg, char *err, size_t errlen)
{
    struct config *d = xmalloc(sizeof *d);
    config_defaults(d);
    int jsonl = cfg->tokenize.format_id == TOKENIZE_FORMAT_jsonl, rc = 0;
    if (jsonl && strcmp(cfg->tokenize.separator, d->tokenize.separator))
        rc = errorf(err, errlen, "tokenize.separator = '%s' splits the documents of format = 'text', but format = "
                    "'jsonl' (a document a line)\n  hint: remove tokenize.separator, or set format = 'text'",
                    cfg->tokenize.separator);
    else if (!jsonl && strcmp(cfg->tokenize.field, d->tokenize.field))
        rc = errorf(err, errlen, "tokenize.field = '%s' names the JSON member of format = 'jsonl', but format = "
                    "'text'\n  hint: remove tokenize.field, or set format = 'jsonl'", cfg->tokenize.field);
    else if (cfg->tokenize.print_id != TOKENIZE_PRINT_none) {
        const char *key = strcmp(cfg->tokenize.output, d->tokenize.output)          ? "output"
                          : cfg->tokenize.val_tokens != d->tokenize.val_tokens     ? "val_tokens"
                          : cfg->tokenize.shard_tokens != d->tokenize.shard_tokens ? "shard_tokens"
                                                                                   : NULL;
        if (key)
            rc = errorf(err, errlen, "tokenize.%s is set, but print = '%s' writes no shards (it prints each "
                        "document)\n  hint: remove tokenize.%s, or set print = 'none' to write the shards", key,
                        cfg->tokenize.print, key);
    }
    free(d);
    return rc;
}

/* Rank RANK's share of a batch of N documents of LEN bytes among P ranks:
 * [*lo, *hi), the documents that start in its Pth of the bytes.  Every rank
 * reads every document, so each computes every share alike. */
static void share(const size_t *len, int n, int rank, int P, int *lo, int *hi)
{
    double total = 0, at = 0;
    for (int d = 0; d < n; d++) total += (double)len[d];
    double from = total * rank / P, to = total * (rank + 1) / P;
    *lo = *hi = n;
    for (int d = 0; d < n; at += (double)len[d], d++) {
        if (*lo == n && at >= from) *lo = d;
        if (at >= to && rank + 1 < P) {
            *hi = d;
            break;
        }
    }
    if (*hi < *lo) *hi = *lo;
}

/* Rank 0's output of one batch's ids: the shards, or the printed documents. */
static int emit(const struct config *cfg, struct writer *w, const struct tokenizer *tok, const int32_t *ids,
                const int *counts, int ndocs, int skip, char *err, size_t errlen)
{
    int print = cfg->tokenize.print_id;
    for (int d = 0; d < ndocs; d++, ids += counts[d - 1]) {
        if (print == TOKENIZE_PRINT_none) {
            if (write_document(w, ids, (size_t)counts[d], err, errlen)) return -1;
        } else if (print == TOKENIZE_PRINT_ids) {
            for (int i = skip; i < counts[d]; i++) printf("%s%d", i > skip ? " " : "", ids[i]);
            putchar('\n');
        } else {
            char *text;
            size_t len;
            if (tok_decode(tok, ids + skip, (size_t)(counts[d] - skip), 0, &text, &len, err, errlen)) return -1;
            fwrite(text, 1, len, stdout);
            putchar('\n');
            free(text);
        }
    }
    return 0;
}

int tokenize_run(const struct config *cfg)
{
    const volatile sig_atomic_t *stop = train_stop_signal();
    int rank, P;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &P));
    char err[2048] = "";
    int rc = 0;
    struct tokenizer *tok = NULL;
    if (!cfg->tokenize.tokenizer[0]) rc = errorf(err, sizeof err, "tokenize.tokenizer is empty: name a tokenizer.json");
    else if (unread_key(cfg, err, sizeof err)) rc = -1;
    else if (!(tok = tok_open(cfg->tokenize.tokenizer, err, sizeof err))) rc = -1;
    int32_t sep = -1;
    int doc_token = cfg->tokenize.doc_token_id;
    if (rc == 0) {
        sep = doc_token == TOKENIZE_DOC_TOKEN_bos ? tok_bos(tok) : doc_token == TOKENIZE_DOC_TOKEN_eos ? tok_eos(tok)
              : doc_token == TOKENIZE_DOC_TOKEN_auto ? tok_doc(tok) : -1;
        if (sep < 0 && doc_token != TOKENIZE_DOC_TOKEN_none && doc_token != TOKENIZE_DOC_TOKEN_template) {
            int bos = tok_bos(tok) >= 0, eos = tok_eos(tok) >= 0; /* (auto fails with neither) */
            rc = errorf(err, sizeof err, "%s has %s token to put before each document (tokenize.doc_token = "
                        "'%s')\n  hint: set tokenize.doc_token = %s'none' (no token) or 'template' (the "
                        "post-processor's)", cfg->tokenize.tokenizer,
                        doc_token == TOKENIZE_DOC_TOKEN_eos   ? "no end-of-text"
                        : doc_token == TOKENIZE_DOC_TOKEN_bos ? "no BOS"
                                                              : "neither a BOS nor an end-of-text",
                        cfg->tokenize.doc_token,
                        bos ? "'bos' (it has one), " : eos ? "'eos' (it has one), " : "");
        }
    }
    if (rc == 0 && cfg->tokenize.print_id == TOKENIZE_PRINT_none && !cfg->tokenize.output[0])
        rc = errorf(err, sizeof err, "tokenize.output is empty: give the shards' path prefix (e.g. 'data/book')");
    if (rc == 0 && rank == 0 && cfg->tokenize.print_id == TOKENIZE_PRINT_none)
        rc = no_old_shards(cfg->tokenize.output, err, sizeof err) != 0
                 ? -1 : output_writable(cfg->tokenize.output, err, sizeof err);
    struct reader r;
    memset(&r, 0, sizeof r);
    if (rc == 0) rc = reader_open(&r, cfg, err, sizeof err);
    if (mpi_agree_error(MPI_COMM_WORLD, rc != 0, err, sizeof err)) {
        if (rank == 0) fprintf(stderr, "error: triad tokenize: %s\n", err);
        if (r.files.gl_pathv) reader_close(&r);
        tok_close(tok);
        return 1;
    }
    struct writer w = {.cfg = cfg, .wide = tok_vocab_size(tok) > 65536, .split = -1};
    char *doc[BATCH_DOCS] = {0};
    size_t len[BATCH_DOCS], cap[BATCH_DOCS] = {0};
    int32_t *mine = NULL, *all = NULL;
    size_t nmine = 0, capmine = 0;
    int counts[BATCH_DOCS], *rank_docs = xcalloc((size_t)P, sizeof(int)), *rank_ids = xcalloc((size_t)P, sizeof(int)),
        *displ = xcalloc((size_t)P, sizeof(int));
    long long docs = 0, tokens = 0;
    double t0 = MPI_Wtime(), last = t0;
    for (int more = 1; more && rc == 0;) {
        int n = 0, got = 1;
        while (n < BATCH_DOCS && (got = next_document(&r, &doc[n], &len[n], &cap[n], err, sizeof err)) == 1) n++;
        if (got < 0) rc = -1;
        more = got == 1;
        /* this rank's documents of the batch: [lo, hi), an equal share of its bytes */
        int lo, hi;
        share(len, n, rank, P, &lo, &hi);
        nmine = 0;
        for (int d = lo; d < hi && rc == 0; d++) {
            size_t before = nmine;
            if (*stop) { /* (a signal: the documents so far are given up with the rest) */
                rc = errorf(err, sizeof err, "stopped by signal %d after %lld documents%s; run it again (a requeued "
                            "job does)", (int)*stop, docs, cfg->tokenize.print_id == TOKENIZE_PRINT_none ?
                            ": the shards written so far are removed" : "");
                break;
            }
            if (sep >= 0 && nmine == capmine) {
                int32_t *g = realloc(mine, (capmine = 2 * capmine + 256) * sizeof *mine);
                if (!g) rc = errorf(err, sizeof err, "out of memory");
                else mine = g;
            }
            if (rc == 0 && sep >= 0) mine[nmine++] = sep;
            char *text = doc[d], *parsed = NULL;
            size_t tlen = len[d];
            if (rc == 0 && cfg->tokenize.format_id == TOKENIZE_FORMAT_jsonl)
                rc = jsonl_text(&r, doc[d], len[d], &parsed, &tlen, err, sizeof err), text = parsed;
            if (rc == 0)
                rc = tok_encode(tok, text, tlen, doc_token == TOKENIZE_DOC_TOKEN_template, &mine, &nmine, &capmine,
                                err, sizeof err);
            free(parsed);
            counts[d - lo] = (int)(nmine - before);
        }
        if (mpi_agree_error(MPI_COMM_WORLD, rc != 0, err, sizeof err)) break;
        int nd = hi - lo, ni = (int)nmine;
        MPI_CHECK(MPI_Gather(&nd, 1, MPI_INT, rank_docs, 1, MPI_INT, 0, MPI_COMM_WORLD));
        MPI_CHECK(MPI_Gather(&ni, 1, MPI_INT, rank_ids, 1, MPI_INT, 0, MPI_COMM_WORLD));
        int all_counts[BATCH_DOCS];
        for (int k = 0, at = 0; rank == 0 && k < P; k++) displ[k] = at, at += rank_docs[k];
        MPI_CHECK(MPI_Gatherv(counts, nd, MPI_INT, all_counts, rank_docs, displ, MPI_INT, 0, MPI_COMM_WORLD));
        long long sum = 0;
        for (int k = 0; rank == 0 && k < P; k++) displ[k] = (int)sum, sum += rank_ids[k];
        if (rank == 0) { /* (the batch's ids, gathered on rank 0; the old block kept if this fails) */
            int32_t *g = realloc(all, ((size_t)sum + 1) * sizeof *all);
            if (!g)
                rc = errorf(err, sizeof err, "out of memory on rank 0 for a batch's %lld token ids (%.1f MB)", sum,
                            (double)(sum + 1) * sizeof *all / 1e6);
            else all = g;
        }
        if (mpi_agree_error(MPI_COMM_WORLD, rc != 0, err, sizeof err)) break;
        MPI_CHECK(MPI_Gatherv(mine, ni, MPI_INT32_T, all, rank_ids, displ, MPI_INT32_T, 0, MPI_COMM_WORLD));
        if (rank == 0) rc = emit(cfg, &w, tok, all, all_counts, n, sep >= 0, err, sizeof err);
        docs += n, tokens += sum;
        double now = MPI_Wtime();
        if (rank == 0 && cfg->tokenize.print_id == TOKENIZE_PRINT_none && (now - last > 1 || !more)) {
            double dt = now - t0 > 1e-9 ? now - t0 : 1e-9, left = r.bytes_total - r.bytes_read;
            fprintf(stderr, "tokenize: %lld documents, %lld tokens, %.1f MB of %.1f MB, %.2f MB/s, %.0f tokens/s, "
                    "ETA %.0f s\n", docs, tokens, r.bytes_read / 1e6, r.bytes_total / 1e6, r.bytes_read / dt / 1e6,
                    (double)tokens / dt, left / (r.bytes_read / dt + 1e-9));
            last = now;
        }
        if (mpi_agree_error(MPI_COMM_WORLD, rc != 0, err, sizeof err)) break;
    }
    if (rc == 0 && rank == 0) rc = shard_close(&w, err, sizeof err);
    if (rc == 0 && rank == 0 && cfg->tokenize.print_id != TOKENIZE_PRINT_none && (fflush(stdout) != 0 || ferror(stdout)))
        rc = errorf(err, sizeof err, "the %s could not all be written to stdout (%s): what was written of them is "
                    "not complete", cfg->tokenize.print_id == TOKENIZE_PRINT_ids ? "ids" : "texts",
                    errno ? strerror(errno) : "a write failed");
    rc = mpi_agree_error(MPI_COMM_WORLD, rc != 0, err, sizeof err);
    int stopped = rc && *stop; /* (agreed: a rank the signal did not reach ends with the same status) */
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &stopped, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (rank == 0) {
        if (rc) {
            writer_abandon(&w);
            fprintf(stderr, "error: triad tokenize: %s\n", err);
        } else if (cfg->tokenize.print_id == TOKENIZE_PRINT_none) {
            printf("tokenized %lld documents into %lld tokens (%s): %lld held out in %d shard%s, %lld for training in "
                   "%d shard%s, %s_*.bin\n", docs, (long long)(w.total[0] + w.total[1]), w.wide ? "uint32" : "uint16",
                   w.total[0], w.index[0], w.index[0] == 1 ? "" : "s", w.total[1], w.index[1],
                   w.index[1] == 1 ? "" : "s", cfg->tokenize.output);
        }
    }
    for (int i = 0; i < BATCH_DOCS; i++) free(doc[i]);
    free(mine), free(all), free(rank_docs), free(rank_ids), free(displ);
    writer_free(&w);
    reader_close(&r);
    tok_close(tok);
    return stopped ? EXIT_STOPPED : rc ? EXIT_ERROR : EXIT_DONE;
}
