#!/bin/sh
# bench.sh -- training throughput of triad against PyTorch (the peer), side by
# side in one run: one rank, 2 threads, the small config, its llama twin
# (llama_small: the same L, C, NH, T, B, V) and GPT-2 124M, on
# every SIMD path this processor runs (src/base/cpu.h; PATHS="avx2" for one, the
# generic C path only when named: on x86-64 it is a test path, not a fast one;
# CONFIGS="small" for some of the configs; CONFIGS="gpt2_124m_b16", not run by
# default, is GPT-2 124M at four times the tokens a step: B=16).
# Prints tokens/s, ms/step, the step's GFLOP/s, MFU against the nominal peak,
# the step's GFLOP/s against the sgemm rate triad measured on this machine
# (the achievable limit: nothing is assumed about the processor) in two
# ways: against the best start-up rate of the bench on that path, and
# against its own run's (the mean of the rate at start-up and again after
# the last step: the same clock and neighbours as its steps), and the
# ratio to PyTorch.  Needs python3-torch for the peer (skipped
# without).  Targets (docs/performance.md): >= 1.5x PyTorch on AVX-512,
# >= 1.3x on AVX2, and >= 65 % of the sgemm rate, on both configs; llama_small
# at >= 0.9x the GFLOP/s of small (tokens/s per FLOP), printed at the end.
set -u
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Each code under its own best wait policy (docs/performance.md, "Threads"):
# triad under OpenMP's default, which was 2-4 % faster than PASSIVE (one pool
# of threads), the PyTorch peer under PASSIVE, which it sets for itself
# (two pools, which spin against each other otherwise).
export OMP_NUM_THREADS=$THREADS
unset OMP_WAIT_POLICY

calc() { awk "BEGIN { print $1 }"; }

if [ -z "${PATHS:-}" ]; then
    PATHS=""
    for p in avx2 avx512; do
        TRIAD_ISA=$p ./triad --version > /dev/null 2>&1 && PATHS="$PATHS $p"
    done
    [ -n "$PATHS" ] || PATHS=generic
fi

# median tokens/s and MFU of the steps after the first two (warm-up)
summary() {
    $PY - "$1" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1] + "/metrics.h5") as f:
    tps = f["metrics/tokens_per_s"][2:]; mfu = f["metrics/mfu"][2:]; t = f["metrics/step_time"][2:]
print(f"{np.median(tps):.0f} {np.median(mfu):.4f} {1e3*np.median(t):.1f}")
PY
}

# ROUNDS rounds (default 2), the codes taking turns in each; each code's
# best round is shown (the machine's neighbours move single runs by up to
# 30 %), with every round's tokens/s beside it.  The rows are printed at the
# end: 'of sgemm' is against the best sgemm rate triad measured at start-up
# on that path over the whole run (a single start-up probe moved by 25 %
# with the neighbours' load here, and a slow probe flattered its own row).
ROUNDS=${ROUNDS:-2}
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
r=1
while [ $r -le "$ROUNDS" ]; do
    for cfg in ${CONFIGS:-small llama_small gpt2_124m}; do
        deck=bench/$cfg.nml
        case $cfg in
            small) targs="--layers 4 --d-model 256 --heads 4 --seq-len 256 --batch 8 --vocab 4096" ;;
            llama_small) targs="--arch llama --kv-heads 2 --layers 4 --d-model 256 --heads 4 --seq-len 256 --batch 8 --vocab 4096" ;;
            gpt2_124m) targs="--layers 12 --d-model 768 --heads 12 --seq-len 64 --batch 4 --vocab 50257" ;;
            gpt2_124m_b16) targs="--layers 12 --d-model 768 --heads 12 --seq-len 64 --batch 16 --vocab 50257" ;;
            *) echo "bench.sh: no config $cfg (small, llama_small, gpt2_124m, gpt2_124m_b16)" >&2; exit 1 ;;
        esac
        fpt=""
        for p in $PATHS; do
            out=$(TRIAD_ISA=$p mpirun -n 1 --bind-to none ./triad "$deck" train.threads="$THREADS" 2>&1) ||
                { echo "$out"; exit 1; }
            sgemm=$(echo "$out" | sed -n 's/.*measured sgemm \([0-9.]*\) GFLOP\/s.*/\1/p')
            sgemm_end=$(echo "$out" | sed -n 's/^sgemm at the end of the run (rank 0): \([0-9.]*\) GFLOP\/s.*/\1/p')
            nominal=$(echo "$out" | sed -n 's/.*peak (rank 0): nominal \([0-9.]*\) GFLOP\/s.*/\1/p')
            fpt=$(echo "$out" | sed -n 's/.*parameters, \([0-9.]*\) FLOP\/token.*/\1/p')
            run=$(sed -n "s/.*run_dir *= *'\([^']*\)'.*/\1/p" "$deck")
            set -- $(summary "$run")
            own=-
            [ -n "$sgemm" ] && [ -n "$sgemm_end" ] && own=$(calc "($sgemm + $sgemm_end) / 2")
            echo "$cfg $p $1 $3 $(calc "$1 * $fpt / 1000") $(calc "100 * $2") $sgemm $own" >> "$rows"
            echo "#   round $r, triad $p on $cfg: sgemm $sgemm GFLOP/s measured at start-up, $sgemm_end after the last step, nominal peak $nominal GFLOP/s" >&2
        done
        if $PY -c "import torch" 2>/dev/null; then
            pout=$($PY bench/pytorch_peer.py $targs --threads "$THREADS" --steps 8 2>&1)
            ptps=$(echo "$pout" | sed -n 's/.*tokens\/s=\([0-9.]*\).*/\1/p')
            pms=$(echo "$pout" | sed -n 's/.*ms\/step=\([0-9.]*\).*/\1/p')
            [ -n "$ptps" ] && echo "$cfg pytorch $ptps $pms $(calc "$ptps * $fpt / 1000") - - -" >> "$rows"
        elif [ $r -eq 1 ]; then
            echo "$cfg: PyTorch peer skipped (apt-get install python3-torch)"
        fi
    done
    r=$((r + 1))
