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
#include "ops.h"

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

/* One path's operations (ops.def), as pointers. */
#define OP(ret, name, params, args) __typeof__(name##_generic) *name;
#define OP_P OP
struct kernel_set {
#include "ops.def"
};
#undef OP

#if defined(TRIAD_KERNELS_X86)
#define AVX2(n) n##_avx2
#define AVX512(n) n##_avx512
#else
#define AVX2(n) n##_generic /* (never chosen: cpu.h supports only generic here) */
#define AVX512(n) n##_generic
#endif

static const struct kernel_set sets[ISA_COUNT] = {
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
#undef OP
};

static inline const struct kernel_set *ks(void) { return &sets[isa_active()]; }

/* The plain names of backend.h (float): the copy of the path in use. */
#define OP(ret, name, params, args) \
    ret name params { DEVICE_FORWARD(ret, ks()->name args); }
#include "ops.def"
#undef OP

/* The CPU table's operations (device.h): the same, the precision first.  The
 * CPU multiplies in fp32 in every precision: the operands hold the format's
 * values, so the products are exact and only the sums' rounding differs from
 * 16-bit units with fp32 accumulation. */
#define OP(ret, name, params, args) \
    ret cpu_##name DEVICE_PARAMS params { (void)p; DEVICE_FORWARD(ret, ks()->name args); }
#include "ops.def"
#undef OP
#undef OP_P
