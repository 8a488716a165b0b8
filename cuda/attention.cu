/* attention.cu -- fused causal attention (flash-attention's scheme) with NH
 * query heads sharing NKV key/value heads (group G = NH/NKV), in fp32, with
 * no buffer of T x T: the contract of the CPU kernels (backend_ops.h), one
 * call being n query rows against n key rows (the whole sequence, or a
 * pair of ring attention's chunks).  In a bf16 run (args.bf16) the
 * probabilities and dS are rounded to bf16 before they multiply, as the
 * CPU's attention_forward_bf16 packs them; their row sums stay fp32.
 *
 * Forward: a block takes ATT_ROWS query rows of one (sequence, head), a
 * warp per row; the block loads tiles of ATT_TILE keys and values into
 * shared memory, each lane scores one key of the tile against its warp's
 * query, and the row's online softmax (running max and sum, shared by the
 * warp's lanes) rescales the output, whose HS values the lanes hold
 * (lane + 32 t).  lse = max + log(sum) is kept per row.
 * Backward, without atomics: D = dout . out per row (a warp per row), then
 * dq a warp per query row over the key tiles (as the forward, the
 * probabilities recomputed from lse), and dk, dv a warp per key row over
 * the tiles of the queries that see it, for each query head of its group
 * in head order. */
#include "common.cuh"

#include <cuda_bf16.h>

#define ATT_ROWS 8      /* rows (warps) of a block */
#define ATT_TILE 32     /* keys or queries of a tile: one per lane */
#define ATT_HS_MAX CUDA_ATT_HS_MAX /* head sizes up to this (the deck check refuses larger) */
#define ATT_PER_LANE (ATT_HS_MAX / 32)

struct att_args {
    const float *qkv, *kv, *lse, *dout, *out, *D;
    float *o, *l, *dq, *dkv;
    int ldkv, T, q0, k0, n, NH, NKV, HS, G, W, C, causal, flag, bf16;
    float scale;
};

/* x as a product's operand: rounded to bf16 (to nearest even) in a bf16 run. */
__device__ static float operand(const struct att_args &a, float x)
{
    return a.bf16 ? __bfloat162float(__float2bfloat16_rn(x)) : x;
}

/* Load ATT_TILE rows [r0, r0 + ATT_TILE) of an (n, HS) matrix of leading
 * dimension ld into tile (rows past n zero); every thread of the block takes part. */
__device__ static void load_tile(float (*tile)[ATT_HS_MAX + 1], const float *x, int ld, int r0, int n, int HS)
{
    for (int e = threadIdx.x; e < ATT_TILE * HS; e += blockDim.x) {
        int r = e / HS, c = e % HS;
        tile[r][c] = r0 + r < n ? x[(size_t)(r0 + r) * ld + c] : 0.0f;
    }
}

/* x . tile row lane (the warp's row in shared memory) */
__device__ static float dot_row(const float *x, const float (*tile)[ATT_HS_MAX + 1], int lane, int HS)
{
    float s = 0.0f;
    for (int c = 0; c < HS; c++) s += x[c] * tile[lane][c];
    return s;
}

