#!/bin/sh
# ckpt_bench.sh -- checkpoint write and read bandwidth for GPT-2 124M (model
# and AdamW state: 3 x 124M floats, 1.4 GiB) through parallel HDF5, against a
# plain sequential write (dd, fsync) and read of the same number of bytes on
# the same file system.  NP ranks (default 2) as tp x dp = NP x 1.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
NP=${NP:-2}
dir=run/bench_ckpt
rm -rf "$dir"
deck="bench/gpt2_124m.nml train.steps=0 parallel.tp=$NP io.save_final=.true. io.run_dir='$dir'"
w=$(mpirun -n "$NP" --oversubscribe ./triad $deck 2>&1 | sed -n 's/.*written and verified: \([0-9.]*\) MiB in \([0-9.]*\) s.*/\1 \2/p')
set -- $w
mib=$1 wsec=$2
r=$(mpirun -n "$NP" --oversubscribe ./triad $deck io.restart="'$dir/ckpt_0.h5'" io.save_final=.false. 2>&1 |
    sed -n 's/.*read in \([0-9.]*\) s.*/\1/p')
bytes=$(stat -c %s "$dir/ckpt_0.h5")
count=$((bytes / 1048576))
t0=$(date +%s.%N)
dd if=/dev/zero of="$dir/plain.bin" bs=1M count=$count conv=fsync status=none
t1=$(date +%s.%N)
dd if="$dir/plain.bin" of=/dev/null bs=1M status=none
t2=$(date +%s.%N)
awk -v mib="$mib" -v w="$wsec" -v r="$r" -v n="$count" -v t0="$t0" -v t1="$t1" -v t2="$t2" -v np="$NP" 'BEGIN {
    dw = t1 - t0; dr = t2 - t1
    printf "%-28s %10s %10s %10s\n", "", "MiB", "seconds", "MiB/s"
    printf "%-28s %10.0f %10.2f %10.0f\n", "triad write (" np " ranks)", mib, w, mib / w
    printf "%-28s %10.0f %10.2f %10.0f\n", "dd write + fsync", n, dw, n / dw
    printf "%-28s %10.0f %10.2f %10.0f\n", "triad read + verify", mib, r, mib / r
    printf "%-28s %10.0f %10.2f %10.0f\n", "dd read (page cache)", n, dr, n / dr
    printf "write: %.0f%% of dd; read: %.0f%% of dd\n", 100 * (mib / w) / (n / dw), 100 * (mib / r) / (n / dr)
}'
rm -f "$dir/plain.bin"

# Background checkpoints (io.async_checkpoint): the same model trained 12
# steps with checkpoints after steps 4 and 8, beside the same run without
# them.  The first write runs while steps 5 ... k are computed (k: the step
# after which it was sealed); their step times are compared with the same
# steps of the run without a checkpoint.
train="bench/gpt2_124m.nml train.steps=12 parallel.tp=$NP io.save_final=.false."
mpirun -n "$NP" --oversubscribe ./triad $train io.run_dir="'$dir/none'" > "$dir/none.out" 2>&1
mpirun -n "$NP" --oversubscribe ./triad $train io.checkpoint_every=4 io.run_dir="'$dir/sync'" > "$dir/sync.out" 2>&1
mpirun -n "$NP" --oversubscribe ./triad $train io.checkpoint_every=4 io.async_checkpoint=.true. \
    io.run_dir="'$dir/async'" > "$dir/async.out" 2>&1
/usr/bin/python3 - "$dir" <<'PY'
import re, sys, h5py, numpy as np
d = sys.argv[1]
def steps(run):
    with h5py.File(f"{d}/{run}/metrics.h5") as f:
        return dict(zip(f["metrics/step"][:], f["metrics/step_time"][:]))
log = open(f"{d}/async.out").read()
m = re.search(r"ckpt_4.h5 written in the background and verified: ([0-9.]+) MiB in ([0-9.]+) s .*sealed after step "
              r"(\d+); training stopped ([0-9.]+) s for the snapshot, ([0-9.]+) s waiting for the writer and ([0-9.]+) s "
              r"for the seal", log)
s = re.search(r"ckpt_4.h5 written and verified: ([0-9.]+) MiB in ([0-9.]+) s", open(f"{d}/sync.out").read())
if not m or not s:
    sys.exit("ckpt_bench: a run failed; see " + d + "/*.out")
mib, wall, last, snap, wait, seal = float(m[1]), float(m[2]), int(m[3]), float(m[4]), float(m[5]), float(m[6])
none, asy = steps("none"), steps("async")
during = [k for k in range(5, last + 1) if k in none and k in asy]
base = [none[k] for k in range(5, 13) if k in none]
t_none = np.mean([none[k] for k in during]); t_async = np.mean([asy[k] for k in during])
print(f"\nbackground checkpoint of {mib:.0f} MiB: written, flushed and read back in {wall:.2f} s "
      f"({mib / wall:.0f} MiB/s) while steps 5..{last} ran")
print(f"  training stopped for it: {snap:.2f} s (snapshot and file creation) + {seal:.2f} s (seal), "
      f"against {float(s[2]):.2f} s for the synchronous write;")
print(f"  the next checkpoint, 4 steps later, waited {wait:.2f} s for the writer (it runs at a lower priority "
      f"than the training: nice 15)")
print(f"  step time during the write: {t_async:.3f} s, the same steps without a checkpoint: {t_none:.3f} s "
      f"(ratio {t_async / t_none:.2f}; the run's median step {np.median(base):.3f} s)")
PY
rm -rf "$dir/none" "$dir/sync" "$dir/async"
