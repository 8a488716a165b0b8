/* data_indexed.c -- Megatron-LM's indexed dataset (data_internal.h,
 * docs/data.md): PREFIX.idx holds
 *
 *   "MMIDIDX\0\0"  u64 version (1)  u8 dtype code  u64 sequences  u64 documents
 *   i32 lengths[sequences]  i64 byte offsets[sequences]  i64 document index[documents]
 *
 * (dtype codes 1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 6 f64, 7 f32, 8 u16), and
 * PREFIX.bin the ids of every sequence back to back.  The sequences are the
 * token stream, in order, as Megatron's GPT dataset concatenates them; the
 * index is checked whole before a token is used: lengths, offsets that
 * follow one another from 0, the document index from 0 to the sequence
 * count, and the .bin exactly as long as the index says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "mapguard.h"

static const struct { int bytes, signed_; const char *name; } dtypes[9] = {
    {0, 0, NULL}, {1, 0, "u8"}, {1, 1, "i8"}, {2, 1, "i16"}, {4, 1, "i32"}, {8, 1, "i64"}, {8, 0, "f64"},
    {4, 0, "f32"}, {2, 0, "u16"},
};

static uint64_t u64_at(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

int data_indexed_open(struct shard *s, const char *prefix, struct deck_error *err)
{
    char path[1100];
    const char *hint = "the dataset is damaged or not Megatron-LM's indexed format (MMIDIDX, version 1): "
                       "write it again with Megatron's tools/preprocess_data.py";
    struct shard idx;
    memset(&idx, 0, sizeof idx);
    snprintf(path, sizeof path, "%s.idx", prefix);
    if (data_map_file(&idx, path, err)) return -1;
    const unsigned char *p = idx.map;
    size_t len = idx.maplen;
    int rc = 0;
    uint64_t nseq = 0, ndoc = 0;
    int code = 0;
    if (len < 34 || memcmp(p, "MMIDIDX\0\0", 9) != 0) {
        data_fail(err, path, hint, "'%s' does not begin with MMIDIDX\\0\\0 (%zu bytes)", path, len);
        rc = -1;
    } else if (u64_at(p + 9) != 1) {
        data_fail(err, path, hint, "'%s' is version %llu of the format, triad reads version 1", path,
                  (unsigned long long)u64_at(p + 9));
        rc = -1;
    } else {
        code = p[17];
        nseq = u64_at(p + 18), ndoc = u64_at(p + 26);
        if (code < 1 || code > 8 || code == 6 || code == 7) {
            data_fail(err, path, "token ids are integers (dtype codes 1-5 and 8)", "'%s' has dtype code %d (%s)", path,
                      code, code >= 1 && code <= 8 ? dtypes[code].name : "not one of the format's");
            rc = -1;
        } else if (nseq > (len - 34) / 12 || ndoc > (len - 34 - 12 * nseq) / 8 || len != 34 + 12 * nseq + 8 * ndoc) {
            data_fail(err, path, hint, "'%s' is %zu bytes, but %llu sequences and %llu documents need %llu", path, len,
                      (unsigned long long)nseq, (unsigned long long)ndoc,
                      nseq > len || ndoc > len ? (unsigned long long)-1
                                               : (unsigned long long)(34 + 12 * nseq + 8 * ndoc));
            rc = -1;
        }
    }
    uint64_t tokens = 0;
    int w = rc == 0 ? dtypes[code].bytes : 1; /* (code is in the table only when rc is 0) */
    for (uint64_t i = 0; rc == 0 && i < nseq; i++) { /* lengths and offsets: one after the other from 0 */
        int32_t n;
        memcpy(&n, p + 34 + 4 * i, 4);
        uint64_t at = u64_at(p + 34 + 4 * nseq + 8 * i);
        if (n < 0 || at != tokens * (uint64_t)w) {
            data_fail(err, path, hint, "'%s' sequence %llu has length %d at byte %llu; the sequences before it end at "
                      "byte %llu", path, (unsigned long long)i, n, (unsigned long long)at,
                      (unsigned long long)(tokens * (uint64_t)w));
            rc = -1;
        }
        tokens += (uint64_t)(n > 0 ? n : 0);
    }
    for (uint64_t i = 0, last = 0; rc == 0 && i < ndoc; i++) { /* the document index: 0 ... sequences */
        uint64_t d = u64_at(p + 34 + 12 * nseq + 8 * i);
        if ((i == 0 && d != 0) || d < last || d > nseq || (i == ndoc - 1 && d != nseq)) {
            data_fail(err, path, hint, "'%s' document index %llu is %llu: it must rise from 0 to the %llu sequences",
                      path, (unsigned long long)i, (unsigned long long)d, (unsigned long long)nseq);
            rc = -1;
        }
        last = d;
    }
    mapguard_unmap(idx.map, idx.maplen);
    free(idx.path);
    if (rc) return -1;
    snprintf(path, sizeof path, "%s.bin", prefix);
    if (data_map_file(s, path, err)) return -1;
    if (s->maplen != tokens * (uint64_t)w) {
        data_fail(err, path, s->maplen < tokens * (uint64_t)w ? "the file is truncated: copy or write it again"
                                                              : "the .bin and .idx are of different datasets",
                  "'%s' is %zu bytes; its index (%s.idx) says %llu tokens of %d bytes", path, s->maplen, prefix,
                  (unsigned long long)tokens, w);
        return -1;
    }
    s->tok = s->map;
    s->n = tokens;
    s->width = w;
    s->signed_ = dtypes[code].signed_;
    return 0;
}
