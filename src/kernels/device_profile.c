/* device_profile.c -- a device table that times its operations (device_profile.h). */
#include "device_profile.h"

#include "log.h"

/* ops.def's operations, then the table's own that a step calls: the
 * products with rounded outputs, the roundings and the 16-bit storage of a
 * bf16/fp16 run, AdamW with its rounded working copy, and the copies and
 * zeroings within the device */
#define MEMORY_OPS(X)                                                                           \
    X(matmul_forward_rounded) X(matmul_backward_rounded) X(lp_round) X(lp_round_to) X(lp_pack) \
    X(lp_unpack) X(adamw_update_rounded) X(copy) X(zero)
enum {
#define OP(ret, name, params, args) OPI_##name,
#define OP_P OP
#include "ops.def"
#undef OP
#undef OP_P
#define X(name) OPI_##name,
    MEMORY_OPS(X)
#undef X
    NUM_OPS
};

static const char *const op_name[NUM_OPS] = {
#define OP(ret, name, params, args) #name,
#define OP_P OP
#include "ops.def"
#undef OP
#undef OP_P
#define X(name) #name,
    MEMORY_OPS(X)
#undef X
};

static struct {
    double seconds, calls, flops;
} fig[NUM_OPS];
static const struct device *inner;
static struct device table;
static int counting;

void device_profile_count(int on) { counting = on; }

static double op_begin(void)
{
    if (counting && inner->on_device) inner->sync();
    return wtime();
}

static void op_end(int i, double t0, double flops)
{
    if (!counting) return;
    if (inner->on_device) inner->sync();
    fig[i].seconds += wtime() - t0;
    fig[i].calls += 1;
    fig[i].flops += flops;
}

/* The products' operations (ops.def's OP_P): a matmul 2 N C OC a product made. */
#define OP(ret, name, params, args)
#define OP_P(ret, name, params, args) static double flops_##name params;
#include "ops.def"
#undef OP
#undef OP_P

static double flops_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C,
                                   int OC)
{
    (void)out, (void)inp, (void)weight, (void)bias;
    return 2.0 * N * C * OC;
}

static double flops_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                    const float *weight, int N, int C, int OC)
{
    (void)dbias, (void)dout, (void)inp, (void)weight;
    return 2.0 * N * C * OC * ((dinp != NULL) + (dweight != NULL));
}

/* Attention: the products made over the (query, key) pairs a call
 * attends, 2 HS flops each: two in forward (the scores, their sum of
 * values), five in backward (the scores again, dV, dP, dQ, dK); with
 * ATT_CAUSAL n (n + 1) / 2 pairs per head, n^2 without. */
static double attention_flops(int products, int B, int n, int NH, int HS, int flags)
{
    double pairs = flags & ATT_CAUSAL ? 0.5 * n * (n + 1.0) : (double)n * n;
    return 2.0 * HS * products * pairs * NH * B;
}

static double flops_attention_forward(float *out, float *lse, const float *qkv, const float *kv, int ldkv, int B,
                                      int T, int q0, int k0, int n, int NH, int NKV, int HS, int flags)
{
    (void)out, (void)lse, (void)qkv, (void)kv, (void)ldkv, (void)T, (void)q0, (void)k0, (void)NKV;
    return attention_flops(2, B, n, NH, HS, flags);
}

static double flops_attention_backward(float *dqkv, float *dkv, const float *dout, const float *out,
                                       const float *qkv, const float *kv, int ldkv, const float *lse, int B, int T,
                                       int q0, int k0, int n, int NH, int NKV, int HS, int flags)
{
    (void)dqkv, (void)dkv, (void)dout, (void)out, (void)qkv, (void)kv, (void)ldkv, (void)lse, (void)T, (void)q0,
        (void)k0, (void)NKV;
    return attention_flops(5, B, n, NH, HS, flags);
}

/* Each operation: timed, then forwarded to the inner table. */
#define WITH_P(...) (p, __VA_ARGS__)
#define TIMED_void(call, i, t0, flops) \
    call;                              \
    op_end(i, t0, flops);
#define TIMED_double(call, i, t0, flops) \
    double r_ = call;                    \
    op_end(i, t0, flops);                \
    return r_;
#define OP(ret, name, params, args)                            \
    static ret timed_##name DEVICE_PARAMS params               \
    {                                                          \
        double t0 = op_begin();                                \
        TIMED_##ret(inner->name WITH_P args, OPI_##name, t0, 0) \
    }
#define OP_P(ret, name, params, args)                                        \
    static ret timed_##name DEVICE_PARAMS params                             \
    {                                                                        \
        double t0 = op_begin();                                              \
        TIMED_##ret(inner->name WITH_P args, OPI_##name, t0, flops_##name args) \
    }
#include "ops.def"
#undef OP
#undef OP_P

static void timed_matmul_forward_rounded(enum precision p, float *out, const float *inp, const float *weight,
                                         const float *bias, int N, int C, int OC)
{
    double t0 = op_begin();
    inner->matmul_forward_rounded(p, out, inp, weight, bias, N, C, OC);
    op_end(OPI_matmul_forward_rounded, t0, flops_matmul_forward(out, inp, weight, bias, N, C, OC));
}