__global__ void att_forward_kernel(struct att_args a)
{
    __shared__ float ks[ATT_TILE][ATT_HS_MAX + 1], vs[ATT_TILE][ATT_HS_MAX + 1];
    __shared__ float qs[ATT_ROWS][ATT_HS_MAX], ps[ATT_ROWS][ATT_TILE];
    int lane = threadIdx.x % 32, w = threadIdx.x / 32, HS = a.HS;
    int h = blockIdx.y, b = blockIdx.z, i = blockIdx.x * ATT_ROWS + w, live = i < a.n;
    int last = (int)blockIdx.x * ATT_ROWS + ATT_ROWS - 1; /* the block's last row */
    if (last > a.n - 1) last = a.n - 1;
    const float *q = a.qkv + ((size_t)b * a.T + a.q0) * a.W + (size_t)h * HS;
    const float *k = a.kv + ((size_t)b * a.T + a.k0) * a.ldkv + (size_t)(h / a.G) * HS, *v = k + (size_t)a.NKV * HS;
    float *o = a.o + ((size_t)b * a.T + a.q0) * a.C + (size_t)h * HS;
    float *l = a.l + ((size_t)b * a.NH + h) * a.T + a.q0;
    for (int c = lane; c < HS; c += 32) qs[w][c] = live ? q[(size_t)i * a.W + c] : 0.0f;
    float m = -INFINITY, sum = 0.0f, acc[ATT_PER_LANE];
    for (int t = 0; t < ATT_PER_LANE; t++) {
        int c = lane + 32 * t;
        acc[t] = live && (a.flag & ATT_MERGE) && c < HS ? o[(size_t)i * a.C + c] : 0.0f;
    }
    if (live && (a.flag & ATT_MERGE)) { /* the row's softmax so far: sum 1 against max = lse */
        m = l[i];
        sum = 1.0f;
    }
    int end = a.causal ? last + 1 : a.n;
    for (int j0 = 0; j0 < end; j0 += ATT_TILE) {
        __syncthreads(); /* the tiles of the last round are read */
        load_tile(ks, k, a.ldkv, j0, a.n, HS);
        load_tile(vs, v, a.ldkv, j0, a.n, HS);
        __syncthreads();
        int j = j0 + lane, see = live && j < a.n && (!a.causal || j <= i);
        float s = see ? dot_row(qs[w], ks, lane, HS) * a.scale : -INFINITY;
        float mt = fmaxf(m, warp_max(s));
        float p = see ? expf(s - mt) : 0.0f, corr = m == -INFINITY ? 0.0f : expf(m - mt);
        sum = sum * corr + warp_sum(p);
        m = mt;
        ps[w][lane] = operand(a, p);
        __syncthreads();
        for (int t = 0; t < ATT_PER_LANE; t++) {
            int c = lane + 32 * t;
            if (c >= HS) break;
            float x = acc[t] * corr;
            for (int jj = 0; jj < ATT_TILE; jj++) x += ps[w][jj] * vs[jj][c];
            acc[t] = x;
        }
    }
    if (!live) return;
    float inv = 1.0f / sum;
    for (int t = 0; t < ATT_PER_LANE; t++) {
        int c = lane + 32 * t;
        if (c < HS) o[(size_t)i * a.C + c] = acc[t] * inv;
    }
    if (lane == 0) l[i] = m + logf(sum);
}

/* D (B,NH,n) = dout . out of each query row. */
__global__ void att_delta_kernel(struct att_args a, float *D, long rows)
{
    int lane = threadIdx.x % 32;
    long r = WARP_ROW();
    if (r >= rows) return;
    int i = (int)(r % a.n);
    long bh = r / a.n;
    int h = (int)(bh % a.NH), b = (int)(bh / a.NH);
    size_t at = ((size_t)b * a.T + a.q0 + i) * a.C + (size_t)h * a.HS;
    float s = 0.0f;
    for (int c = lane; c < a.HS; c += 32) s += a.dout[at + c] * a.out[at + c];
    s = warp_sum(s);
    if (lane == 0) D[r] = s;
}

