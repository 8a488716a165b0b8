/* kernels_isa.c -- the CPU kernels of backend.h for the SIMD path in use.
 *
 * kernels_cpu.c is compiled once per path (names suffixed _generic, _avx2,
 * _avx512; the last two with -mavx2/-mavx512* on x86-64), so the compiler
 * vectorises its loops at each width.  Its sums are written so that the
 * width never changes them, and the build has -ffp-contract=off: the three
 * copies compute bitwise the same numbers, only faster.  The plain names
 * below forward to the copy of isa_active() (cpu.h). */
#include "backend.h"
#include "build_config.h"
#include "cpu.h"

#define KREAL float
#define KNAME(n) n##_generic
#include "backend_ops.h"
#undef KNAME
#if defined(TRIAD_KERNELS_X86)
#define KNAME(n) n##_avx2
#include "backend_ops.h"
#undef KNAME
#define KNAME(n) n##_avx512
#include "backend_ops.h"
#undef KNAME
#endif
#undef KREAL

#define KERNEL_LIST(X)                                                                                      \
    X(encoder_forward) X(encoder_backward) X(layernorm_forward) X(layernorm_backward) X(matmul_forward)    \
    X(matmul_backward) X(attention_forward) X(attention_backward) X(gelu_forward) X(gelu_backward)         \
    X(residual_forward) X(crossentropy_max) X(crossentropy_sumexp) X(crossentropy_loss)                    \
    X(crossentropy_backward) X(adamw_update) X(sumsq) X(scale_inplace)

#define MEMBER(n) __typeof__(n##_generic) *n;
struct kernel_set {
    KERNEL_LIST(MEMBER)
};
#define ENTRY_GENERIC(n) .n = n##_generic,
#if defined(TRIAD_KERNELS_X86)
#define ENTRY_AVX2(n) .n = n##_avx2,
#define ENTRY_AVX512(n) .n = n##_avx512,
#else
#define ENTRY_AVX2 ENTRY_GENERIC     /* (never chosen: cpu.h supports only generic here) */
#define ENTRY_AVX512 ENTRY_GENERIC
#endif

static const struct kernel_set sets[ISA_COUNT] = {
    [ISA_GENERIC] = {KERNEL_LIST(ENTRY_GENERIC)},
    [ISA_AVX2] = {KERNEL_LIST(ENTRY_AVX2)},
    [ISA_AVX512] = {KERNEL_LIST(ENTRY_AVX512)},
};

static inline const struct kernel_set *ks(void) { return &sets[isa_active()]; }

void encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, int B, int T, int C,
                     int v0, int Vs)
{
    ks()->encoder_forward(out, inp, wte, wpe, B, T, C, v0, Vs);
}

void encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T, int C, int v0,
                      int Vs)
{
    ks()->encoder_backward(dwte, dwpe, dout, inp, B, T, C, v0, Vs);
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                       const float *bias, int N, int C)
{
    ks()->layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}

void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                        const float *weight, const float *mean, const float *rstd, int N, int C)
{
    ks()->layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC)
{
    ks()->matmul_forward(out, inp, weight, bias, N, C, OC);
}

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC)
{
    ks()->matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    ks()->attention_forward(out, att, qkv, B, T, C, NH);
}

void attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv, const float *att, int B,
                        int T, int C, int NH)
{
    ks()->attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
}

void gelu_forward(float *out, const float *inp, size_t N) { ks()->gelu_forward(out, inp, N); }

void gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
    ks()->gelu_backward(dinp, inp, dout, N);
}

void residual_forward(float *out, const float *a, const float *b, size_t N) { ks()->residual_forward(out, a, b, N); }

void crossentropy_max(float *maxes, const float *logits, int N, int Vs, int v0, int V)
{
    ks()->crossentropy_max(maxes, logits, N, Vs, v0, V);
}

void crossentropy_sumexp(float *sums, float *tlogit, const float *logits, const float *maxes,
                         const int32_t *targets, int N, int Vs, int v0, int V)
{
    ks()->crossentropy_sumexp(sums, tlogit, logits, maxes, targets, N, Vs, v0, V);
}

void crossentropy_loss(float *losses, const float *maxes, const float *sums, const float *tlogit, int N)
{
    ks()->crossentropy_loss(losses, maxes, sums, tlogit, N);
}

void crossentropy_backward(float *dlogits, const float *logits, const float *maxes, const float *sums,
                           const int32_t *targets, float dloss, int N, int Vs, int v0, int V)
{
    ks()->crossentropy_backward(dlogits, logits, maxes, sums, targets, dloss, N, Vs, v0, V);
}

void adamw_update(float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float wd, int t)
{
    ks()->adamw_update(param, grad, m, v, n, lr, beta1, beta2, eps, wd, t);
}

double sumsq(const float *x, size_t n) { return ks()->sumsq(x, n); }

void scale_inplace(float *x, size_t n, float s) { ks()->scale_inplace(x, n, s); }
