#!/bin/sh
# long_seq.sh -- memory and speed against the sequence length, one rank:
# GPT-2 L2 C128 NH4, one sequence per step, T = 1K ... 16K.  Per T: the
# run's peak resident set (/memory/peak_rss, getrusage) beside the plan's
# peak (/memory/planned_peak), the ratio to the previous T's, and tokens/s
# (median step).  The fused attention keeps each row's log-sum-exp, not
# the T x T probabilities: memory grows about linearly in T.  Measured
# here, never in a test.
#   bench/long_seq.sh                  T = 1024 2048 4096 8192 16384
#   LENGTHS='1024 2048' bench/long_seq.sh
set -u
cd "$(dirname "$0")/.."
LENGTHS=${LENGTHS:-1024 2048 4096 8192 16384}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
tmp=$(mktemp -d "${TMPDIR:-/tmp}/long_seq.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for T in $LENGTHS; do
    mpirun -n 1 --bind-to none ./triad bench/small.nml model.n_layer=2 model.d_model=128 model.n_head=4 \
        model.seq_len="$T" train.batch_size=1 train.steps=4 train.peak_gflops=100 io.run_dir="'$tmp/t$T'" \
        > "$tmp/t$T.out" 2>&1 || { tail -n 20 "$tmp/t$T.out"; exit 1; }
done
/usr/bin/python3 - "$tmp" $LENGTHS <<'PY'
import sys, h5py
tmp, lengths = sys.argv[1], [int(t) for t in sys.argv[2:]]
MiB = 2.0 ** 20
print("GPT-2 L2 C128 NH4, one sequence a step, 1 rank")
print("%-8s %10s %10s %9s %10s %10s" % ("T", "RSS MiB", "plan MiB", "plan err", "vs T/2", "tokens/s"))
prev = None
for T in lengths:
    with h5py.File("%s/t%d/metrics.h5" % (tmp, T)) as f:
        rss, plan = float(f["memory/peak_rss"][0]), float(f["memory/planned_peak"][0])
        dt = sorted(f["metrics/step_time"][1:])
    tok = T / dt[len(dt) // 2] if dt else float("nan")
    ratio = "" if prev is None else "%.2f" % (rss / prev)
    print("%-8d %10.1f %10.1f %+8.1f%% %10s %10.0f" % (T, rss / MiB, plan / MiB, 100 * (plan / rss - 1), ratio, tok))
    prev = rss
PY