__global__ void att_dq_kernel(struct att_args a)
{
    __shared__ float ks[ATT_TILE][ATT_HS_MAX + 1], vs[ATT_TILE][ATT_HS_MAX + 1];
    __shared__ float qs[ATT_ROWS][ATT_HS_MAX], dos[ATT_ROWS][ATT_HS_MAX], dss[ATT_ROWS][ATT_TILE];
    int lane = threadIdx.x % 32, w = threadIdx.x / 32, HS = a.HS;
    int h = blockIdx.y, b = blockIdx.z, i = blockIdx.x * ATT_ROWS + w, live = i < a.n;
    int last = (int)blockIdx.x * ATT_ROWS + ATT_ROWS - 1;
    if (last > a.n - 1) last = a.n - 1;
    const float *q = a.qkv + ((size_t)b * a.T + a.q0) * a.W + (size_t)h * HS;
    const float *k = a.kv + ((size_t)b * a.T + a.k0) * a.ldkv + (size_t)(h / a.G) * HS, *v = k + (size_t)a.NKV * HS;
    const float *dy = a.dout + ((size_t)b * a.T + a.q0) * a.C + (size_t)h * HS;
    float *dq = a.dq + ((size_t)b * a.T + a.q0) * a.W + (size_t)h * HS;
    size_t row = ((size_t)b * a.NH + h) * a.n + (size_t)i;
    float li = live ? a.lse[((size_t)b * a.NH + h) * a.T + a.q0 + i] : 0.0f, Di = live ? a.D[row] : 0.0f;
    for (int c = lane; c < HS; c += 32) {
        qs[w][c] = live ? q[(size_t)i * a.W + c] : 0.0f;
        dos[w][c] = live ? dy[(size_t)i * a.C + c] : 0.0f;
    }
    float acc[ATT_PER_LANE] = {0};
    int end = a.causal ? last + 1 : a.n;
    for (int j0 = 0; j0 < end; j0 += ATT_TILE) {
        __syncthreads();
        load_tile(ks, k, a.ldkv, j0, a.n, HS);
        load_tile(vs, v, a.ldkv, j0, a.n, HS);
        __syncthreads();
        int j = j0 + lane, see = live && j < a.n && (!a.causal || j <= i);
        float p = see ? expf(dot_row(qs[w], ks, lane, HS) * a.scale - li) : 0.0f;
        float dp = see ? dot_row(dos[w], vs, lane, HS) : 0.0f;
        dss[w][lane] = operand(a, p * (dp - Di) * a.scale);
        __syncthreads();
        for (int t = 0; t < ATT_PER_LANE; t++) {
            int c = lane + 32 * t;
            if (c >= HS) break;
            float x = acc[t];
            for (int jj = 0; jj < ATT_TILE; jj++) x += dss[w][jj] * ks[jj][c];
            acc[t] = x;
        }
    }
    if (!live) return;
    for (int t = 0; t < ATT_PER_LANE; t++) {
        int c = lane + 32 * t;
        if (c < HS) dq[(size_t)i * a.W + c] = (a.flag & ATT_ACCUM ? dq[(size_t)i * a.W + c] : 0.0f) + acc[t];
    }
}

__global__ void att_dkv_kernel(struct att_args a)
{
    __shared__ float qs[ATT_TILE][ATT_HS_MAX + 1], dos[ATT_TILE][ATT_HS_MAX + 1];
    __shared__ float kr[ATT_ROWS][ATT_HS_MAX], vr[ATT_ROWS][ATT_HS_MAX];
    __shared__ float pss[ATT_ROWS][ATT_TILE], dss[ATT_ROWS][ATT_TILE], lt[ATT_TILE], dt[ATT_TILE];
    int lane = threadIdx.x % 32, w = threadIdx.x / 32, HS = a.HS;
    int kh = blockIdx.y, b = blockIdx.z, j = blockIdx.x * ATT_ROWS + w, live = j < a.n;
    int first = (int)blockIdx.x * ATT_ROWS; /* the block's first key row */
    size_t koff = ((size_t)b * a.T + a.k0) * a.ldkv + (size_t)kh * HS, voff = koff + (size_t)a.NKV * HS;
    for (int c = lane; c < HS; c += 32) {
        kr[w][c] = live ? a.kv[koff + (size_t)j * a.ldkv + c] : 0.0f;
        vr[w][c] = live ? a.kv[voff + (size_t)j * a.ldkv + c] : 0.0f;
    }
    float dk[ATT_PER_LANE] = {0}, dv[ATT_PER_LANE] = {0};
    for (int r = 0; r < a.G; r++) {
        int h = kh * a.G + r;
        const float *q = a.qkv + ((size_t)b * a.T + a.q0) * a.W + (size_t)h * HS;
        const float *dy = a.dout + ((size_t)b * a.T + a.q0) * a.C + (size_t)h * HS;
        const float *lse = a.lse + ((size_t)b * a.NH + h) * a.T + a.q0, *D = a.D + ((size_t)b * a.NH + h) * a.n;
        for (int i0 = a.causal ? first / ATT_TILE * ATT_TILE : 0; i0 < a.n; i0 += ATT_TILE) {
            __syncthreads();
            load_tile(qs, q, a.W, i0, a.n, HS);
            load_tile(dos, dy, a.C, i0, a.n, HS);
            if (threadIdx.x < ATT_TILE) {
                int i = i0 + threadIdx.x;
                lt[threadIdx.x] = i < a.n ? lse[i] : 0.0f;
                dt[threadIdx.x] = i < a.n ? D[i] : 0.0f;
            }
            __syncthreads();
            int i = i0 + lane, see = live && i < a.n && (!a.causal || j <= i);
            float p = see ? expf(dot_row(kr[w], qs, lane, HS) * a.scale - lt[lane]) : 0.0f;
            float dp = see ? dot_row(vr[w], dos, lane, HS) : 0.0f;
            pss[w][lane] = operand(a, p);
            dss[w][lane] = operand(a, p * (dp - dt[lane]) * a.scale);
            __syncthreads();
            for (int t = 0; t < ATT_PER_LANE; t++) {
                int c = lane + 32 * t;
                if (c >= HS) break;
                float xv = dv[t], xk = dk[t];
                for (int ii = 0; ii < ATT_TILE; ii++) {
                    xv += pss[w][ii] * dos[ii][c];
                    xk += dss[w][ii] * qs[ii][c];
                }
                dv[t] = xv;
                dk[t] = xk;
            }
        }
    }
    if (!live) return;
    float *gk = a.dkv + koff + (size_t)j * a.ldkv, *gv = a.dkv + voff + (size_t)j * a.ldkv;
    int add = a.flag & ATT_ACCUM;
    for (int t = 0; t < ATT_PER_LANE; t++) {
        int c = lane + 32 * t;
        if (c >= HS) break;
        gk[c] = (add ? gk[c] : 0.0f) + dk[t];
        gv[c] = (add ? gv[c] : 0.0f) + dv[t];
    }
}

