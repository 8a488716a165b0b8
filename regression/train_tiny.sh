#!/bin/sh
# A tiny run on the synthetic task learns: the loss falls well below log(V).
. "$(dirname "$0")/lib.sh"

triad_run 1 "$DECKS/tiny.nml" io.run_dir="'$scratch/run'" train.steps=60
st=$?
ok $st "tiny run exits 0"
[ $st -eq 0 ] || diag < "$scratch/last.out"
! grep -q "warning\|error" "$scratch/last.out"
ok $? "... without a warning or an error (metrics.h5 closed cleanly among them)"
grep "warning\|error" "$scratch/last.out" | diag

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
grep -q "^step     60/60 | loss .* | elapsed [0-9]*s | ETA 0s$" "$scratch/last.out"
ok $? "the progress line gives the elapsed time and the ETA"

# metrics.h5 describes itself: units and a description on every dataset, no
# spaces in names, a wall-clock time per row
"$PYTHON3" - "$scratch/run" > "$scratch/desc" 2>&1 <<'PY'
import sys, time, h5py, numpy as np
bad = []
with h5py.File(sys.argv[1] + "/metrics.h5") as f:
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            if " " in name or not obj.attrs.get("units") or not obj.attrs.get("description"):
                bad.append(name)
    f.visititems(visit)
    t = f["metrics/time"][:]
if bad:
    print("datasets without units, description or with spaces in the name:", bad)
ok = not bad and len(t) == 60 and np.all(np.diff(t) >= 0) and abs(t[-1] - time.time()) < 600
print("# last row at %.0f s since the epoch" % t[-1])
sys.exit(0 if ok else 1)
PY
ok $? "every metrics.h5 dataset has units and a description, no name has a space, /metrics/time is wall-clock"
diag < "$scratch/desc"
grep -q "timing over 60 steps" "$scratch/last.out"
ok $? "timing summary at the end"
done_testing
