#!/bin/sh
# io.run_dir's file system going read-only while a run goes on, for real:
# an ext4 image mounted with errors=remount-ro and made to report an error
# (/sys/fs/ext4/<dev>/trigger_fs_error), as a failing disk makes it.  Open
# files stay open, and every later write fails with EROFS.
# 1. Between checkpoints (after ckpt_5.h5, steps slowed): the next metrics
#    flush finds the folder refusing writes before HDF5 writes (a probe), so
#    metrics.h5 is closed whole; the next checkpoint cannot be created.
#    Status 1 (HDF5 1.10 crashed in MPI_Finalize on the half-written file
#    before), the file system named as read-only, the advice to copy the
#    checkpoint elsewhere; ckpt_5.h5 verifies, metrics.h5 reads, and a
#    restart from the copies in another folder finishes the run.
# 2. In the middle of a checkpoint's write (an LD_PRELOAD shim triggers the
#    error at the first write into ckpt_10.h5.tmp): HDF5 1.10's collective
#    close of that file hangs (the ranks leave its metadata flush at
#    different points), so it is left open and the job ends through
#    MPI_Abort with status 1 and the reason (it hung before).
# 3. The same in a stop's checkpoint: status 1, not 3 (a requeued job would
#    find the folder read-only).
# Skipped where a loop device cannot be mounted or ext4 has no error trigger.
. "$(dirname "$0")/lib.sh"
deck="$DECKS/tiny.nml"
img="$scratch/fs.img" mnt="$scratch/fs"
mkdir -p "$mnt"
trap 'umount "$mnt" 2> /dev/null; rm -rf "$scratch"' EXIT
# fresh: a new ext4 file system at $mnt, its error trigger in $trigger
fresh() {
    umount "$mnt" 2> /dev/null
    rm -f "$img" && truncate -s 64M "$img" && mkfs.ext4 -q -F "$img" > "$scratch/mkfs.err" 2>&1 &&
        mount -o loop,errors=remount-ro "$img" "$mnt" 2> "$scratch/mount.err" || return 1
    trigger=/sys/fs/ext4/$(basename "$(findmnt -n -o SOURCE "$mnt" | tail -n 1)")/trigger_fs_error
    [ -w "$trigger" ]
}
if ! command -v mkfs.ext4 > /dev/null || ! fresh; then
    skip "cannot mount an ext4 image with an error trigger ($(cat "$scratch/mount.err" "$scratch/mkfs.err" 2> /dev/null | head -n 1))"
    done_testing
fi
verify() { "$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$1" > "$scratch/verify.out" 2>&1; }
common="parallel.dp=2 train.steps=20 io.checkpoint_every=5"

# 1. read-only between checkpoints
$MPIEXEC -n 2 "$TRIAD" "$deck" $common io.metrics_flush=1 diag.slow_rank=0 diag.slow_seconds=0.2 \
    io.run_dir="'$mnt/run'" > "$scratch/ro.out" 2>&1 &
pid=$!
for i in $(seq 1 600); do grep -q "ckpt_5.h5 written" "$scratch/ro.out" && break; sleep 0.05; done
echo 1 > "$trigger"
wait $pid
st=$?
grep "^error\|hint\|Segmentation\|signal" "$scratch/ro.out" | diag
[ $st -eq 1 ] &&
    grep -q "^error: writing step [0-9]* to metrics.h5 failed (its file system is read-only); the rows flushed before are kept" "$scratch/ro.out" &&
    grep -q "cannot create $mnt/run/ckpt_[0-9]*.h5.tmp: $mnt/run: its file system is read-only" "$scratch/ro.out" &&
    grep -q "hint: io.run_dir's file system went read-only, .* the newest good checkpoint, $mnt/run/ckpt_5.h5, is intact: copy it and metrics.h5 to a writable folder" "$scratch/ro.out" &&
    ! grep -q "Segmentation\|signal\|HDF5-DIAG" "$scratch/ro.out"
ok $? "read-only between checkpoints: status 1 (got $st), metrics.h5 and the next checkpoint refused, read-only named, the copy advised"
mkdir -p "$scratch/moved" && cp "$mnt/run/ckpt_5.h5" "$mnt/run/metrics.h5" "$scratch/moved/"
verify "$scratch/moved/ckpt_5.h5"
ok $? "ckpt_5.h5 verifies"
"$PYTHON3" - "$scratch/moved/metrics.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    steps = list(f["metrics/step"][:])
print("# metrics.h5 steps", steps)
sys.exit(int(not (len(steps) >= 5 and steps == list(range(1, len(steps) + 1)))))
PY
ok $? "metrics.h5 reads, its rows those of steps 1 .. the last flushed"
triad_run 2 "$deck" $common io.restart=auto io.run_dir="'$scratch/moved'"
[ $? -eq 0 ] && grep -q "restarted from $scratch/moved/ckpt_5.h5 at step 5" "$scratch/last.out"
ok $? "restart = 'auto' from the copies in a writable folder finishes the run"

# 2. read-only in the middle of a checkpoint's write
shim="$scratch/ro_trigger.so"
if fresh && ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/regression/faults/ro_trigger.c" -ldl 2> "$scratch/cc.err"; then
    LD_PRELOAD="$shim" TRIAD_FAULT_PATH=ckpt_10.h5.tmp TRIAD_FAULT_TRIGGER="$trigger" \
        timeout 120 $MPIEXEC -n 2 "$TRIAD" "$deck" $common io.run_dir="'$mnt/run'" > "$scratch/mid.out" 2>&1
    st=$?
    grep "^error\|hint\|MPI_ABORT" "$scratch/mid.out" | diag
    [ $st -eq 1 ] &&
        grep -q "^error: checkpoint at step 10 failed: rank [01]: .* ($mnt/run: its file system is read-only)" "$scratch/mid.out" &&
        grep -q "the newest good checkpoint, $mnt/run/ckpt_5.h5, is intact: copy it" "$scratch/mid.out" &&
        verify "$mnt/run/ckpt_5.h5"
    ok $? "read-only in the middle of ckpt_10's write: no hang, status 1 (got $st; through MPI_Abort), the reason named; ckpt_5.h5 verifies"
    # 3. the same while stopping (the stop file, in a run resumed from ckpt_5.h5 of a run of 7 steps): status 1, not the 3 that
    # promises a requeued job its resume (it would find the folder read-only)
    fresh && triad_run 2 "$deck" $common train.steps=7 io.run_dir="'$mnt/run'" && touch "$mnt/run/STOP" &&
        LD_PRELOAD="$shim" TRIAD_FAULT_PATH=ckpt_6.h5.tmp TRIAD_FAULT_TRIGGER="$trigger" \
            timeout 120 $MPIEXEC -n 2 "$TRIAD" "$deck" $common io.restart=auto io.run_dir="'$mnt/run'" > "$scratch/stop.out" 2>&1
    st=$?
    grep "^error\|hint\|stopp\|restart" "$scratch/stop.out" | diag; ls "$mnt/run" | diag
    [ $st -eq 1 ] && grep -q "^error: checkpoint at step 6 failed: .*its file system is read-only" "$scratch/stop.out" &&
        ! grep -q "status 3" "$scratch/stop.out" && verify "$mnt/run/ckpt_5.h5"
    ok $? "... while stopping: status 1 (got $st), no resume promised, ckpt_5.h5 verifies"
else
    skip "cannot build the LD_PRELOAD shim or mount anew ($(head -n 1 "$scratch/cc.err" 2> /dev/null))"
    skip "(the same while stopping)"
fi
done_testing
