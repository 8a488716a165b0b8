#!/bin/sh
# tp_bench.sh -- one step of the small config (L=4 C=256 NH=4 T=256 B=8
# V=4096) at tp = 1 (dp = 2) and tp = 2 on 2 ranks, one thread each, side by
# side; and the TP traffic counted by comm.c against the analytic volume.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
for tp in 1 2; do
    mpirun -n 2 --bind-to core ./triad bench/small.nml parallel.tp=$tp train.threads=1 io.run_dir="'run/bench_tp$tp'" io.overwrite=.true. \
        > run/bench_tp$tp.out 2>&1 || { cat run/bench_tp$tp.out; exit 1; }
done
/usr/bin/python3 - <<'PY'
import h5py, numpy as np
L, C, T, V = 4, 256, 256, 4096
print(f"{'layout':10s} {'ms/step':>9s} {'tok/s':>9s} {'TP MiB/step':>12s} {'analytic':>10s}")
for tp in (1, 2):
    with h5py.File(f"run/bench_tp{tp}/metrics.h5") as f:
        t = np.median(f["metrics/step_time"][2:]); tps = np.median(f["metrics/tokens_per_s"][2:])
        b = f["metrics/comm_tp_bytes"][2:].mean()
    dp = 2 // tp
    N = (8 // dp) * T                     # one micro-batch of batch/dp sequences
    want = 0 if tp == 1 else (4 * L + 2) * N * C * 4 + 3 * N * 4 + 8 * (4 + 12 * L)
    print(f"tp={tp} dp={dp}  {1e3 * t:9.1f} {tps:9.0f} {b / 2**20:12.3f} {want / 2**20:10.3f}")
PY
