#!/bin/sh
# What each rank did, side by side: a rank made slow (diag.slow_rank) is
# named as the straggler in the progress line once it has been the slowest
# by more than 20 % for 5 steps in a row, and is the slowest rank of every
# step in metrics.h5 (busy min / median / max beside it); each rank's peak
# resident memory is printed at the end beside the plan's peak and what it
# allocated, and stored as /memory/peak_rss and /memory/planned_peak (the
# GPU's memory in use: cuda_emu/plan_device.sh).
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
common="parallel.pp=2 train.micro_batch_size=2 train.steps=12"
# (150 ms: well above what a loaded 2-core machine's 4 ranks wait on each other by chance)
triad_run 4 "$deck" $common diag.slow_rank=2 diag.slow_seconds=0.15 io.run_dir="'$scratch/slow'"
ok $? "4 ranks, world rank 2 made 150 ms slower per step"
first=$(grep -n "| straggler rank 2 (+" "$scratch/last.out" | head -n 1 | sed 's/.*step *\([0-9]*\)\/.*/\1/')
[ "$first" = 5 ] && [ "$(grep -c '| straggler rank 2 (+' "$scratch/last.out")" -eq 8 ]
ok $? "the progress line names rank 2 as the straggler from step 5 (its fifth slow step) to 12 (first: ${first:-none})"
"$PYTHON3" - "$scratch/slow/metrics.h5" << 'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1]) as f:
    m = f["metrics"]
    slow = m["slowest_rank"][:]
    lo, med, hi = m["busy_min"][:], m["busy_median"][:], m["busy_max"][:]
    rss = f["memory/peak_rss"][:]
    alloc = f["memory/allocated"][:].sum(axis=1)
    plan = f["memory/planned_peak"][:]
    on_device = "peak_device" in f["memory"]
ok = list(slow) == [2] * 12 and np.all(lo <= med) and np.all(med <= hi) and np.all(hi - med > 0.12)
ok = ok and len(rss) == 4 and np.all(rss > alloc) and len(plan) == 4 and np.all(plan > alloc) and not on_device
print("# busy median %.3f s, max %.3f s; slowest rank by step %s; peak RSS %s MiB, planned %s MiB" %
      (med.mean(), hi.mean(), list(slow), (rss >> 20).tolist(), (plan >> 20).tolist()))
sys.exit(0 if ok else 1)
PY
ok $? "metrics.h5: rank 2 the slowest of every step, 120 ms above the median; /memory/peak_rss and planned_peak for every rank, no peak_device on the CPU"
grep -q "^peak memory per rank (MiB): resident set, the plan's peak, allocated" "$scratch/last.out" &&
    [ "$(grep -c '^  rank   [0-3]: peak  *[0-9.]*   planned  *[0-9.]*   allocated  *[0-9.]*$' "$scratch/last.out")" -eq 4 ]
ok $? "the end of the run prints each rank's peak resident memory beside the plan's and what it allocated"
done_testing
