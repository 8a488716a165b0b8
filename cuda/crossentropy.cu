/* crossentropy.cu -- vocabulary-parallel cross-entropy in the three local
 * steps of backend_ops.h, plus its backward.  A block per row for the
 * reductions over the shard's columns; only the real columns (global id
 * < V) enter the softmax. */
#include "common.cuh"

/* Number of real (< V) columns among this shard's [v0, v0+Vs). */
static int real_cols(int Vs, int v0, int V)
{
    long r = (long)V - v0;
    return r < 0 ? 0 : (r > Vs ? Vs : (int)r);
}

__global__ void ce_max_kernel(float *maxes, const float *logits, int Vs, int nv)
{
    const float *l = logits + (size_t)blockIdx.x * Vs;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < nv; j += blockDim.x) mx = fmaxf(mx, l[j]);
    mx = block_max(mx);
    if (threadIdx.x == 0) maxes[blockIdx.x] = mx;
}

/* The real columns' logits become their exponentials (backend_ops.h); the
 * thread that holds the target's column keeps its logit first. */
__global__ void ce_sumexp_kernel(float *sums, float *tlogit, float *logits,
                                 const float *maxes, const int32_t *targets, int Vs, int v0, int nv)
{
    int n = blockIdx.x;
    float *l = logits + (size_t)n * Vs;
    float mx = maxes[n], s = 0.0f;
    long t = (long)targets[n] - v0;
    for (int j = threadIdx.x; j < nv; j += blockDim.x) {
        float x = l[j];
        if (j == t) tlogit[n] = x;
        float e = expf(x - mx);
        l[j] = e;
        s += e;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) {
        sums[n] = s;
        if (t < 0 || t >= nv) tlogit[n] = 0.0f;
    }
}

__global__ void ce_loss_kernel(float *losses, const float *maxes, const float *sums,
                               const float *tlogit, int N)
{
    FOR_EACH(n, (size_t)N) losses[n] = logf(sums[n]) + maxes[n] - tlogit[n];
}

/* Elementwise on ce_sumexp_kernel's exponentials; each thread reads its
 * element before writing it, so dlogits may alias exps. */
__global__ void ce_backward_kernel(float *dlogits, const float *exps, const float *sums,
                                   const int32_t *targets, float dloss, int Vs, int v0, int nv, size_t NV)
{
    FOR_EACH(i, NV) {
        size_t n = i / Vs;
        int j = (int)(i % Vs);
        float d = 0.0f;
        if (j < nv) {
            float p = exps[i] * (1.0f / sums[n]);
            d = j == (long)targets[n] - v0 ? (p - 1.0f) * dloss : p * dloss;
        }
        dlogits[i] = d;
    }
}

void cuda_crossentropy_max(float *maxes, const float *logits, int N, int Vs, int v0, int V)
{
    CUDA_LAUNCH(ce_max_kernel, N, BLOCK, maxes, logits, Vs, real_cols(Vs, v0, V));
}

void cuda_crossentropy_sumexp(float *sums, float *tlogit, float *logits, const float *maxes,
                              const int32_t *targets, int N, int Vs, int v0, int V)
{
    CUDA_LAUNCH(ce_sumexp_kernel, N, BLOCK, sums, tlogit, logits, maxes, targets, Vs, v0,
                real_cols(Vs, v0, V));
}

void cuda_crossentropy_loss(float *losses, const float *maxes, const float *sums,
                            const float *tlogit, int N)
{
    CUDA_LAUNCH(ce_loss_kernel, grid_for(N), BLOCK, losses, maxes, sums, tlogit, N);
}

void cuda_crossentropy_backward(float *dlogits, const float *exps, const float *sums,
                                const int32_t *targets, float dloss, int N, int Vs, int v0, int V)
{
    size_t NV = (size_t)N * Vs;
    CUDA_LAUNCH(ce_backward_kernel, grid_for(NV), BLOCK, dlogits, exps, sums, targets, dloss, Vs, v0,
                real_cols(Vs, v0, V), NV);
}
