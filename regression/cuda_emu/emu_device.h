/* emu_device.h -- the CUDA emulator's device side: the .cu files of cuda/ compiled as
 * C++ for the CPU (the test harness of regression/cuda_emu, never part of
 * the program).
 *
 * What it is: the backend's own kernels and table code run on the host,
 * so a machine without a GPU still executes every line of cuda/ --
 * indexing, launch geometry, reductions, the table's wiring of the model,
 * the staging of MPI through host buffers.  GPU threads of a block are
 * fibers (runtime.cpp) switched at __syncthreads and warp shuffles; blocks
 * run one after another.  Device memory (cudaMalloc) lies in one arena that is
 * inaccessible (PROT_NONE) except while a kernel, a copy or a cuBLAS call
 * runs, so host code that touches a device pointer -- or hands one to MPI
 * -- stops with a message naming the address; new allocations are filled
 * with 0xff bytes (NaN), as cudaMalloc does not zero.
 *
 * What it is not: a GPU.  Races between threads, the memory model, cuBLAS's
 * rounding and speed are not emulated; the products are reference loops
 * (runtime.cpp).  Only the API the backend calls exists. */
#pragma once
#include <tuple>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <math.h>
#include <cstdint>
#include <cstring>

#define __global__
#define __device__
#define __host__
#define __shared__ static

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 { unsigned x, y, z; };
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

/* GPU threads of one block are fibers on this one OS thread, switched at
 * barriers; blocks run one after another. */
struct emu_bar { int expected, arrived, gen; };
void emu_yield(void);
inline void emu_arrive_and_wait(emu_bar *b)
{
    int g = b->gen;
    if (++b->arrived == b->expected) { b->arrived = 0; b->gen++; return; }
    while (b->gen == g) emu_yield();
}
inline void emu_arrive_and_drop(emu_bar *b)
{
    b->expected--;
    if (b->arrived > 0 && b->arrived == b->expected) { b->arrived = 0; b->gen++; }
}
struct emu_warp { emu_bar bar; alignas(8) unsigned char slot[32][8]; };
extern emu_bar emu_block_bar;
extern emu_warp *emu_my_warp;
extern int emu_lane;

inline void __syncthreads() { emu_arrive_and_wait(&emu_block_bar); }

template <class T> T __shfl_xor_sync(unsigned, T v, int o)
{
    static_assert(sizeof(T) <= 8, "shuffle of a large type");
    emu_warp *w = emu_my_warp;
    int lane = emu_lane;
    memcpy(w->slot[lane], &v, sizeof v);
    emu_arrive_and_wait(&w->bar);
    T r;
    memcpy(&r, w->slot[lane ^ o], sizeof r);
    emu_arrive_and_wait(&w->bar);
    return r;
}

inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    unsigned long long old = *p;
    *p += v;
    return old;
}

/* Device memory is accessible between enter and leave (nested). */
extern "C" void emu_device_enter(void);
extern "C" void emu_device_leave(void);
/* Run body(t) for t in [0, nt) as fibers until all finish. */
void emu_run_block(unsigned nt, void (*body)(void *, unsigned), void *arg);

template <class K, class... A> struct emu_call {
    K kernel;
    std::tuple<A...> args;
};
template <class K, class... A> void emu_thread_body(void *p, unsigned)
{
    auto *c = (emu_call<K, A...> *)p;
    std::apply(c->kernel, c->args);
}

template <class K, class... A> void emu_launch(K kernel, dim3 g, dim3 b, A... args)
{
    unsigned nt = b.x * b.y * b.z;
    if (g.x == 0 || nt == 0 || nt > 1024 || g.y > 65535 || nt % 32) {
        fprintf(stderr, "EMU: bad launch configuration\n");
        abort();
    }
    gridDim = g;
    blockDim = b;
    emu_call<K, A...> c{kernel, std::tuple<A...>(args...)};
    emu_device_enter();
    for (unsigned bz = 0; bz < g.z; bz++)
        for (unsigned by = 0; by < g.y; by++)
            for (unsigned bx = 0; bx < g.x; bx++) {
                blockIdx = {bx, by, bz};
                emu_run_block(nt, emu_thread_body<K, A...>, &c);
            }
    emu_device_leave();
}

/* 16-bit formats: fp16 through GCC's _Float16 (IEEE RNE), bf16 by hand. */
struct __nv_bfloat16 { uint16_t x; };
struct __half { _Float16 h; };
inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return {0x7fff};
    u += 0x7fffu + ((u >> 16) & 1);
    return {(uint16_t)(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) { uint32_t u = (uint32_t)h.x << 16; float f; memcpy(&f, &u, 4); return f; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short s) { return {s}; }
inline __half __float2half_rn(float f) { return {(_Float16)f}; }
inline float __half2float(__half h) { return (float)h.h; }
inline unsigned short __half_as_ushort(__half h) { unsigned short s; memcpy(&s, &h.h, 2); return s; }
inline __half __ushort_as_half(unsigned short s) { __half h; memcpy(&h.h, &s, 2); return h; }
