/* safetensors.h -- Hugging Face's safetensors container, read and written
 * by triad's own code: an 8-byte little-endian header length, a JSON header
 * naming each tensor's dtype, shape and [begin, end) byte offsets into the
 * data that follows (docs/formats.md).  Opening checks the container as the
 * format defines it before any data is read: the header length within the
 * file and its bound, the header a JSON object (well-formed UTF-8) with
 * __metadata__ a map of strings and no name twice, each tensor's byte count
 * that of its dtype and shape (overflow-checked), and the tensors tiling the
 * data exactly, with no hole, no overlap and nothing after the last.
 * Reading takes only the elements asked for (pread), converting F16 and BF16
 * to float. */
#ifndef TRIAD_SAFETENSORS_H
#define TRIAD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum st_dtype { ST_F32, ST_F16, ST_BF16 };

struct st_tensor {
    char *name;
    char dtype_name[16];
    int readable;          /* F32, F16 or BF16 (dtype valid); other dtypes only tile the data */
    enum st_dtype dtype;
    int rank;
    int64_t shape[8];
    uint64_t begin, end;   /* byte offsets from the start of the data */
};

struct st_file {
    char *path;
    int fd;
    uint64_t data_start;   /* 8 + the header's length */
    int n;
    struct st_tensor *t;   /* in data-offset order */
    struct st_tensor **by_name; /* the same in name order (st_find) */
};

/* Open path and check its header; -1 with the reason (naming the file and
 * the tensor) in err.  The tensors are in data-offset order. */
int st_open(struct st_file *f, const char *path, char *err, size_t errlen);
void st_close(struct st_file *f);
const struct st_tensor *st_find(const struct st_file *f, const char *name);
/* n elements of dtype at byte offset `at` of fd as floats; -1 (errno set) on
 * a failed or short read. */
int st_pread(int fd, uint64_t at, enum st_dtype dtype, size_t n, float *dst);
const char *st_dtype_name(enum st_dtype d);
size_t st_dtype_size(enum st_dtype d);

/* Writing: the tensors' names and shapes first (the header holds every
 * offset), then their data in the same order, each as floats converted to
 * dtype (st_put may be called several times per tensor). */
struct st_out {
    const char *name;
    int rank;
    int64_t shape[2];
};
struct st_writer {
    FILE *fp;
    enum st_dtype dtype;
    int failed;            /* the errno of the first failure (ERANGE: a value dtype cannot hold), or 0 */
};
int st_begin(struct st_writer *w, const char *path, enum st_dtype dtype, const struct st_out *t, int n,
             const char *metadata_json, char *err, size_t errlen);
int st_put(struct st_writer *w, const float *x, size_t n);
/* The first of x[0 .. n) that is finite but dtype cannot hold (rounded, it
 * would be an infinity: F16 from 65520 on, BF16 past 3.3895e38), or n.
 * st_put refuses such values (-1, ERANGE); the caller finds which here. */
size_t st_first_overflow(enum st_dtype dtype, const float *x, size_t n);
/* Flush, fsync and close; -1 if any write failed. */
int st_end(struct st_writer *w, char *err, size_t errlen);

#endif