static struct att_args args_of(int bf16, const float *qkv, const float *kv, int ldkv, int T, int q0, int k0, int n,
                               int NH, int NKV, int HS, int flags)
{
    if (HS > ATT_HS_MAX)
        cuda_fail_at(__FILE__, __LINE__, "attention", "head size above the fused kernel's limit",
                     "the CUDA attention takes d_model / n_head up to 128");
    struct att_args a;
    memset(&a, 0, sizeof a);
    a.qkv = qkv;
    a.kv = kv;
    a.ldkv = ldkv;
    a.T = T;
    a.q0 = q0;
    a.k0 = k0;
    a.n = n;
    a.NH = NH;
    a.NKV = NKV;
    a.HS = HS;
    a.G = NH / NKV;
    a.W = (NH + 2 * NKV) * HS;
    a.C = NH * HS;
    a.causal = flags & ATT_CAUSAL;
    a.flag = flags;
    a.bf16 = bf16;
    a.scale = 1.0f / sqrtf((float)HS);
    return a;
}

void cuda_attention_forward(int bf16, float *out, float *lse, const float *qkv, const float *kv, int ldkv, int B, int T,
                            int q0, int k0, int n, int NH, int NKV, int HS, int flags)
{
    struct att_args a = args_of(bf16, qkv, kv, ldkv, T, q0, k0, n, NH, NKV, HS, flags);
    a.o = out;
    a.l = lse;
    dim3 grid((unsigned)((n + ATT_ROWS - 1) / ATT_ROWS), (unsigned)NH, (unsigned)B);
    CUDA_LAUNCH(att_forward_kernel, grid, 32 * ATT_ROWS, a);
}

void cuda_attention_backward(int bf16, float *dqkv, float *dkv, const float *dout, const float *out, const float *qkv,
                             const float *kv, int ldkv, const float *lse, int B, int T, int q0, int k0, int n, int NH,
                             int NKV, int HS, int flags)
{
    struct att_args a = args_of(bf16, qkv, kv, ldkv, T, q0, k0, n, NH, NKV, HS, flags);
    long rows = (long)B * NH * n;
    float *D = cuda_att_workspace((size_t)rows); /* (B,NH,n): linear in the length */
    a.lse = lse;
    a.dout = dout;
    a.out = out;
    a.D = D;
    a.dq = dqkv;
    a.dkv = dkv;
    CUDA_LAUNCH(att_delta_kernel, grid_for_rows(rows), BLOCK, a, D, rows);
    dim3 gq((unsigned)((n + ATT_ROWS - 1) / ATT_ROWS), (unsigned)NH, (unsigned)B);
    CUDA_LAUNCH(att_dq_kernel, gq, 32 * ATT_ROWS, a);
    dim3 gk((unsigned)((n + ATT_ROWS - 1) / ATT_ROWS), (unsigned)NKV, (unsigned)B);
    CUDA_LAUNCH(att_dkv_kernel, gk, 32 * ATT_ROWS, a);
}

