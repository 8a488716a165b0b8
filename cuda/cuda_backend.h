/* cuda_backend.h -- the CUDA kernels: every operation of src/kernels/backend_ops.h
 * as cuda_<op> with the same arguments and semantics ("+=" accumulates,
 * everything else is overwritten), plus the low-precision helpers.
 *
 * All pointers are device pointers.  Kernels run on the default stream in
 * call order; results that come back to the host (sumsq, count_nonfinite)
 * synchronise.  Matmuls use cuBLAS.  No kernel here uses floating-point
 * atomics, and cuBLAS repeats its bits on the same GPU model, so a call
 * repeated on the same inputs gives the same bits.
 *
 * Order of use: pick the device (cuda_device_pick, cuda_device.h, or
 * cudaSetDevice), cuda_backend_init(), kernels, cuda_backend_finalize(). */
#ifndef TRIAD_CUDA_BACKEND_H
#define TRIAD_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h" /* attention's flags */

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices this process sees; 0 with the reason in why
 * ("cudaGetDeviceCount: <error>" or "cudaGetDeviceCount: 0 devices") when
 * there is none.  Any error counts as "no GPU". */
int cuda_device_count(char *why, size_t whylen);

/* Create the cuBLAS handle and the workspaces on the current
 * device; release them.  Every kernel below needs the backend initialised. */
void cuda_backend_init(void);
void cuda_backend_finalize(void);
/* fp32 matmuls on TF32 tensor cores (1) or in full fp32 (0, the default);
 * the fused attention computes in fp32 FMAs either way. */
void cuda_set_tf32(int on);
/* The dense rate of this GPU in GFLOP/s: n^3 products of random operands
 * on cuBLAS, 16-bit of format lp on tensor cores (lp >= 0, an enum cuda_lp)
 * or fp32 (lp < 0; TF32 as set), timed for 0.2 s after 0.05 s of warm-up.
 * Transient device memory: n^2 x (12 bytes fp32, 8 bytes 16-bit).  The
 * program's MFU reference (n = 4096). */
double cuda_peak_gflops(int lp, int n);
/* The current GPU's name ("NVIDIA H200", ...). */
const char *cuda_device_name(void);

/* ------------------------------------------------------------ model kernels */

void cuda_encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                          int B, int T, int C, int v0, int Vs);
void cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                           int B, int T, int C, int v0, int Vs);

void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                            const float *weight, const float *bias, int N, int C);
void cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, const float *mean,
                             const float *rstd, int N, int C);

void cuda_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                         int N, int C, int OC);
void cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, int N, int C, int OC);

void cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps);
void cuda_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                           const float *rstd, int N, int C);

/* Fused causal attention as the CPU kernels (backend_ops.h), in fp32, no
 * T x T buffer (the backward's workspace holds one float per query row:
 * cuda_att_workspace).  bf16 != 0 (a bf16 run's): the probabilities and dS
 * rounded to bf16 before their products, as the CPU's
 * attention_forward_bf16.  Head sizes up to 128. */
void cuda_attention_forward(int bf16, float *out, float *lse, const float *qkv, const float *kv, int ldkv, int B, int T,
                            int q0, int k0, int n, int NH, int NKV, int HS, int flags);
void cuda_attention_backward(int bf16, float *dqkv, float *dkv, const float *dout, const float *out, const float *qkv,
                             const float *kv, int ldkv, const float *lse, int B, int T, int q0, int k0, int n, int NH,
                             int NKV, int HS, int flags);
/* Attention of R rows over a cache of keys and values (backend_ops.h):
 * the rows' k and v stored, then a warp per (row, head).  Head sizes up
 * to 128. */
void cuda_attention_cached(float *out, const float *qkv, int ldq, float *kc, float *vc, const int32_t *seq,
                           const int32_t *pos, int R, int Tc, int NH, int NKV, int HS);
