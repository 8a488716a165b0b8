/* file.h -- a whole file read into memory, for the readers of the small files
 * users and other tools hand triad (a deck, a tokenizer's files, a model's
 * config.json and index, an llm.c eval file). */
#ifndef TRIAD_FILE_H
#define TRIAD_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Read path into a malloc'ed buffer *text, its *len bytes followed by a NUL.
 * max is the most bytes such a file may have and what names it in the
 * message ("a deck", "a tokenizer file").  A regular file is read in one
 * piece of its size; a pipe, a device, or a regular file of size 0 (as
 * /proc's are) as it comes, in a buffer that doubles up to max + 1 bytes:
 * the first byte over the bound ends the read (max < SIZE_MAX).
 *
 * Returns 0, or an errno value with the reason in why (without the path, for
 * the caller to put in front: "PATH: " why) and *text NULL:
 *   open(2)'s errno (ENOENT where it does not exist)  "cannot open it (REASON)"
 *   EISDIR   "a directory, not a file"
 *   EFBIG    "N bytes; triad reads a deck up to 1 MiB", or for a stream
 *            "more than 1 MiB; triad reads a deck up to 1 MiB"
 *   ENOMEM   "out of memory for its N bytes", "out of memory for a buffer
 *            of N bytes" (a stream), "out of memory after N bytes of it"
 *   EIO, or read(2)'s errno   "cannot read it (REASON)", the reason
 *            "it changed size while read" where a regular file's length
 *            moved under the reader. */
int file_read_all(const char *path, size_t max, const char *what, char **text, size_t *len, char *why,
                  size_t whylen);

/* mkdir -p path: path and every folder above it that is missing.  0, or -1
 * with the reason in why ("cannot create the folder P: REASON", or "P is a
 * file, not a folder" where path or a folder above it is one). */
int file_make_dirs(const char *path, char *why, size_t whylen);
/* The same, noting in *m (may be NULL) the folders its mkdir made, which
 * file_remove_made_dirs removes again, the deepest first, each only where
 * it is still empty: what an output that failed made, and nothing else
 * (whatever ".." or another process does to the path). */
enum { FILE_MADE_MAX = 64 };
struct file_made_dirs {
    char path[4096];
    int len[FILE_MADE_MAX]; /* path[0 .. len[k]) is the k-th folder made */
    int n;
};
int file_make_dirs_noted(const char *path, struct file_made_dirs *m, char *why, size_t whylen);
void file_remove_made_dirs(struct file_made_dirs *m);

/* What an llm.c file (karpathy/llm.c's writers) starting with the int32
 * magic is, and where triad reads it: e.g. "an llm.c eval file (magic
 * 20240522, hellaswag_val.bin: eval.tasks reads it)"; NULL for any other
 * magic.  file_llmc_kind_of: the same of the file at path (its first 4
 * bytes, little-endian), NULL where it cannot be read or has no such magic.
 * For the messages of a reader handed another file than its own. */
const char *file_llmc_kind(int32_t magic);
const char *file_llmc_kind_of(const char *path);

/* Does another process hold a lock on path (HDF5 1.10 locks a file with
 * flock(2) for as long as it has it open: a reader such as h5py with
 * HDF5's file locking on, or a job writing it)?  Then H5Fopen fails on it
 * as on a damaged file.  0 where path does not open. */
int file_locked_by_another(const char *path);

/* Why a write into folder dir failed, asked of the file system: a probe
 * file made there and removed at once.  errno's value for the probe
 * (EROFS: a file system gone read-only, as ext4 with errors=remount-ro
 * does after an error, which statvfs does not show; ENOSPC, EDQUOT,
 * EACCES, ENOENT), or 0 where the folder takes new files. */
int file_write_probe(const char *dir);

/* Can path be read?  Its first and last 4 KiB read, their cached pages
 * dropped first (a node's failing mount, a failing disk: EIO where the
 * file itself may be intact); errno's value, or 0. */
int file_read_probe(const char *path);

/* For file_read_probe's e, a clause for after the error's words: that the
 * file itself may be intact, where e is the device's (EIO, ESTALE, ...);
 * "" for any other. */
const char *file_read_words(int e);

/* "the file system is read-only" and the like for file_write_probe's e, as
 * a clause for a message; "" for 0. */
const char *file_write_words(int e);

#endif
