#!/bin/sh
# ckpt_bench.sh -- checkpoint write and read bandwidth for GPT-2 124M (model
# and AdamW state: 3 x 124M floats, 1.4 GiB) through parallel HDF5, side by
# side with dd on the same file system: triad's write (with its flush and
# read-back check) against dd writing as many bytes with fsync; triad's
# restart read (with its checksums) against dd reading the same file (in
# blocks of 64 MiB: dd's fastest here, so the kernel reads deep ahead), both
# cold (the file's pages dropped from the page cache first) and from the page
# cache.  The page cache is dropped with /proc/sys/vm/drop_caches where this
# user may write it, else the file's pages alone are evicted
# (posix_fadvise DONTNEED, through dd iflag=nocache); the method is printed.
# Writes and reads are repeated REPEAT times (default 3), alternating triad
# and dd, and the best of each is shown (the disk and the machine are noisy:
# the same write took 1.7 to 4.6 s in eight runs on one disk).  NP ranks
# (default 2) as tp x dp = NP x 1.  Target (issue 32): a cold read at >= 50 %
# of dd's rate.
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
NP=${NP:-2}
REPEAT=${REPEAT:-3}
dir=run/bench_ckpt
deck="bench/gpt2_124m.nml train.steps=0 parallel.tp=$NP io.save_final=.true. io.run_dir='$dir'"
file=$dir/ckpt_0.h5
now() { date +%s.%N; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b < a) ? b : a }'; }

# the writes: triad's into a new run directory, then dd's of as many bytes with fsync
wsec="" dwrite=""
i=0
while [ $i -lt "$REPEAT" ]; do
    rm -rf "$dir"
    w=$(mpirun -n "$NP" --oversubscribe --bind-to none ./triad $deck 2>&1 |
        sed -n 's/.*written and verified: \([0-9.]*\) MiB in \([0-9.]*\) s.*/\1 \2/p')
    [ -n "$w" ] || { echo "ckpt_bench: the checkpoint write failed"; exit 1; }
    set -- $w
    mib=$1 wsec=$(best "$wsec" "$2")
    count=$(($(stat -c %s "$file") / 1048576))
    t0=$(now)
    dd if=/dev/zero of="$dir/plain.bin" bs=1M count=$count conv=fsync status=none
    dwrite=$(best "$dwrite" "$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')")
    rm -f "$dir/plain.bin"
    i=$((i + 1))
done

if sync 2> /dev/null && echo 1 2> /dev/null > /proc/sys/vm/drop_caches; then
    method="page cache dropped (/proc/sys/vm/drop_caches)"
    evict() { sync; echo 1 > /proc/sys/vm/drop_caches; }
else
    method="the file's pages evicted (posix_fadvise DONTNEED: dd iflag=nocache count=0)"
    evict() { dd if="$1" iflag=nocache count=0 status=none; }
fi
triad_read() { # seconds of triad's restart read of $file ("read in X s")
    mpirun -n "$NP" --oversubscribe --bind-to none ./triad $deck io.restart="'$file'" io.save_final=.false. 2>&1 |
        sed -n 's/.*read in \([0-9.]*\) s.*/\1/p'
}
dd_read() { t0=$(now); dd if="$file" of=/dev/null bs=64M status=none; awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }'; }

rc="" dc="" rw="" dw=""
i=0
while [ $i -lt "$REPEAT" ]; do
    evict "$file"; rc=$(best "$rc" "$(triad_read)")
    evict "$file"; dc=$(best "$dc" "$(dd_read)")
    rw=$(best "$rw" "$(triad_read)")
    dw=$(best "$dw" "$(dd_read)")
    i=$((i + 1))
done
resident=$(evict "$file"; fincore --bytes --noheadings --output RES "$file" 2> /dev/null | tr -d " ")

awk -v mib="$mib" -v w="$wsec" -v n="$count" -v dwr="$dwrite" -v rc="$rc" -v dc="$dc" -v rw="$rw" -v dw="$dw" \
    -v np="$NP" -v rep="$REPEAT" 'BEGIN {
    printf "%-36s %8s %9s %8s %7s\n", "", "MiB", "seconds", "MiB/s", "of dd"
    printf "%-36s %8.0f %9.2f %8.0f %6.0f%%\n", "triad write + flush + check (" np " ranks)", mib, w, mib / w,
        100 * (mib / w) / (n / dwr)
    printf "%-36s %8.0f %9.2f %8.0f\n", "dd write + fsync", n, dwr, n / dwr
    printf "%-36s %8.0f %9.2f %8.0f %6.0f%%\n", "triad read + checksums, cold", mib, rc, mib / rc,
        100 * (mib / rc) / (n / dc)
    printf "%-36s %8.0f %9.2f %8.0f\n", "dd read, cold", n, dc, n / dc
    printf "%-36s %8.0f %9.2f %8.0f %6.0f%%\n", "triad read + checksums, page cache", mib, rw, mib / rw,
        100 * (mib / rw) / (n / dw)
    printf "%-36s %8.0f %9.2f %8.0f\n", "dd read, page cache", n, dw, n / dw
    printf "(writes and reads: the best of %d, alternating triad and dd)\n", rep
}'
echo "cold: $method${resident:+; after it ${resident} bytes of the file stay cached}"
rm -f "$file"

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
