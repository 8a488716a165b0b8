/* kernels_isa.c -- the CPU kernels of backend.h for the SIMD path in use.
 *
 * kernels_cpu.c is compiled once per path (names suffixed _generic, _avx2,
 * _avx512; the last two with -mavx2/-mavx512* on x86-64), so the compiler
 * vectorises its loops at each width.  Its sums are written so that the
 * width never changes them, and the build has -ffp-contract=off: the three
 * copies compute bitwise the same numbers, only faster.  The plain names
 * below forward to the copy of isa_active() (cpu.h; avx512bf16 takes
 * avx512's copy, its gemm_bf16 the instruction). */
#include "backend.h"
#include "build_config.h"
#include "cpu.h"
#include "ops.h"

#define KERNELS_BF16
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
#undef KERNELS_BF16

/* One path's operations (ops.def), as pointers; an OP_P also in gemm_bf16's
 * arithmetic (name_bf16). */
#define OP(ret, name, params, args) __typeof__(name##_generic) *name;
#define OP_P(ret, name, params, args) OP(ret, name, params, args) __typeof__(name##_bf16_generic) *name##_bf16;
struct kernel_set {
#include "ops.def"
};
#undef OP
#undef OP_P

#if defined(TRIAD_KERNELS_X86)
#define AVX2(n) n##_avx2
#define AVX512(n) n##_avx512
#else
#define AVX2(n) n##_generic /* (never chosen: cpu.h supports only generic here) */
#define AVX512(n) n##_generic
#endif

static const struct kernel_set sets[ISA_COUNT] = {
#define OP_P(ret, name, params, args) OP(ret, name, params, args) OP(ret, name##_bf16, params, args)
#define OP(ret, name, params, args) .name = name##_generic,
    [ISA_GENERIC] = {
#include "ops.def"
    },
#undef OP
#define OP(ret, name, params, args) .name = AVX2(name),
    [ISA_AVX2] = {
#include "ops.def"
    },
#undef OP
#define OP(ret, name, params, args) .name = AVX512(name),
    [ISA_AVX512] = {
#include "ops.def"
    },
    [ISA_AVX512BF16] = {
#include "ops.def"
    },
#undef OP
#undef OP_P
};

static inline const struct kernel_set *ks(void) { return &sets[isa_active()]; }

/* The plain names of backend.h (float): the copy of the path in use. */
#define OP(ret, name, params, args) \
    ret name params { DEVICE_FORWARD(ret, ks()->name args); }
#define OP_P OP
#include "ops.def"
#undef OP
#undef OP_P

/* The CPU table's operations (device.h): the same, the precision first.  A
 * bf16 run's products (OP_P: their operands hold bf16 values) are in
 * gemm_bf16's arithmetic, on VDPBF16PS where the processor has it; the
 * other precisions' in fp32: fp16 operands hold fp16 values, so their
 * products are exact and only the sums' rounding differs from 16-bit units
 * with fp32 accumulation. */
#define OP(ret, name, params, args) \
    ret cpu_##name DEVICE_PARAMS params { (void)p; DEVICE_FORWARD(ret, ks()->name args); }
#define OP_P(ret, name, params, args) \
    ret cpu_##name DEVICE_PARAMS params { DEVICE_FORWARD(ret, (p == PREC_BF16 ? ks()->name##_bf16 : ks()->name) args); }
#include "ops.def"
#undef OP
#undef OP_P
