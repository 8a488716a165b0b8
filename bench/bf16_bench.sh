#!/bin/sh
# bf16_bench.sh -- a bf16 run's training throughput against fp32's, side by
# side in one run: one rank, 2 threads, the small config and GPT-2 124M
# (bench/small.nml, bench/gpt2_124m.nml), on every SIMD path this processor
# runs (src/base/cpu.h; PATHS="avx2 avx512bf16" to choose, the generic C
# path only when named).  On avx512bf16 a bf16 run's linear layers multiply
# on VDPBF16PS; on avx512 and avx2 the same arithmetic is emulated in fp32
# FMAs (src/kernels/gemm_kernels.h), as a processor without AVX512-BF16
# runs it.  The two precisions alternate, ROUNDS times each (default 3),
# and each keeps its best median tokens/s (steps after the first two): the
# machine may be shared, and the best of alternating runs is the figure the
# neighbours disturbed least.  Prints tokens/s of both, the ratio, and the
# rates of the matmul kernels each run measured at start-up.  Target
# (docs/performance.md): bf16 >= 1.5x fp32 on avx512bf16.
set -u
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE

calc() { awk "BEGIN { print $1 }"; }
max() { awk "BEGIN { a = $1; b = $2; print (a > b ? a : b) }"; }

if [ -z "${PATHS:-}" ]; then
    PATHS=""
    for p in avx2 avx512 avx512bf16; do
        TRIAD_ISA=$p ./triad --version > /dev/null 2>&1 && PATHS="$PATHS $p"
    done
    [ -n "$PATHS" ] || PATHS=generic
fi

# median tokens/s of the steps after the first two (warm-up)
median_tps() {
    $PY - "$1" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1] + "/metrics.h5") as f:
    print(f"{np.median(f['metrics/tokens_per_s'][2:]):.1f}")
PY
}

# one run: prints "tokens/s rate-GFLOP/s kernel"
one_run() { # path deck precision
    out=$(TRIAD_ISA=$1 mpirun -n 1 --bind-to none ./triad "$2" train.threads="$THREADS" train.precision="'$3'" 2>&1) ||
        { echo "$out" >&2; exit 1; }
    rate=$(echo "$out" | sed -n 's/.*measured \(sgemm\|bf16 gemm\) \([0-9.]*\) GFLOP\/s.*/\2/p')
    kernel=$(echo "$out" | sed -n 's/.*matmul: triad \([a-z0-9]*\) \(sgemm\|bf16 gemm\).*/\1 \2/p')
    run=$(sed -n "s/.*run_dir *= *'\([^']*\)'.*/\1/p" "$2")
    echo "$(median_tps "$run") $rate $kernel"
}

printf '%-10s %-11s %12s %12s %7s %12s %12s\n' config path "fp32 tok/s" "bf16 tok/s" "ratio" "sgemm GF/s" "bf16 GF/s"
for cfg in small gpt2_124m; do
    deck=bench/$cfg.nml
    for p in $PATHS; do
        best32=0 best16=0 rate32=0 rate16=0 kernel=""
        r=0
        while [ $r -lt "$ROUNDS" ]; do
            set -- $(one_run "$p" "$deck" fp32) || exit 1
            best32=$(max "$best32" "$1") rate32=$(max "$rate32" "$2")
            set -- $(one_run "$p" "$deck" bf16) || exit 1
            best16=$(max "$best16" "$1") rate16=$(max "$rate16" "$2") kernel="$3 $4 $5"
            r=$((r + 1))
        done
        printf '%-10s %-11s %12.0f %12.0f %6.2fx %12.1f %12.1f\n' "$cfg" "$p" "$best32" "$best16" \
            "$(calc "$best16 / $best32")" "$rate32" "$rate16"
        echo "#   $cfg on $p: bf16 products on triad $kernel" >&2
    done
done
echo "# best of $ROUNDS alternating runs per precision, $THREADS threads, one rank; the GF/s columns: the" \
     "start-up measurement of each kernel (1024^3), the best of the runs"
