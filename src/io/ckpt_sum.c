/* ckpt_sum.c -- the checkpoint's per-dataset checksums (ckpt_sum.h): the
 * sum (mod 2^64) of a mix of every element's logical index and bits, so
 * partial sums over any decomposition add up to the whole tensor's. */
#include "ckpt_sum.h"

#include <stdlib.h>

#include "cpu.h"
#include "log.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX512_SUM 1
#endif

#define SUM_GOLDEN 0x9E3779B97F4A7C15ull
#define SUM_MIX1 0xBF58476D1CE4E5B9ull
#define SUM_MIX2 0x94D049BB133111EBull

/* splitmix64's finaliser of (index x golden) ^ bits; ig = index x golden. */
static inline uint64_t element_mix(uint64_t ig, uint32_t bits)
{
    uint64_t x = ig ^ bits;
    x ^= x >> 30; x *= SUM_MIX1;
    x ^= x >> 27; x *= SUM_MIX2;
    return x ^ (x >> 31);
}

/* The plain loop: index x golden advanced by addition (exact mod 2^64). */
static uint64_t run_generic(uint64_t first, const uint32_t *bits, size_t n)
{
    uint64_t sum = 0, ig = first * SUM_GOLDEN;
    for (size_t k = 0; k < n; k++, ig += SUM_GOLDEN) sum += element_mix(ig, bits[k]);
    return sum;
}

#ifdef HAVE_AVX512_SUM
/* Eight elements a vector (64-bit products: AVX-512 DQ); integer
 * arithmetic, so the same sum as the plain loop, in any order. */
__attribute__((target("avx512f,avx512dq"))) static uint64_t run_avx512(uint64_t first, const uint32_t *bits,
                                                                      size_t n)
{
    const __m512i m1 = _mm512_set1_epi64((long long)SUM_MIX1), m2 = _mm512_set1_epi64((long long)SUM_MIX2);
    const __m512i step = _mm512_set1_epi64((long long)(8 * SUM_GOLDEN));
    __m512i ig = _mm512_mullo_epi64(_mm512_add_epi64(_mm512_set1_epi64((long long)first),
                                                     _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7)),
                                    _mm512_set1_epi64((long long)SUM_GOLDEN));
    __m512i acc = _mm512_setzero_si512();
    size_t k = 0;
    for (; k + 8 <= n; k += 8, ig = _mm512_add_epi64(ig, step)) {
        __m512i x = _mm512_xor_si512(ig, _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(bits + k))));
        x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)), m1);
        x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)), m2);
        acc = _mm512_add_epi64(acc, _mm512_xor_si512(x, _mm512_srli_epi64(x, 31)));
    }
    uint64_t lane[8], sum = run_generic(first + k, bits + k, n - k);
    _mm512_storeu_si512((void *)lane, acc); /* (the lanes added unsigned: _mm512_reduce_add_epi64 adds signed) */
    for (int i = 0; i < 8; i++) sum += lane[i];
    return sum;
}
#endif

uint64_t ckpt_sum_run(uint64_t first, const float *data, size_t n)
{
    const uint32_t *bits = (const uint32_t *)data;
#ifdef HAVE_AVX512_SUM
    if (isa_active() >= ISA_AVX512) return run_avx512(first, bits, n); /* (avx512bf16 too) */
#endif
    return run_generic(first, bits, n);
}

uint64_t ckpt_partial_checksum(const struct tensor_ref *t, const float *data)
{
    uint64_t sum = 0;
    size_t k = 0, cols = t->rank == 2 ? t->dims[1] : 1;
    for (int b = 0; b < t->nblocks; b++) {
        size_t rows = t->count[b][0], width = t->count[b][1];
        if (width == cols) width *= rows, rows = 1; /* whole rows: one run */
        for (size_t r = 0; r < rows; r++, k += width)
            sum += ckpt_sum_run((t->start[b][0] + r) * cols + t->start[b][1], data + k, width);
    }
    return sum;
}

