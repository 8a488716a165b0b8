#!/bin/sh
# Every SIMD path this processor runs (src/base/cpu.h: TRIAD_ISA=generic|avx2|
# avx512|avx512bf16) gives the same numbers: a few runs (fp32, bf16, fp16
# with an overflow on tp 2 x dp 2, the 3-D grid) compared across the paths
# bitwise, every step's loss and gradient norm and the final parameters, each
# run on its path's kernel (a bf16 run's products on its bf16 kernel:
# VDPBF16PS on avx512bf16, emulated on the others); then the whole
# regression suite under each lower path against the same stored
# references (the best path runs it as regression/run; where that is
# avx512bf16, avx512 runs the bf16 cases only, the others being the same),
# but for its restarts: a restart case trains, then resumes and reshards
# a checkpoint (src/io, src/parallel: no SIMD path of their own; the
# checkpoint's checksums are test_ckpt_raw's on every path), its numbers
# held to its twin's (serial, tp2, llama_serial), which the lower paths
# run; the best path runs every restart.
. "$(dirname "$0")/lib.sh"
cases="$top_srcdir/regression/cases"

paths=""
for p in generic avx2 avx512 avx512bf16; do
    if TRIAD_ISA=$p $MPIEXEC -n 1 "$TRIAD" --version > "$scratch/version.$p" 2>&1; then
        paths="$paths $p"
    else
        skip "path $p: $(grep -m1 error "$scratch/version.$p")"
    fi
done
best=${paths##* }
first=${paths# }
first=${first%% *}

for c in serial bf16 fp16_overflow_tp2_dp2 grid3d; do
    ranks=$(sed -n 's/^! ranks: *//p' "$cases/$c.nml")
    for p in $paths; do
        (cd "$cases" && TRIAD_ISA=$p triad_run "${ranks:-1}" "$c.nml" io.run_dir="'$scratch/$c.$p'")
        st=$?
        case $c in # (avx512bf16 multiplies fp32 and fp16 runs on avx512's sgemm)
            bf16) kernel="triad $p bf16 gemm" ;;
            *) kernel="triad ${p%bf16} sgemm" ;;
        esac
        grep -q "matmul: $kernel" "$scratch/last.out" || st=1
        ok $st "$c on path $p: ran $ranks rank(s) on triad's $p kernels ($kernel)"
        [ $st -eq 0 ] || tail -5 "$scratch/last.out" | diag
    done
    for p in $paths; do
        [ "$p" = "$first" ] && continue
        a="$scratch/$c.$p" b="$scratch/$c.$first"
        out=$(compare_runs "$a" "$b" 0 loss grad_norm 2>&1 &&
              "$PYTHON3" "$top_srcdir/regression/compare_ckpt.py" "$(ls "$a"/ckpt_*.h5 | tail -1)" \
                  "$(ls "$b"/ckpt_*.h5 | tail -1)" 0 2>&1)
        st=$?
        ok $st "$c: path $p bitwise equal to path $first (every step's loss and grad norm, final parameters)"
        [ $st -eq 0 ] || echo "$out" | diag
    done
done

# avx512bf16 runs every kernel of avx512 but a bf16 run's products
# (kernels_isa.c, gemm.c): where it is the best path, avx512 runs only the
# bf16 cases of the suite, the rest being the best path's run already.
bf16_cases=$(grep -il "^[^!]*precision *= *[\"']bf16[\"']" "$cases"/*.nml | sed 's,.*/,,; s,\.nml$,,' | grep -v restart |
             tr '\n' ' ')
kept_cases=$(ls "$cases"/*.nml | sed 's,.*/,,; s,\.nml$,,' | grep -v restart | tr '\n' ' ')
for p in $paths; do
    [ "$p" = "$best" ] && continue
    which="the regression suite but its restarts ($(echo $kept_cases | wc -w) cases)"
    set -- $kept_cases
    if [ "$p" = avx512 ] && [ "$best" = avx512bf16 ]; then
        which="the suite's bf16 cases ($(echo $bf16_cases | wc -w))"
        set -- $bf16_cases
    fi
    TRIAD_ISA=$p "$PYTHON3" "$top_srcdir/regression/run" "$@" > "$scratch/suite.$p" 2>&1
    st=$?
    summary=$(tail -1 "$scratch/suite.$p" | sed 's/^# //')
    ok $st "path $p: $which against the stored references: $summary"
    grep '^not ok' "$scratch/suite.$p" | head -20 | diag
done
done_testing