void cuda_copy_cols(float *dst, int ldd, const float *src, int lds, size_t rows, int cols, int add);
void cuda_rows_gather(float *dst, const float *src, const int32_t *idx, const float *w, int R, int C);
void cuda_rows_combine(float *out, const float *src, const int32_t *idx, const float *w, int N, int K, int C, int add);
void cuda_rows_dot(float *out, const float *a, const float *b, int R, int C);
void cuda_rope_forward(float *qkv, const float *cos, const float *sin, int B, int T, int NH, int NKV, int HS);
void cuda_rope_backward(float *dqkv, const float *cos, const float *sin, int B, int T, int NH, int NKV, int HS);

void cuda_swiglu_forward(float *out, const float *inp, size_t N, int F);
void cuda_swiglu_backward(float *dinp, const float *inp, const float *dout, size_t N, int F);

void cuda_gelu_forward(float *out, const float *inp, size_t N);
void cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N);

void cuda_residual_forward(float *out, const float *a, const float *b, size_t N);

void cuda_crossentropy_max(float *maxes, const float *logits, int N, int Vs, int v0, int V);
void cuda_crossentropy_sumexp(float *sums, float *tlogit, float *logits, const float *maxes,
                              const int32_t *targets, int N, int Vs, int v0, int V);
void cuda_crossentropy_loss(float *losses, const float *maxes, const float *sums,
                            const float *tlogit, int N);
void cuda_crossentropy_backward(float *dlogits, const float *exps, const float *sums,
                                const int32_t *targets, float dloss, int N, int Vs, int v0, int V);

void cuda_adamw_update(float *param, float *grad, float gscale, float *m, float *v, size_t n,
                       float lr, float beta1, float beta2, float eps, float wd, int t, int clear);

double cuda_sumsq(const float *x, size_t n);
void cuda_scale_inplace(float *x, size_t n, float s);

/* ------------------------------------------------------------ low precision */

/* The 16-bit formats; a buffer of either holds uint16_t bit patterns. */
enum cuda_lp { CUDA_BF16, CUDA_FP16 };

/* x[i] = the nearest bf16 / fp16 value, round-to-nearest-even; NaN stays
 * NaN; fp16 magnitudes >= 65520 become infinities. */
void cuda_round_bf16(float *x, size_t n);
void cuda_round_fp16(float *x, size_t n);
/* dst[i] = the nearest value of lp to src[i] (dst may be src). */
void cuda_round_to(enum cuda_lp lp, float *dst, const float *src, size_t n);
/* Store n values as 16-bit patterns (rounding as above); load them (exact). */
void cuda_pack_bf16(uint16_t *dst, const float *src, size_t n);
void cuda_unpack_bf16(float *dst, const uint16_t *src, size_t n);
void cuda_pack_fp16(uint16_t *dst, const float *src, size_t n);
void cuda_unpack_fp16(float *dst, const uint16_t *src, size_t n);
/* The pack of format lp. */
void cuda_pack(enum cuda_lp lp, uint16_t *dst, const float *src, size_t n);

/* Number of NaN or infinite elements (the loss scaler's overflow check). */
size_t cuda_count_nonfinite(const float *x, size_t n);

/* The linear layer of a bf16/fp16 run on tensor cores: the
 * arguments and results of cuda_matmul_* (fp32 buffers),
 * the products computed from 16-bit copies of their operands (exact when the
 * buffers hold values of format lp, as a mixed-precision model's do) with
 * fp32 accumulation.  The copies live in the backend's scratch, which grows
 * to the largest operands. */
void cuda_matmul_forward_tc(enum cuda_lp lp, float *out, const float *inp, const float *weight,
                            const float *bias, int N, int C, int OC);
void cuda_matmul_backward_tc(enum cuda_lp lp, float *dinp, float *dweight, float *dbias,
                             const float *dout, const float *inp, const float *weight, int N, int C,
                             int OC);

#ifdef __cplusplus
}
#endif

#endif