void ckpt_sums_reduce(uint64_t *sums, int n, const struct grid *g)
{
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, n, MPI_UINT64_T, MPI_SUM, g->world_comm));
}

int ckpt_attach_checksum(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    hid_t ds = H5Dopen2(file, t->path, H5P_DEFAULT);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = ds < 0 ? -1 : H5Acreate2(ds, "checksum", H5T_NATIVE_UINT64, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_UINT64, &w->sums[w->next]);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
    if (rc < 0) ckpt_walk_fail(w, "writing the checksum of %s failed", t->path);
    return rc < 0 ? -1 : 0;
}

int ckpt_verify_checksum(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    hid_t ds = H5Dopen2(file, t->path, H5P_DEFAULT);
    if (ds < 0 || H5Aexists(ds, "checksum") <= 0) { /* weights from elsewhere carry none */
        if (ds >= 0) H5Dclose(ds);
        return 0;
    }
    uint64_t stored = 0;
    hid_t a = H5Aopen(ds, "checksum", H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Aread(a, H5T_NATIVE_UINT64, &stored);
    if (a >= 0) H5Aclose(a);
    H5Dclose(ds);
    if (rc < 0 || stored != w->sums[w->next]) {
        ckpt_walk_fail(w, "checksum mismatch in %s (stored %016llx, data %016llx): the file is corrupted",
                      t->path, (unsigned long long)stored, (unsigned long long)w->sums[w->next]);
        return -1;
    }
    return 0;
}

int ckpt_verify_dataset(hid_t file, const char *dataset, char *err, size_t errlen)
{
    hid_t ds = H5Dopen2(file, dataset, H5P_DEFAULT);
    if (ds < 0) return errorf(err, errlen, "dataset %s is missing", dataset);
    uint64_t stored = 0, sum = 0;
    hsize_t dims[2] = {1, 1};
    hid_t fs = H5Dget_space(ds);
    int rank = fs < 0 ? -1 : H5Sget_simple_extent_ndims(fs), rc = 0;
    hid_t a = -1;
    if (rank < 1 || rank > 2 || H5Sget_simple_extent_dims(fs, dims, NULL) < 0)
        rc = errorf(err, errlen, "dataset %s is not a vector or a matrix", dataset);
    else if (H5Aexists(ds, "checksum") <= 0 || (a = H5Aopen(ds, "checksum", H5P_DEFAULT)) < 0 ||
             H5Aread(a, H5T_NATIVE_UINT64, &stored) < 0)
        rc = errorf(err, errlen, "dataset %s has no checksum: the checkpoint is damaged or not triad's", dataset);
    hsize_t cols = rank == 2 ? dims[1] : 1, step = cols ? (1u << 22) / cols + 1 : dims[0]; /* about 16 MiB a read */
    float *buf = rc == 0 ? malloc((size_t)(step * cols) * sizeof *buf + 1) : NULL;
    if (rc == 0 && !buf) rc = errorf(err, errlen, "out of memory");
    for (hsize_t r0 = 0; rc == 0 && r0 < dims[0]; r0 += step) {
        hsize_t start[2] = {r0, 0}, count[2] = {dims[0] - r0 < step ? dims[0] - r0 : step, cols};
        hid_t ms = H5Screate_simple(rank, count, NULL);
        if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
            H5Dread(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, buf) < 0)
            rc = errorf(err, errlen, "reading %s failed (truncated or corrupted file?)", dataset);
        H5Sclose(ms);
        if (rc == 0) sum += ckpt_sum_run(r0 * cols, buf, count[0] * cols);
    }
    if (rc == 0 && sum != stored)
        rc = errorf(err, errlen, "checksum mismatch in %s (stored %016llx, data %016llx): the file is corrupted",
                    dataset, (unsigned long long)stored, (unsigned long long)sum);
    free(buf);
    if (a >= 0) H5Aclose(a);
    if (fs >= 0) H5Sclose(fs);
    H5Dclose(ds);
    return rc;
}