/* ------------------------------------------------------------ over a cache */

/* Row blockIdx.x's k and v heads (after its NH q heads) into the caches at (seq, pos). */
__global__ void att_store_kernel(const float *qkv, int ldq, float *kc, float *vc, const int32_t *seq,
                                 const int32_t *pos, int Tc, int qcols, int KV)
{
    int r = blockIdx.x;
    const float *k = qkv + (size_t)r * ldq + qcols;
    size_t at = ((size_t)seq[r] * Tc + (size_t)pos[r]) * KV;
    for (int c = threadIdx.x; c < KV; c += blockDim.x) {
        kc[at + c] = k[c];
        vc[at + c] = k[KV + c];
    }
}

/* A warp per (row blockIdx.x, head blockIdx.y): each lane scores one key of
 * a tile of 32 against the row's query (in shared memory), the row's online
 * softmax as att_forward_kernel's, the output's HS values held by the lanes
 * (lane + 32 t) and accumulated from the tile's values read in place. */
__global__ void att_cached_kernel(float *out, const float *qkv, int ldq, const float *kc, const float *vc,
                                  const int32_t *seq, const int32_t *pos, int Tc, int NH, int NKV, int HS, float scale)
{
    __shared__ float qs[ATT_HS_MAX], ps[ATT_TILE];
    int lane = threadIdx.x, r = blockIdx.x, h = blockIdx.y, n = pos[r] + 1, KV = NKV * HS;
    size_t base = (size_t)seq[r] * Tc * KV + (size_t)(h / (NH / NKV)) * HS;
    const float *k = kc + base, *v = vc + base;
    for (int c = lane; c < HS; c += 32) qs[c] = qkv[(size_t)r * ldq + (size_t)h * HS + c];
    __syncthreads();
    float m = -INFINITY, sum = 0.0f, acc[ATT_PER_LANE];
    for (int t = 0; t < ATT_PER_LANE; t++) acc[t] = 0.0f;
    for (int j0 = 0; j0 < n; j0 += ATT_TILE) {
        int j = j0 + lane, see = j < n;
        float s = 0.0f;
        if (see) {
            for (int c = 0; c < HS; c++) s += qs[c] * k[(size_t)j * KV + c];
            s *= scale;
        } else
            s = -INFINITY;
        float mt = fmaxf(m, warp_max(s));
        float p = see ? expf(s - mt) : 0.0f, corr = m == -INFINITY ? 0.0f : expf(m - mt);
        sum = sum * corr + warp_sum(p);
        m = mt;
        ps[lane] = p;
        __syncthreads();
        int nt = n - j0 < ATT_TILE ? n - j0 : ATT_TILE;
        for (int t = 0; t < ATT_PER_LANE; t++) {
            int c = lane + 32 * t;
            if (c >= HS) break;
            float x = acc[t] * corr;
            for (int jj = 0; jj < nt; jj++) x += ps[jj] * v[(size_t)(j0 + jj) * KV + c];
            acc[t] = x;
        }
        __syncthreads(); /* ps is read */
    }
    float inv = 1.0f / sum;
    for (int t = 0; t < ATT_PER_LANE; t++) {
        int c = lane + 32 * t;
        if (c < HS) out[(size_t)r * NH * HS + (size_t)h * HS + c] = acc[t] * inv;
    }
}

void cuda_attention_cached(float *out, const float *qkv, int ldq, float *kc, float *vc, const int32_t *seq,
                           const int32_t *pos, int R, int Tc, int NH, int NKV, int HS)
{
    if (R <= 0) return;
    CUDA_LAUNCH(att_store_kernel, dim3((unsigned)R), 128, qkv, ldq, kc, vc, seq, pos, Tc, NH * HS, NKV * HS);
    CUDA_LAUNCH(att_cached_kernel, dim3((unsigned)R, (unsigned)NH), 32, out, qkv, ldq, kc, vc, seq, pos, Tc, NH, NKV,
                HS, 1.0f / sqrtf((float)HS));
}
