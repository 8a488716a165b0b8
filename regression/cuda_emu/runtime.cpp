/* runtime.cpp -- the CUDA emulator's host side (see emu_device.h): fibers
 * for the threads of a block, the device-memory arena and its protection,
 * the runtime calls, and cuBLAS as reference loops.
 *
 * TRIAD_EMU_DEVICES (default 1) is the number of GPUs a process sees (0: none);
 * TRIAD_EMU_REPORT names a file for the peak of device memory (report);
 * TRIAD_EMU_FAIL_MALLOC(_HOST)=N fails the Nth allocation (fail_nth). */
#include "emu_device.h"
#include "cublas_v2.h"
#include <cstdio>
#include <cstdlib>
#include <map>

#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
emu_bar emu_block_bar;
emu_warp *emu_my_warp;
int emu_lane;

/* ------------------------------------------------------------ fibers */

/* The threads of a block are fibers on the calling thread's stack-less
 * scheduler: each runs until it waits at a barrier (__syncthreads, a warp
 * shuffle) or ends; the scheduler resumes them in turn.  On x86-64 a switch
 * saves the callee-saved registers and the stack pointer (no system call,
 * unlike swapcontext, which also saves the signal mask); elsewhere ucontext. */
#define EMU_STACK (64 * 1024)
#define EMU_THREADS 1024
static char *stacks;
static unsigned cur_fiber;
static int fib_done[EMU_THREADS];
static emu_warp warps[EMU_THREADS / 32];
static void (*fib_body)(void *, unsigned);
static void *fib_arg;

static void set_ids(unsigned t)
{
    threadIdx = {t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y)};
    emu_my_warp = &warps[t / 32];
    emu_lane = t % 32;
}

#if defined(__x86_64__)
/* Save rbp, rbx, r12-r15 on the current stack and its pointer in *from;
 * continue on stack `to` (pushed the same way, or prepared by fiber_init). */
extern "C" void emu_switch(void **from, void *to);
asm(".pushsection .text\n"
    ".globl emu_switch\n"
    ".type emu_switch, @function\n"
    "emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size emu_switch, .-emu_switch\n"
    ".popsection\n");
static void *sched_sp, *fib_sp[EMU_THREADS];
static void to_scheduler(unsigned t) { emu_switch(&fib_sp[t], sched_sp); }
static void to_fiber(unsigned t) { emu_switch(&sched_sp, fib_sp[t]); }
static void fiber_main(void);
/* A fresh stack whose first switch "returns" into fiber_main: six zero
 * registers, then the return address, 16-byte aligned as after a call. */
static void fiber_init(unsigned t)
{
    uintptr_t top = ((uintptr_t)(stacks + (size_t)(t + 1) * EMU_STACK) & ~(uintptr_t)15) - 64;
    void **f = (void **)top;
    for (int i = 0; i < 6; i++) f[i] = nullptr;
    f[6] = (void *)fiber_main;
    f[7] = nullptr; /* fiber_main never returns */
    fib_sp[t] = f;
}
#else
#include <ucontext.h>
static ucontext_t sched_ctx, fib_ctx[EMU_THREADS];
static void to_scheduler(unsigned t) { swapcontext(&fib_ctx[t], &sched_ctx); }
static void to_fiber(unsigned t) { swapcontext(&sched_ctx, &fib_ctx[t]); }
static void fiber_main(void);
static void fiber_init(unsigned t)
{
    getcontext(&fib_ctx[t]);
    fib_ctx[t].uc_stack.ss_sp = stacks + (size_t)t * EMU_STACK;
    fib_ctx[t].uc_stack.ss_size = EMU_STACK;
    fib_ctx[t].uc_link = nullptr;
    makecontext(&fib_ctx[t], fiber_main, 0);
}
#endif

void emu_yield(void) { to_scheduler(cur_fiber); }

static void fiber_main(void)
{
    unsigned t = cur_fiber;
    fib_body(fib_arg, t);
    set_ids(t);
    emu_arrive_and_drop(&emu_my_warp->bar);
    emu_arrive_and_drop(&emu_block_bar);
    fib_done[t] = 1;
    to_scheduler(t);
    abort(); /* a finished fiber is never resumed */
}

