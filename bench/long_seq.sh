#!/bin/sh
# long_seq.sh -- memory and speed against the sequence length, one rank:
# GPT-2 L2 C128 NH4, one sequence per step, T = 1K ... 16K.  Per T: the
# run's peak resident set (/memory/peak_rss, getrusage) beside the plan's
# peak (/memory/planned_peak), the ratio to the previous T's, and tokens/s
# (median step).  The fused attention keeps each row's log-sum-exp, not
# the T x T probabilities: memory grows about linearly in T.
# Then context parallelism at fixed global tokens (one sequence of T_CP):
# cp = 1, 2, 4 ranks, each holding T_CP / cp positions; per cp the largest
# peak RSS of a rank, tokens/s, the ring's traffic per step and how long
# its messages were in flight while blocks were computed against how long a
# rank then waited for them (rank 0; the "ring attention" line of the run).
# Measured here, never in a test.
#   bench/long_seq.sh                  T = 1024 2048 4096 8192 16384; T_CP = 8192, cp = 1 2 4
#   LENGTHS='1024 2048' CPS='1 2' T_CP=4096 bench/long_seq.sh
set -u
cd "$(dirname "$0")/.."
LENGTHS=${LENGTHS:-1024 2048 4096 8192 16384}
CPS=${CPS:-1 2 4}
T_CP=${T_CP:-8192}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_rmaps_base_oversubscribe=1
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
for cp in $CPS; do
    mpirun -n "$cp" --bind-to none ./triad bench/small.nml model.n_layer=2 model.d_model=128 model.n_head=4 \
        model.seq_len="$T_CP" parallel.cp="$cp" train.batch_size=1 train.steps=4 train.threads=1 \
        train.peak_gflops=100 io.run_dir="'$tmp/cp$cp'" > "$tmp/cp$cp.out" 2>&1 || { tail -n 20 "$tmp/cp$cp.out"; exit 1; }
done
/usr/bin/python3 - "$tmp" "$T_CP" $CPS <<'PY'
import re, sys, h5py
tmp, T, cps = sys.argv[1], int(sys.argv[2]), [int(c) for c in sys.argv[3:]]
MiB = 2.0 ** 20
print()
print("context parallelism: one sequence of T = %d, cp ranks (1 thread each) holding T / cp positions" % T)
print("%-4s %12s %10s %12s %14s %12s %9s" % ("cp", "RSS MiB max", "tokens/s", "ring MiB/step", "in flight ms", "waited ms", "hidden"))
for cp in cps:
    with h5py.File("%s/cp%d/metrics.h5" % (tmp, cp)) as f:
        rss = max(float(x) for x in f["memory/peak_rss"][:])
        dt = sorted(f["metrics/step_time"][1:])
        ring = float(f["metrics/comm_cp_bytes"][-1]) if "metrics/comm_cp_bytes" in f else 0.0
        steps = len(f["metrics/step_time"])
    tok = T / dt[len(dt) // 2] if dt else float("nan")
    m = re.search(r"ring attention \(rank 0\): messages in flight during block computation ([0-9.]+) s, "
                  r"waited for after it ([0-9.]+) s", open("%s/cp%d.out" % (tmp, cp)).read())
    fl, wt = (float(m.group(1)), float(m.group(2))) if m else (0.0, 0.0)
    hidden = "%.0f%%" % (100 * fl / (fl + wt)) if fl + wt > 0 else "-"
    print("%-4d %12.1f %10.0f %12.2f %14.1f %12.1f %9s" % (cp, rss / MiB, tok, ring / MiB, 1e3 * fl / steps,
                                                          1e3 * wt / steps, hidden))
PY
