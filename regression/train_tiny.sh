#!/bin/sh
# A tiny run on the synthetic task learns: the loss falls well below log(V).
. "$(dirname "$0")/lib.sh"

triad_run 1 "$DECKS/tiny.nml" io.run_dir="'$scratch/run'" train.steps=60
st=$?
ok $st "tiny run exits 0"
[ $st -eq 0 ] || diag < "$scratch/last.out"

# log(64) = 4.16; the synthetic task's structure lets a 2-layer model go far below.
"$PYTHON3" - "$scratch/run" <<'PY'
import sys, h5py, math
with h5py.File(sys.argv[1] + "/metrics.h5") as f:
    loss = f["metrics/loss"][:]
    steps = f["metrics/step"][:]
print(f"# first loss {loss[0]:.4f} (log V = {math.log(64):.4f}), last {loss[-1]:.4f}")
ok = abs(loss[0] - math.log(64)) < 0.15 and loss[-1] < 3.0 and list(steps) == list(range(1, 61))
sys.exit(0 if ok else 1)
PY
ok $? "loss starts at log(V) and falls below 3.0 in 60 steps; metrics.h5 has one row per step"

grep -q "^step     60/60 | loss" "$scratch/last.out"
ok $? "a progress line per step"
grep -q "timing over 60 steps" "$scratch/last.out"
ok $? "timing summary at the end"
done_testing
