#!/bin/sh
# The portable path on another processor: the matmul, precision and CPU
# sources cross-compiled for aarch64 (no x86 code may leak into them) and
# run under qemu-user: test_gemm (the generic kernels, fp32 and bf16,
# bitwise against the arithmetics of src/kernels/gemm_kernels.h, the same
# as every x86 path), test_bf16_dot (the bf16 arithmetic's flushing in
# portable C against its model) and test_precision.  The kernels compile
# too.  Skipped where the cross
# compiler or qemu-aarch64 is missing (Debian: gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross, qemu-user).
. "$(dirname "$0")/lib.sh"
CROSS=${CROSS_CC:-aarch64-linux-gnu-gcc}
if ! command -v "$CROSS" > /dev/null || ! command -v qemu-aarch64 > /dev/null; then
    skip "no $CROSS or qemu-aarch64 (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)"
    done_testing
fi
src="$top_srcdir/src" h="$top_srcdir/regression/cross_blas"
inc=$(for d in "$src"/*/; do printf -- '-I%s ' "${d%/}"; done) # (src/'s layer folders)
NUMERIC=$(sed -n 's/^NUMERIC_FLAGS="\(.*\)"$/\1/p' "$top_srcdir/configure.ac")
printf '#define HAVE_CBLAS_H 1\n#define BLAS_NAME "a naive stand-in"\n' > "$scratch/build_config.h"
CC="$CROSS $NUMERIC -O2 -fopenmp -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wno-unused-parameter -Werror
    -I$scratch -I$h $inc -I$top_srcdir/regression/unit"
run() { OMP_NUM_THREADS=2 qemu-aarch64 -L /usr/aarch64-linux-gnu "$@"; }

$CC -c "$src/kernels/kernels_cpu.c" -o "$scratch/k.o" > "$scratch/cc.out" 2>&1 &&
    $CC -c "$src/kernels/kernels_isa.c" -o "$scratch/ki.o" >> "$scratch/cc.out" 2>&1
st=$?
ok $st "the kernels (kernels_cpu.c, kernels_isa.c) compile for aarch64, warnings as errors"
[ $st -eq 0 ] || diag < "$scratch/cc.out"

$CC "$top_srcdir/regression/unit/test_gemm.c" "$src/kernels/gemm.c" "$src/kernels/gemm_generic.c" "$src/kernels/gemm_avx2.c" \
    "$src/kernels/gemm_avx512.c" "$src/kernels/gemm_avx512bf16.c" "$src/base/cpu.c" "$src/base/precision.c" \
    "$src/base/team.c" "$h/cblas_stub.c" -lm -o "$scratch/test_gemm" > "$scratch/cc.out" 2>&1
st=$?
ok $st "test_gemm and the matmul path build for aarch64"
if [ $st -eq 0 ]; then
    run "$scratch/test_gemm" > "$scratch/gemm.out" 2>&1
    st=$?
    grep -q '^ok [0-9]* - path generic: bitwise equal' "$scratch/gemm.out" &&
        grep -q '^ok [0-9]* - path generic: gemm_bf16 bitwise equal' "$scratch/gemm.out" &&
        grep -q '# path: triad generic sgemm' "$scratch/gemm.out" || st=1
    ok $st "aarch64: test_gemm passes on the generic path, bitwise against gemm_kernels.h's arithmetics (fp32, bf16)"
    grep '^not ok' "$scratch/gemm.out" | diag
else
    diag < "$scratch/cc.out"
fi

$CC "$top_srcdir/regression/unit/test_bf16_dot.c" "$src/base/cpu.c" -lm -o "$scratch/test_bf16_dot" \
    > "$scratch/cc.out" 2>&1 && run "$scratch/test_bf16_dot" > "$scratch/dot.out" 2>&1
st=$?
grep -q '^ok [0-9]* - gemm_fma_ftz equals the model' "$scratch/dot.out" || st=1
ok $st "aarch64: test_bf16_dot passes (bf16 rounding and flushing in portable C, against the model)"
[ $st -eq 0 ] || { diag < "$scratch/cc.out"; grep '^not ok' "$scratch/dot.out" | diag; }

$CC "$top_srcdir/regression/unit/test_precision.c" "$src/base/precision.c" "$src/base/team.c" "$src/base/rng.c" "$src/base/cpu.c" -lm \
    -o "$scratch/test_precision" > "$scratch/cc.out" 2>&1 && run "$scratch/test_precision" > "$scratch/prec.out" 2>&1
st=$?
ok $st "aarch64: test_precision passes (bf16 and fp16 conversions in C)"
[ $st -eq 0 ] || { diag < "$scratch/cc.out"; grep '^not ok' "$scratch/prec.out" | diag; }
done_testing
