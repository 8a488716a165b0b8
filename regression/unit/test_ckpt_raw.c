/* test_ckpt_raw.c -- the checkpoint checksum on every SIMD path against the
 * element-by-element definition (docs/formats.md), and a selection's bytes
 * read outside HDF5 (ckpt_raw.h): the data, the checksum taken on the way,
 * a short file refused. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_raw.h"
#include "ckpt_sum.h"
#include "cpu.h"
#include "tap.h"

/* The definition: the sum mod 2^64 over the elements of splitmix64's
 * finaliser applied to (logical index x 0x9E3779B97F4A7C15) xor the
 * element's bits. */
static uint64_t element_checksum(uint64_t index, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint64_t x = index * 0x9E3779B97F4A7C15ull ^ bits;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t defined_sum(uint64_t first, const float *v, size_t n)
{
    uint64_t s = 0;
    for (size_t k = 0; k < n; k++) s += element_checksum(first + k, v[k]);
    return s;
}

/* A [R, C] tensor's selection: rows r0.. of columns [c0, c0 + w), plus,
 * when whole > 0, `whole` whole rows after them (a column slice's block
 * and a row block, as ckpt_layout.c makes them). */
static struct ckpt_piece piece(size_t R, size_t C, size_t r0, size_t rows, size_t c0, size_t w, size_t whole,
                               uint64_t offset)
{
    struct ckpt_piece pc;
    memset(&pc, 0, sizeof pc);
    snprintf(pc.t.path, sizeof pc.t.path, "/model/test");
    pc.t.rank = 2;
    pc.t.dims[0] = R, pc.t.dims[1] = C;
    pc.t.start[0][0] = r0, pc.t.start[0][1] = c0, pc.t.count[0][0] = rows, pc.t.count[0][1] = w;
    pc.t.nblocks = 1;
    if (whole) {
        pc.t.start[1][0] = r0 + rows, pc.t.start[1][1] = 0, pc.t.count[1][0] = whole, pc.t.count[1][1] = C;
        pc.t.nblocks = 2;
    }
    pc.t.elems = rows * w + whole * C;
    pc.t.primary = 1;
    pc.offset = offset;
    return pc;
}

/* The selection's elements of the whole tensor `all`, in order, and their
 * defined checksum. */
static uint64_t gather(const struct ckpt_piece *pc, const float *all, float *out)
{
    const struct tensor_ref *t = &pc->t;
    uint64_t s = 0;
    size_t k = 0;
    for (int b = 0; b < t->nblocks; b++)
        for (size_t r = 0; r < t->count[b][0]; r++)
            for (size_t c = 0; c < t->count[b][1]; c++, k++) {
                size_t i = (t->start[b][0] + r) * t->dims[1] + t->start[b][1] + c;
                out[k] = all[i];
                s += element_checksum(i, all[i]);
            }
    return s;
}

static void test_sum_paths(void)
{
    enum { N = 70001 };
    float *v = tap_alloc(N * sizeof(float));
    for (size_t i = 0; i < N; i++) v[i] = (float)((double)rand() / RAND_MAX - 0.5) * 1e3f;
    v[5] = -0.0f, v[6] = 1e-45f; /* a negative zero, a subnormal: bits, not values */
    const size_t lens[] = {0, 1, 7, 8, 9, 64, 1000, N};
    const uint64_t firsts[] = {0, 3, 123456789, (1ull << 40) + 5, UINT64_MAX - 20}; /* (the last wraps mod 2^64) */
    enum isa keep = isa_active();
    for (int p = 0; p < ISA_COUNT; p++) {
        if (!isa_supported((enum isa)p) || isa_force((enum isa)p) != 0) {
            tap_skip("this processor cannot run the path");
            continue;
        }
        int good = 1;
        for (size_t a = 0; a < sizeof lens / sizeof lens[0]; a++)
            for (size_t b = 0; b < sizeof firsts / sizeof firsts[0]; b++)
                good &= ckpt_sum_run(firsts[b], v + 1, lens[a] < N ? lens[a] : N - 1) ==
                        defined_sum(firsts[b], v + 1, lens[a] < N ? lens[a] : N - 1);
        tap_ok(good, "%s: ckpt_sum_run equals the definition (lengths 0 .. %d, unaligned, first index up to 2^64 - 21)",
               isa_name((enum isa)p), N - 1);
    }
    isa_force(keep);
    free(v);
}

static void test_partial_checksum(void)
{
    enum { R = 37, C = 53 };
    float all[R * C], got[R * C];
    for (size_t i = 0; i < R * C; i++) all[i] = (float)i * 0.37f - 100.0f;
    struct ckpt_piece pc = piece(R, C, 4, 9, 11, 20, 13, 0);
    uint64_t want = gather(&pc, all, got);
    tap_ok(ckpt_partial_checksum(&pc.t, got) == want,
           "ckpt_partial_checksum of a column slice and whole rows equals the definition");
}

/* A file: `lead` bytes, then the tensor; a piece read back through it. */
static void test_raw_read(void)
{
    enum { R = 300, C = 2048, LEAD = 4096 + 12 };
    char path[256];
    tap_tmp_template(path, sizeof path, "test_ckpt_raw");
    int fd = mkstemp(path);
    if (fd < 0) {
        tap_skip("cannot make a temporary file");
        return;
    }
    float *all = tap_alloc((size_t)R * C * sizeof(float)), *want = tap_alloc((size_t)R * C * sizeof(float));
    float *got = tap_alloc((size_t)R * C * sizeof(float));
    for (size_t i = 0; i < (size_t)R * C; i++) all[i] = (float)rand() / RAND_MAX;
    char lead[LEAD];
    memset(lead, 0x77, sizeof lead);
    struct ckpt_piece whole = piece(R, C, 0, R, 0, C, 0, LEAD);
    int wrote = write(fd, lead, LEAD) == LEAD && ckpt_raw_io(fd, 1, &whole, all) == 0;
    tap_ok(wrote, "ckpt_raw_io writes a whole tensor at its offset");

    /* the right half of 100 rows (one pread each), then 150 whole rows in parts of 128 KiB */
    struct ckpt_piece pc = piece(R, C, 20, 100, C / 2, C / 2, 150, LEAD);
    uint64_t sum_want = gather(&pc, all, want), sum = 0, sum_only = 1;
    int rc = ckpt_raw_read(fd, &pc, got, &sum);
    tap_ok(rc == 0 && memcmp(got, want, pc.t.elems * sizeof(float)) == 0,
           "ckpt_raw_read reads a column slice and whole rows into their places");
    tap_ok(rc == 0 && sum == sum_want, "and its checksum, taken part by part on the way, is the definition's");
    tap_ok(ckpt_raw_read(fd, &pc, NULL, &sum_only) == 0 && sum_only == sum_want,
           "without a destination only the checksum is taken, the same");

    struct grid g;
    memset(&g, 0, sizeof g);
    uint64_t sums[2] = {0, 0};
    struct ckpt_piece list[2] = {pc, whole};
    list[0].index = 1, list[0].t.local = got, list[1].index = 0, list[1].t.local = want;
    char err[512] = "";
    rc = ckpt_raw_read_pieces(path, list, 2, 1, sums, &g, err, sizeof err);
    tap_ok(rc == 0 && sums[1] == sum_want && sums[0] == defined_sum(0, all, (size_t)R * C) &&
               memcmp(want, all, (size_t)R * C * sizeof(float)) == 0,
           "ckpt_raw_read_pieces reads a list ahead of itself: data and each owner's checksum by index");

    /* the file cut short inside the last rows */
    rc = ftruncate(fd, LEAD + (off_t)(R - 5) * C * 4);
    errno = 0;
    tap_ok(rc == 0 && ckpt_raw_read(fd, &whole, got, &sum) == -1 && errno == EIO,
           "a file that ends inside the piece is an error (EIO), not zeros");
    rc = ckpt_raw_read_pieces(path, &list[1], 1, 1, sums, &g, err, sizeof err);
    tap_ok(rc == -1 && strstr(err, "reading /model/test of ") && strstr(err, "truncated or corrupted"),
           "ckpt_raw_read_pieces names the dataset and the file: %s", err);
    close(fd);
    unlink(path);
    free(all), free(want), free(got);
}

int main(void)
{
    srand(7);
    test_sum_paths();
    test_partial_checksum();
    test_raw_read();
    return tap_done();
}