void emu_run_block(unsigned nt, void (*body)(void *, unsigned), void *arg)
{
    if (!stacks) stacks = (char *)malloc((size_t)EMU_THREADS * EMU_STACK);
    fib_body = body;
    fib_arg = arg;
    emu_block_bar = {(int)nt, 0, 0};
    for (unsigned w = 0; w < nt / 32; w++) warps[w].bar = {32, 0, 0};
    for (unsigned t = 0; t < nt; t++) {
        fib_done[t] = 0;
        fiber_init(t);
    }
    unsigned left = nt;
    while (left) {
        for (unsigned t = 0; t < nt; t++) {
            if (fib_done[t]) continue;
            cur_fiber = t;
            set_ids(t);
            to_fiber(t);
            if (fib_done[t]) left--;
        }
    }
}

/* ------------------------------------------------------------ device memory */

/* One reserved range; [arena, arena + top) is in use.  Blocks are whole
 * pages (a freed one is returned to the kernel and kept for reuse by size). */
#define ARENA_BYTES ((size_t)64 << 30)
#define PAGE 4096
static char *arena;
static size_t top;
struct block { size_t bytes, asked; }; /* whole pages; what cudaMalloc was asked for */
static std::map<char *, block> live;
static size_t asked_now, asked_peak; /* bytes cudaMalloc was asked for */
static std::multimap<size_t, char *> spare;
static int depth;

static void apply_protection(int prot)
{
    if (top && mprotect(arena, top, prot) != 0) {
        perror("EMU: mprotect of the device arena");
        abort();
    }
}

extern "C" void emu_device_enter(void)
{
    if (depth++ == 0) apply_protection(PROT_READ | PROT_WRITE);
}

extern "C" void emu_device_leave(void)
{
    if (--depth == 0) apply_protection(PROT_NONE);
}

/* Device memory touched from the host: say where, then stop. */
static void on_fault(int sig, siginfo_t *si, void *)
{
    char *a = (char *)si->si_addr;
    if (arena && a >= arena && a < arena + ARENA_BYTES) {
        char msg[256];
        int len = snprintf(msg, sizeof msg,
                           "EMU: host code touched device memory (arena offset %zu): a device pointer "
                           "read or written on the host, or given to MPI unstaged\n",
                           (size_t)(a - arena));
        if (write(2, msg, (size_t)len) < 0) _exit(3);
        void *frames[32];
        backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
    }
    signal(sig, SIG_DFL); /* the fault repeats and ends the process */
}

static bool in_arena(const void *p) { return arena && (const char *)p >= arena && (const char *)p < arena + top; }

struct device_scope {
    device_scope() { emu_device_enter(); }
    ~device_scope() { emu_device_leave(); }
};

/* TRIAD_EMU_REPORT=FILE: at exit, append this process's peak of device
 * bytes asked for (what the planner's device columns must cover). */
static void report(void)
{
    const char *path = getenv("TRIAD_EMU_REPORT");
    FILE *f = path ? fopen(path, "a") : nullptr;
    if (!f) return;
    fprintf(f, "device peak %zu bytes\n", asked_peak);
    fclose(f);
}

