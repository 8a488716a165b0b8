#!/bin/sh
# bf16_bench.sh -- a bf16 run's training throughput against fp32's, side by
# side in one run: one rank, 2 threads, the small config and GPT-2 124M
# (bench/small.nml, bench/gpt2_124m.nml), on every SIMD path this processor
# runs (src/base/cpu.h; PATHS="avx2 avx512bf16" to choose, the generic C
# path only when named).  On avx512bf16 a bf16 run's linear layers multiply
# on VDPBF16PS; on avx512 and avx2 the same arithmetic is emulated in fp32
# FMAs (src/kernels/gemm_kernels.h), as a processor without AVX512-BF16
# runs it (CONFIGS="small" for one config).  The two precisions alternate,
# ROUNDS times each (default 3), so that both meet the same neighbours on a
# shared machine; each
# precision's figures pool the steps of its runs (after the first two of a
# run): the median step, and the fastest (as bench/gemm_bench keeps its
# fastest call: other work only ever slows a step down).  Prints tokens/s
# of both, the ratios, and the rates of the matmul kernels each run
# measured at start-up.  Beside them the CPU seconds a step takes (user +
# system of the run less those of the same run stopped after 2 steps, per
# round, the median of the rounds; the ratio fp32's over bf16's, as the
# others bf16's speed): the work, which neighbours sharing the cores change
# far less than the wall time.  BF16_ARGS: deck overrides for the bf16 runs
# alone, space-separated, none with a space in it, before the bench's own
# (which win: a run's steps and directory stay the bench's);
# BF16_ARGS="train.pack_activations=.true." packs the stored layers in 16
# bits, with a pass to pack and one to unpack each (unset, as the bench's
# configs leave it, the memory plan keeps them in fp32 containers where a
# quarter of the memory stays free).  Target (docs/performance.md):
# bf16 >= 1.5x fp32 on avx512bf16.
set -u
set -f   # (no globbing: BF16_ARGS is split into words, and nothing here names files by pattern)
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=$THREADS   # (OpenMP's default wait policy, as bench.sh runs triad)
unset OMP_WAIT_POLICY

calc() { awk "BEGIN { print $1 }"; }
max() { awk "BEGIN { a = $1; b = $2; print (a > b ? a : b) }"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -z "${PATHS:-}" ]; then
    PATHS=""
    for p in avx2 avx512 avx512bf16; do
        TRIAD_ISA=$p ./triad --version > /dev/null 2>&1 && PATHS="$PATHS $p"
    done
    [ -n "$PATHS" ] || PATHS=generic
fi

# tokens/s of the steps after the first two (warm-up), one per line
step_tps() {
    $PY - "$1" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1] + "/metrics.h5") as f:
    print("\n".join(f"{x:.2f}" for x in f["metrics/tokens_per_s"][2:]))
PY
}

# the median and the largest of the numbers in file $1
stats() { sort -g "$1" | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[NR] }'; }

# the CPU seconds (user + system) of the last timed run
cpu_s() { awk '{ print $1 + $2 }' "$tmp/time"; }

# one run (in $tmp/run, replaced), its CPU time in $tmp/time: its steps'
# tokens/s appended to file $4; prints "rate-GFLOP/s kernel"
one_run() { # path deck precision file [train.steps=N]
    rm -rf "$tmp/run"
    extra=""
    [ "$3" = bf16 ] && extra=${BF16_ARGS:-}
    out=$(TRIAD_ISA=$1 /usr/bin/time -f '%U %S' -o "$tmp/time" mpirun -n 1 --bind-to none ./triad "$2" $extra \
          train.threads="$THREADS" train.precision="'$3'" io.run_dir="'$tmp/run'" ${5:-} 2>&1) ||
        { echo "$out" >&2; exit 1; }
    step_tps "$tmp/run" >> "$4"
    rate=$(echo "$out" | sed -n 's/.*measured \(sgemm\|bf16 gemm\) \([0-9.]*\) GFLOP\/s.*/\2/p')
    kernel=$(echo "$out" | sed -n 's/.*matmul: triad \([a-z0-9]*\) \(sgemm\|bf16 gemm\).*/\1 \2/p')
    echo "$rate $kernel"
}

# one round of a precision: a whole run, then the same run stopped after 2
# steps; the CPU seconds of a step after the first two appended to file
# $4.cpu; prints what one_run prints
one_round() { # path deck precision file
    before=$(wc -l < "$4")
    got=$(one_run "$@") || exit 1
    whole=$(cpu_s) steps=$(($(wc -l < "$4") - before))
    one_run "$1" "$2" "$3" "$tmp/short" train.steps=2 > /dev/null || exit 1
    calc "($whole - $(cpu_s)) / $steps" >> "$4.cpu"
    echo "$got"
}

printf '%-10s %-11s %11s %11s %6s %11s %11s %6s %9s %9s %6s %9s %9s\n' config path "fp32 tok/s" "bf16 tok/s" ratio \
    "fp32 best" "bf16 best" ratio "fp32 CPUs" "bf16 CPUs" ratio "sgemm GF" "bf16 GF"
for cfg in ${CONFIGS:-small gpt2_124m}; do
    deck=bench/$cfg.nml
    for p in $PATHS; do
        rate32=0 rate16=0 kernel=""
        for f in fp32 bf16 fp32.cpu bf16.cpu; do : > "$tmp/$f"; done
        r=0
        while [ $r -lt "$ROUNDS" ]; do
            got=$(one_round "$p" "$deck" fp32 "$tmp/fp32") || exit 1
            set -- $got
            rate32=$(max "$rate32" "$1")
            got=$(one_round "$p" "$deck" bf16 "$tmp/bf16") || exit 1
            set -- $got
            rate16=$(max "$rate16" "$1") kernel="$2 $3 $4"
            r=$((r + 1))
        done
        set -- $(stats "$tmp/fp32") $(stats "$tmp/bf16")
        tok="$1 $3 $(calc "$3 / $1") $2 $4 $(calc "$4 / $2")"
        set -- $(stats "$tmp/fp32.cpu") $(stats "$tmp/bf16.cpu")
        printf '%-10s %-11s %11.0f %11.0f %5.2fx %11.0f %11.0f %5.2fx %9.3f %9.3f %5.2fx %9.1f %9.1f\n' "$cfg" "$p" \
            $tok "$1" "$3" "$(calc "$1 / $3")" "$rate32" "$rate16"
        echo "#   $cfg on $p: bf16 products on triad $kernel" >&2
    done
done
echo "# tokens/s: the median and the fastest step of $ROUNDS alternating runs per precision (steps after the" \
     "first two of each), $THREADS threads, one rank; CPUs: CPU seconds a step (after the first two), the median of" \
     "the rounds, and fp32's over bf16's; GF: each kernel's start-up measurement (1024^3), best of the runs"
if [ -n "${BF16_ARGS:-}" ]; then echo "# the bf16 runs with $BF16_ARGS"; fi