done
# each code's best round; of sgemm against the path's best probe, and against
# that round's own run's; the ratio of best rounds
awk -v order="${CONFIGS:-small llama_small gpt2_124m}" -v paths="$PATHS" '
{ key = $1 " " $2
  if (!(key in tps) || $3 > tps[key]) { tps[key] = $3; ms[key] = $4; gf[key] = $5; mfu[key] = $6; own[key] = $8 }
  runs[key] = runs[key] (runs[key] == "" ? "" : " ") sprintf("%.0f", $3)
  if ($7 != "-" && $7 > sgemm[$2]) sgemm[$2] = $7 }
END {
  printf "%-13s %-14s %10s %9s %9s %7s %9s %9s %11s   %s\n", "config", "code", "tokens/s", "ms/step", "GFLOP/s",
         "MFU", "of sgemm", "of own", "vs PyTorch", "(each round'"'"'s tokens/s)"
  nc = split(order, cfgs, " "); np = split(paths, ps, " ")
  for (c = 1; c <= nc; c++) {
    pk = cfgs[c] " pytorch"
    for (i = 1; i <= np; i++) {
      k = cfgs[c] " " ps[i]
      if (!(k in tps)) continue
      ratio = (pk in tps) ? sprintf("%.2fx", tps[k] / tps[pk]) : "n/a"
      of = sgemm[ps[i]] > 0 ? sprintf("%.1f%%", 100 * gf[k] / sgemm[ps[i]]) : "n/a"
      ofown = own[k] != "-" && own[k] > 0 ? sprintf("%.1f%%", 100 * gf[k] / own[k]) : "n/a"
      printf "%-13s %-14s %10.0f %9.1f %9.1f %6.1f%% %9s %9s %11s   %s\n", cfgs[c], "triad " ps[i], tps[k], ms[k],
             gf[k], mfu[k], of, ofown, ratio, runs[k]
    }
    if (pk in tps)
      printf "%-13s %-14s %10.0f %9.1f %9.1f %7s %9s %9s %11s   %s\n", cfgs[c], "pytorch", tps[pk], ms[pk], gf[pk], "",
             "", "", "1.00x", runs[pk]
  }
  for (i = 1; i <= np; i++) {
    printf "# triad %s: the best sgemm rate measured at start-up in this run, %.1f GFLOP/s\n", ps[i], sgemm[ps[i]]
    s = "small " ps[i]; l = "llama_small " ps[i]
    if ((s in gf) && (l in gf))
      printf "llama_small / small, tokens/s per FLOP, triad %s: %.2fx\n", ps[i], gf[l] / gf[s]
  }
}' "$rows"
echo "# FLOP/token: 6N + 12LCT (nanoGPT's estimate); MFU against the nominal peak of the path (triad's log)," \
     "'of sgemm' against the best sgemm rate triad measured on this machine at start-up on that path in this run;" \
     "'of own' against the mean of that round's run's sgemm rate at start-up and after its last step;" \
     "each code's best of $ROUNDS rounds"
