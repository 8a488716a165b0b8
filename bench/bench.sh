#!/bin/sh
# bench.sh -- training throughput of triad against PyTorch (the peer), side by
# side in one run: one rank, 2 threads, the small config and GPT-2 124M.
# Prints tokens/s, achieved GFLOP/s, MFU against the measured sgemm peak, and
# the ratio to PyTorch.  Needs python3-torch for the peer (skipped without).
set -u
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
LIMIT=${LIMIT:-470}   # the processor's fp32 limit in GFLOP/s on 2 threads (ENVIRONMENT.md)
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE

calc() { awk "BEGIN { print $1 }"; }

# median tokens/s and MFU of the steps after the first two (warm-up)
summary() {
    $PY - "$1" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1] + "/metrics.h5") as f:
    tps = f["metrics/tokens_per_s"][2:]; mfu = f["metrics/mfu"][2:]; t = f["metrics/step_time"][2:]
print(f"{np.median(tps):.0f} {np.median(mfu):.4f} {1e3*np.median(t):.1f}")
PY
}

printf '%-10s %-8s %12s %10s %10s %9s %9s %14s\n' config code "tokens/s" "ms/step" "GFLOP/s" "MFU" "of limit" "vs PyTorch"
for cfg in small gpt2_124m; do
    deck=bench/$cfg.nml
    out=$(mpirun -n 1 --bind-to none ./triad "$deck" train.threads=$THREADS 2>&1) || { echo "$out"; exit 1; }
    peak=$(echo "$out" | sed -n 's/.*peak \([0-9.]*\) GFLOP\/s per rank.*/\1/p')
    fpt=$(echo "$out" | sed -n 's/.*parameters, \([0-9.]*\) FLOP\/token.*/\1/p')
    run=$(sed -n "s/.*run_dir *= *'\([^']*\)'.*/\1/p" "$deck")
    set -- $(summary "$run")
    tps=$1 mfu=$2 ms=$3
    gflops=$(calc "$tps * $fpt / 1000")
    case $cfg in
        small) targs="--layers 4 --d-model 256 --heads 4 --seq-len 256 --batch 8 --vocab 4096" ;;
        gpt2_124m) targs="--layers 12 --d-model 768 --heads 12 --seq-len 64 --batch 4 --vocab 50257" ;;
    esac
    ptps=""
    if $PY -c "import torch" 2>/dev/null; then
        pout=$($PY bench/pytorch_gpt2.py $targs --threads $THREADS --steps 8 2>&1)
        ptps=$(echo "$pout" | sed -n 's/.*tokens\/s=\([0-9.]*\).*/\1/p')
        pms=$(echo "$pout" | sed -n 's/.*ms\/step=\([0-9.]*\).*/\1/p')
    fi
    ratio=$( [ -n "$ptps" ] && calc "int(100 * $tps / $ptps) / 100" || echo "n/a")
    printf '%-10s %-8s %12.0f %10.1f %10.1f %8.1f%% %8.1f%% %13sx\n' "$cfg" triad "$tps" "$ms" "$gflops" \
        "$(calc "100 * $mfu")" "$(calc "100 * $gflops / $LIMIT")" "$ratio"
    if [ -n "$ptps" ]; then
        pgf=$(calc "$ptps * $fpt / 1000")
        printf '%-10s %-8s %12.0f %10.1f %10.1f %8.1f%% %8.1f%% %14s\n' "$cfg" pytorch "$ptps" "$pms" "$pgf" \
            "$(calc "100 * $pgf / $peak")" "$(calc "100 * $pgf / $LIMIT")" "1.00x"
    else
        echo "$cfg: PyTorch peer skipped (apt-get install python3-torch)"
    fi
    echo "# $cfg: MFU against the sgemm rate measured at start-up ($peak GFLOP/s on $THREADS threads); 'of limit' against $LIMIT GFLOP/s; FLOP/token $fpt x1e6 (6N + 12LCT)"
done
