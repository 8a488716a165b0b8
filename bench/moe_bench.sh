#!/bin/sh
# moe_bench.sh -- a mixture of experts against the dense model of equal
# active FLOPs, side by side in one run (docs/moe.md).  The llama small
# config (bench/llama_small.nml: L=4 C=256 T=256 B=8), dense with a SwiGLU
# of 1024, against 8 experts of 512 with top 2: the same multiplies per
# token (2 x 3 x C x 512 = 3 x C x 1024) plus the router's 8 C.
#
# Printed per configuration: median tokens/s over the steps after the first
# two of REPS runs (3), dense and mixture alternating so that the machine's
# drift falls on both, the FLOPs per token the MFU counts (6 x the active
# parameters + the attention's), and their product (FLOP/s); then the MoE's
# FLOP/s over the dense one's (target, issue 30: >= 0.8 on the CPU).  Then both again on
# 2 ranks, dp 2, the mixture with ep 2, one thread a rank: the all-to-all
# seconds per step (metrics.h5's /comm, communicator ep) and their share of
# the step.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
PY=/usr/bin/python3
STEPS=${STEPS:-10}
REPS=${REPS:-3}
MPIRUN="mpirun --oversubscribe --bind-to none"
common="bench/llama_small.nml train.steps=$STEPS train.peak_gflops=100.0 io.overwrite=.true."
dense="model.ffn_hidden=1024"
moe="model.n_expert=8 model.n_expert_active=2 model.moe_ffn_hidden=512 train.moe_aux_loss=0.01"

# table TITLE DENSE_RUNS MOE_RUNS SUFFIX: each configuration's median tokens/s over its runs' steps after the
# first two, the FLOPs per token the MFU counts, their product, the all-to-all seconds per step (metrics.h5's
# /comm, communicator ep); then the mixture's FLOP/s over the dense one's
table() {
    $PY - "$@" <<'PY'
import sys, h5py, numpy as np
def figures(runs):
    tps, fpt, a2a, step = [], [], [], []
    for run in runs.split(","):
        with h5py.File(run + "/metrics.h5", "r") as f:
            t, mfu = f["metrics/tokens_per_s"][2:], f["metrics/mfu"][2:]
            steps = len(f["metrics/step"])
            rows, cols = f["comm"].attrs["rows"].decode().split(), f["comm"].attrs["columns"].decode().split()
            world = len(f["timers/forward"])
            tps += list(t)
            fpt += list(mfu * 100e9 * world / t)  # (train.peak_gflops = 100 a rank: MFU = FLOP/s / (1e11 x ranks))
            step += list(f["metrics/step_time"][2:])
            if "ep" in rows:
                a2a.append(f["comm/seconds"][rows.index("ep")][cols.index("all-to-all")] / steps)
    t, F = np.median(tps), np.median(fpt)
    return t, F, t * F, np.median(a2a) if a2a else 0.0, np.median(step)
print(sys.argv[1])
out = []
for name, runs in (("dense, SwiGLU 1024", sys.argv[2]), ("moe, 8 x 512, top 2" + sys.argv[4], sys.argv[3])):
    tps, fpt, rate, a2a, step = figures(runs)
    out.append(rate)
    extra = "   all-to-all %.1f ms/step (%.1f%% of the step)" % (1e3 * a2a, 100 * a2a / step) if a2a else ""
    print("  %-30s %8.0f tok/s %10.4g FLOP/token %8.2f GFLOP/s%s" % (name, tps, fpt, rate / 1e9, extra))
print("  moe / dense FLOP/s: %.3f (target >= 0.8)" % (out[1] / out[0]))
PY
}

echo "moe_bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
d1= m1= d2= m2=
for r in $(seq "$REPS"); do
    $MPIRUN -n 1 ./triad $common $dense train.threads=2 io.run_dir="'run/bench_moe_dense$r'" > /dev/null 2>&1 || echo "dense run failed"
    $MPIRUN -n 1 ./triad $common $moe train.threads=2 io.run_dir="'run/bench_moe$r'" > /dev/null 2>&1 || echo "moe run failed"
    $MPIRUN -n 2 ./triad $common $dense train.threads=1 io.run_dir="'run/bench_moe_dense_dp2_$r'" > /dev/null 2>&1 || echo "dense dp 2 failed"
    $MPIRUN -n 2 ./triad $common $moe train.threads=1 parallel.ep=2 io.run_dir="'run/bench_moe_ep2_$r'" > /dev/null 2>&1 || echo "moe ep 2 failed"
    d1=$d1${d1:+,}run/bench_moe_dense$r m1=$m1${m1:+,}run/bench_moe$r
    d2=$d2${d2:+,}run/bench_moe_dense_dp2_$r m2=$m2${m2:+,}run/bench_moe_ep2_$r
done
table "1 rank, 2 threads ($REPS runs each):" "$d1" "$m1" ""
table "2 ranks (dp 2), 1 thread each ($REPS runs each):" "$d2" "$m2" ", ep 2"