extern "C" {
static int n_devices(void)
{
    const char *e = getenv("TRIAD_EMU_DEVICES");
    return e && *e && atoi(e) >= 0 ? atoi(e) : 1; /* (0: none, a node without a usable GPU) */
}
cudaError_t cudaGetDeviceCount(int *n) { *n = n_devices(); return cudaSuccess; }
const char *cudaGetErrorName(cudaError_t e) { return e ? "cudaErrorEmu" : "cudaSuccess"; }
const char *cudaGetErrorString(cudaError_t e) { return e ? "emulated error" : "no error"; }
/* TRIAD_EMU_FAIL_MALLOC=N: the Nth cudaMalloc of the process fails as a
 * full device would (cudaErrorMemoryAllocation); TRIAD_EMU_FAIL_MALLOC_HOST
 * the same for cudaMallocHost. */
static int fail_nth(const char *name, long *count)
{
    const char *e = getenv(name);
    return e && *e && ++*count == atol(e);
}
static long mallocs, host_mallocs;
cudaError_t cudaMalloc(void **p, size_t n)
{
    if (fail_nth("TRIAD_EMU_FAIL_MALLOC", &mallocs)) return cudaErrorMemoryAllocation;
    if (!arena) {
        void *a = mmap(nullptr, ARENA_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (a == MAP_FAILED) return cudaErrorMemoryAllocation;
        arena = (char *)a;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fault;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGSEGV, &sa, nullptr);
        void *frame;
        backtrace(&frame, 1); /* loads what backtrace needs now, not in the handler */
        atexit(report);
    }
    size_t bytes = (n + PAGE - 1) / PAGE * PAGE;
    if (bytes == 0) bytes = PAGE;
    char *b;
    auto s = spare.find(bytes);
    if (s != spare.end()) {
        b = s->second;
        spare.erase(s);
    } else {
        if (top + bytes > ARENA_BYTES) return cudaErrorMemoryAllocation;
        b = arena + top;
        top += bytes;
        if (depth) apply_protection(PROT_READ | PROT_WRITE); /* the new pages too */
    }
    live[b] = {bytes, n};
    asked_now += n;
    if (asked_now > asked_peak) asked_peak = asked_now;
    device_scope in;
    memset(b, 0xff, bytes); /* not zeroed, as on a GPU: NaN floats */
    *p = b;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p)
{
    if (!p) return cudaSuccess;
    auto it = live.find((char *)p);
    if (it == live.end()) {
        fprintf(stderr, "EMU: cudaFree of %p, not a live device allocation\n", p);
        return cudaErrorInvalidValue;
    }
    madvise(it->first, it->second.bytes, MADV_DONTNEED);
    spare.emplace(it->second.bytes, it->first);
    asked_now -= it->second.asked;
    live.erase(it);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n)
{
    if (fail_nth("TRIAD_EMU_FAIL_MALLOC_HOST", &host_mallocs)) return cudaErrorMemoryAllocation;
    *p = aligned_alloc(256, (n + 255) / 256 * 256);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void *p)
{
    if (in_arena(p)) return cudaErrorInvalidValue;
    free(p);
    return cudaSuccess;
}
/* The kind must name where the pointers are: a wrong one is an error (on a
 * GPU it would copy from or to the wrong memory). */
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    bool dd = in_arena(d), sd = in_arena(s);
    bool want_d = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
    bool want_s = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
    if (n && (dd != want_d || sd != want_s)) {
        fprintf(stderr, "EMU: cudaMemcpy kind %d, but the destination is %s memory and the source %s memory\n",
                (int)k, dd ? "device" : "host", sd ? "device" : "host");
        return cudaErrorInvalidValue;
    }
    device_scope in;
    memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemset(void *d, int v, size_t n)
{
    if (n && !in_arena(d)) {
        fprintf(stderr, "EMU: cudaMemset of host memory at %p\n", d);
        return cudaErrorInvalidValue;
    }
    device_scope in;
    memset(d, v, n);
    return cudaSuccess;
}
/* The emulated device has the arena's bytes; in use: what cudaMalloc was
 * asked for and not freed (a GPU adds its context's reserve). */
cudaError_t cudaMemGetInfo(size_t *avail, size_t *total)
{
    *total = ARENA_BYTES;
    *avail = ARENA_BYTES - asked_now;
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; } /* everything ran at the call */
static int cur_dev = 0;
cudaError_t cudaSetDevice(int d) { if (d < 0 || d >= n_devices()) return cudaErrorInvalidValue; cur_dev = d; return cudaSuccess; }
cudaError_t cudaGetDevice(int *d) { *d = cur_dev; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    if (d < 0 || d >= n_devices()) return cudaErrorInvalidValue;
    memset(p, 0, sizeof *p);
    strcpy(p->name, "EMULATED");
    memcpy(p->uuid.bytes, "0123456789abcdef", 16);
    p->uuid.bytes[15] = (char)('a' + d);
    p->major = 9;
    return cudaSuccess;
}

struct emu_blas { int tf32; };
const char *cublasGetStatusName(cublasStatus_t s) { return s ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_SUCCESS"; }
const char *cublasGetStatusString(cublasStatus_t s) { return s ? "invalid value" : "success"; }
cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = new emu_blas{0}; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) { h->tf32 = m == CUBLAS_TF32_TENSOR_OP_MATH; return CUBLAS_STATUS_SUCCESS; }

static float tf32(float f)
{
    uint32_t u; memcpy(&u, &f, 4);
    u += 0xfffu + ((u >> 13) & 1); u &= ~0x1fffu;
    memcpy(&f, &u, 4); return f;
}

/* Element i of an operand of type t. */
static float elem(cudaDataType_t t, const void *p, size_t i)
{
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return t == CUDA_R_16BF ? __bfloat162float(__ushort_as_bfloat16(h)) : __half2float(__ushort_as_half(h));
}
static size_t elem_size(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

/* cuBLAS reads and writes device memory only. */
static bool on_device(const char *call, const void *A, const void *B, const void *C)
{
    if (in_arena(A) && in_arena(B) && in_arena(C)) return true;
    fprintf(stderr, "EMU %s: an operand is not device memory (A %s, B %s, C %s)\n", call,
            in_arena(A) ? "device" : "host", in_arena(B) ? "device" : "host", in_arena(C) ? "device" : "host");
    return false;
}

/* C (fp32) = alpha op(A) op(B) + beta C, column-major, A and B of type t
 * (TF32-cut when tf); checks the leading dimensions as cuBLAS does. */
static cublasStatus_t gemm(int tf, cudaDataType_t t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           float alpha, const void *A, int lda, const void *B, int ldb, float beta, float *C, int ldc)
{
    int arows = ta == CUBLAS_OP_N ? m : k, brows = tb == CUBLAS_OP_N ? k : n;
    if (lda < arows || ldb < brows || ldc < m || m < 0 || n < 0 || k < 0) { fprintf(stderr, "EMU gemm: bad ld\n"); return CUBLAS_STATUS_INVALID_VALUE; }
    if (!on_device("gemm", A, B, C)) return CUBLAS_STATUS_INVALID_VALUE;
    device_scope in;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                float a = elem(t, A, ta == CUBLAS_OP_N ? i + (size_t)p * lda : p + (size_t)i * lda);
                float b = elem(t, B, tb == CUBLAS_OP_N ? p + (size_t)j * ldb : j + (size_t)p * ldb);
                if (tf) a = tf32(a), b = tf32(b);
                s += (double)a * b;
            }
            float *c = C + i + (size_t)j * ldc;
            *c = beta == 0 ? (float)(alpha * s) : (float)(alpha * s + beta * *c);
        }
    return CUBLAS_STATUS_SUCCESS;
}
static cublasStatus_t batched(int tf, cudaDataType_t t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                              int k, float alpha, const void *A, int lda, long long sA, const void *B, int ldb,
                              long long sB, float beta, float *C, int ldc, long long sC, int count)
{
    size_t es = elem_size(t);
    for (int i = 0; i < count; i++) {
        cublasStatus_t s = gemm(tf, t, ta, tb, m, n, k, alpha, (const char *)A + i * sA * es, lda,
                                (const char *)B + i * sB * es, ldb, beta, C + i * sC, ldc);
        if (s) return s;
    }
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc)
{ return gemm(h->tf32, CUDA_R_32F, ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc); }
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, long long sA, const float *B, int ldb, long long sB,
                           const float *beta, float *C, int ldc, long long sC, int count)
{ return batched(h->tf32, CUDA_R_32F, ta, tb, m, n, k, *alpha, A, lda, sA, B, ldb, sB, *beta, C, ldc, sC, count); }