static void timed_matmul_backward_rounded(enum precision p, float *dinp, float *dweight, float *dbias,
                                          const float *dout, const float *inp, const float *weight, int N, int C,
                                          int OC)
{
    double t0 = op_begin();
    inner->matmul_backward_rounded(p, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    op_end(OPI_matmul_backward_rounded, t0, flops_matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC));
}

static void timed_lp_round(enum precision p, float *x, size_t n)
{
    double t0 = op_begin();
    inner->lp_round(p, x, n);
    op_end(OPI_lp_round, t0, 0);
}

static void timed_lp_round_to(enum precision p, float *dst, const float *src, size_t n)
{
    double t0 = op_begin();
    inner->lp_round_to(p, dst, src, n);
    op_end(OPI_lp_round_to, t0, 0);
}

static void timed_lp_pack(enum precision p, uint16_t *dst, const float *src, size_t n)
{
    double t0 = op_begin();
    inner->lp_pack(p, dst, src, n);
    op_end(OPI_lp_pack, t0, 0);
}

static void timed_lp_unpack(enum precision p, float *dst, const uint16_t *src, size_t n)
{
    double t0 = op_begin();
    inner->lp_unpack(p, dst, src, n);
    op_end(OPI_lp_unpack, t0, 0);
}

static void timed_adamw_update_rounded(enum precision p, float *param, float *low, float *grad, float gscale,
                                       float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
                                       float wd, int t, int clear)
{
    double t0 = op_begin();
    inner->adamw_update_rounded(p, param, low, grad, gscale, m, v, n, lr, beta1, beta2, eps, wd, t, clear);
    op_end(OPI_adamw_update_rounded, t0, 0);
}

static void timed_copy(void *dst, const void *src, size_t bytes)
{
    double t0 = op_begin();
    inner->copy(dst, src, bytes);
    op_end(OPI_copy, t0, 0);
}

static void timed_zero(void *p, size_t bytes)
{
    double t0 = op_begin();
    inner->zero(p, bytes);
    op_end(OPI_zero, t0, 0);
}

const struct device *device_profiled(const struct device *k)
{
    inner = k;
    table = *k;
#define OP(ret, name, params, args) table.name = timed_##name;
#define OP_P OP
#include "ops.def"
#undef OP
#undef OP_P
#define X(name) table.name = k->name ? timed_##name : NULL;
    MEMORY_OPS(X)
#undef X
    return &table;
}

int device_profile_get(struct op_profile *out, int max)
{
    int n = NUM_OPS < max ? NUM_OPS : max;
    for (int i = 0; i < n; i++) out[i] = (struct op_profile){op_name[i], fig[i].seconds, fig[i].calls, fig[i].flops};
    return n;
}

void device_profile_print(MPI_Comm world, double step_seconds, int steps, FILE *f)
{
    int rank, size;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Comm_size(world, &size));
    double mine[NUM_OPS + 1], lo[NUM_OPS + 1], sum[NUM_OPS + 1], hi[NUM_OPS + 1];
    for (int i = 0; i < NUM_OPS; i++) mine[i] = fig[i].seconds;
    mine[NUM_OPS] = step_seconds;
    MPI_CHECK(MPI_Reduce(mine, lo, NUM_OPS + 1, MPI_DOUBLE, MPI_MIN, 0, world));
    MPI_CHECK(MPI_Reduce(mine, sum, NUM_OPS + 1, MPI_DOUBLE, MPI_SUM, 0, world));
    MPI_CHECK(MPI_Reduce(mine, hi, NUM_OPS + 1, MPI_DOUBLE, MPI_MAX, 0, world));
    if (rank != 0) return;
    double avg[NUM_OPS + 1], in_ops = 0;
    int order[NUM_OPS];
    for (int i = 0; i <= NUM_OPS; i++) avg[i] = sum[i] / size;
    for (int i = 0; i < NUM_OPS; i++) { /* the busiest first */
        int j = i;
        for (in_ops += avg[i]; j > 0 && avg[order[j - 1]] < avg[i]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    double step = avg[NUM_OPS] > 0 ? avg[NUM_OPS] : 1;
    fprintf(f, "device operations over %d steps (diag.profile_ops; seconds over %d ranks; calls and GFLOP/s on "
               "rank 0):\n", steps, size);
    fprintf(f, "  %-22s %10s %10s %10s %7s %9s %9s\n", "operation", "min", "avg", "max", "% step", "calls",
            "GFLOP/s");
    for (int j = 0; j < NUM_OPS; j++) {
        int i = order[j];
        if (fig[i].calls == 0 && hi[i] == 0) continue;
        fprintf(f, "  %-22s %10.4f %10.4f %10.4f %6.1f%% %9.0f", op_name[i], lo[i], avg[i], hi[i],
                100 * avg[i] / step, fig[i].calls);
        if (fig[i].flops > 0 && fig[i].seconds > 0) fprintf(f, " %9.1f", fig[i].flops / fig[i].seconds / 1e9);
        fputc('\n', f);
    }
    fprintf(f, "  %-22s %10s %10.4f %10s %6.1f%%\n", "(outside the operations)", "", avg[NUM_OPS] - in_ops, "",
            100 * (avg[NUM_OPS] - in_ops) / step);
}