/* The mixed-precision products: 16-bit A and B of one type, fp32 C, fp32
 * compute (the only combination the backend uses). */
static bool ex_types(cudaDataType_t at, cudaDataType_t bt, cudaDataType_t ct, cublasComputeType_t c)
{
    if (at == bt && (at == CUDA_R_16BF || at == CUDA_R_16F) && ct == CUDA_R_32F && c == CUBLAS_COMPUTE_32F) return true;
    fprintf(stderr, "EMU GemmEx: types A %d B %d C %d compute %d not emulated\n", (int)at, (int)bt, (int)ct, (int)c);
    return false;
}
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t at, int lda, const void *B,
                            cudaDataType_t bt, int ldb, const void *beta, void *C, cudaDataType_t ct, int ldc,
                            cublasComputeType_t c, cublasGemmAlgo_t)
{
    if (!ex_types(at, bt, ct, c)) return CUBLAS_STATUS_INVALID_VALUE;
    return gemm(0, at, ta, tb, m, n, k, *(const float *)alpha, A, lda, B, ldb, *(const float *)beta, (float *)C, ldc);
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void *alpha, const void *A, cudaDataType_t at, int lda,
                                          long long sA, const void *B, cudaDataType_t bt, int ldb, long long sB,
                                          const void *beta, void *C, cudaDataType_t ct, int ldc, long long sC,
                                          int count, cublasComputeType_t c, cublasGemmAlgo_t)
{
    if (!ex_types(at, bt, ct, c)) return CUBLAS_STATUS_INVALID_VALUE;
    return batched(0, at, ta, tb, m, n, k, *(const float *)alpha, A, lda, sA, B, ldb, sB, *(const float *)beta,
                   (float *)C, ldc, sC, count);
}

}
