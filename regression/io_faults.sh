#!/bin/sh
# I/O faults, on small tmpfs file systems.  A write that fails for lack of
# space is not survivable in HDF5 1.10 (a collective close can hang, the
# library's shutdown can crash), so triad keeps room: it stops while a
# checkpoint still fits, and never starts one that does not.
# 1. A disk filling up (tp 2 x dp 2): the run stops at the checkpoint step
#    after which a stop's checkpoint would no longer fit, with that step's
#    checkpoint written and verified, status 1, the figures; it restarts
#    elsewhere to the uninterrupted run's losses bitwise.
# 2. A checkpoint that cannot fit (the disk filled by another process) is
#    not started: status 1 with the space needed and free, the previous
#    checkpoint intact and verified, no file of the new one left.
# 3. restart = 'auto' on a 100 % full disk reads its checkpoint (reading
#    needs no space), then stops before its first write, with the reason.
# 4. A stop asked for when its checkpoint cannot fit: status 3 naming the
#    previous checkpoint, which a requeued job resumes from.
# 5. metrics.h5 filling the disk: a clean stop with a checkpoint, no HDF5
#    error dump, the file still opens.
#    A disk with room for keep_checkpoints + 1 runs on: rotation frees it.
# 6. A damaged metrics.h5 does not block a restart: it is moved aside with a
#    warning and a new one starts at the checkpoint's step.
#    One that another program holds open with HDF5's file lock (h5py) is
#    not damaged: the restart stops with status 1 naming the reader and
#    leaves the file as it was.
# 7. A stop at a checkpoint step writes that checkpoint once.
# 8. io.run_dir removed while the run goes on, then a stop (SIGUSR1): the
#    stop's checkpoint cannot be written and the newest one is gone with the
#    directory: status 1 saying so, not status 3 promising a resume (a
#    requeued job would start from the beginning).
# Skipped where tmpfs cannot be mounted (not root, or no CAP_SYS_ADMIN).
. "$(dirname "$0")/lib.sh"
deck="$DECKS/tiny.nml"
common="parallel.tp=2 train.steps=20 io.checkpoint_every=5 io.keep_checkpoints=2"
mnt="$scratch/fs"
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=1400k tmpfs "$mnt" 2> "$scratch/mount.err"; then
    skip "cannot mount a tmpfs to fill ($(head -1 "$scratch/mount.err"))"
    done_testing
fi
trap 'umount "$mnt" 2> /dev/null; rm -rf "$scratch"' EXIT
verify() { "$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$1" > "$scratch/verify.out" 2>&1; }
remount() { umount "$mnt" && mount -t tmpfs -o "size=$1" tmpfs "$mnt"; }
# fill_to KIB: another process's file leaves about KIB KiB free on the disk
fill_to() { dd if=/dev/zero of="$mnt/fill" bs=1k count=$(($(df -k --output=avail "$mnt" | tail -1) - $1)) 2> /dev/null; }
# wait_for FILE: up to 30 s for it to appear
wait_for() { for i in $(seq 1 600); do [ -e "$1" ] && return 0; sleep 0.05; done; return 1; }

triad_run 4 "$deck" $common io.run_dir="'$scratch/ref'"
ok $? "uninterrupted reference: tp 2 x dp 2, 20 steps"

# 1. the disk fills up: after ckpt_5 there is room for step 10's and no other
triad_run 4 "$deck" $common io.run_dir="'$mnt/run'"
st=$?
cp "$scratch/last.out" "$scratch/full.out"
[ $st -eq 1 ] && grep -q "error: the file system of $mnt/run has [0-9]* KiB free, less than this step.s checkpoint, one more and some metrics need" \
    "$scratch/full.out" && grep -q "stopping at step 10 .*; its checkpoint is written" "$scratch/full.out"
ok $? "a filling disk on 4 ranks: the run stops at step 10 with its checkpoint, status 1 (got $st), the figures"
grep '^error' "$scratch/full.out" | diag
verify "$mnt/run/ckpt_10.h5" && verify "$mnt/run/ckpt_5.h5"
ok $? "ckpt_10.h5 and the previous ckpt_5.h5 verify"
mkdir -p "$scratch/resume" && cp "$mnt/run/ckpt_10.h5" "$mnt/run/metrics.h5" "$scratch/resume/"
triad_run 4 "$deck" $common io.restart=auto io.run_dir="'$scratch/resume'"
[ $? -eq 0 ] && grep -q "restarted from $scratch/resume/ckpt_10.h5 at step 10" "$scratch/last.out" &&
    compare_runs "$scratch/resume" "$scratch/ref" 0 loss grad_norm > "$scratch/cmp.out"
ok $? "restarted from it elsewhere: every step's loss and grad norm bitwise equal to the uninterrupted run"
diag < "$scratch/cmp.out"

# 2. no room for the next checkpoint: another process fills the disk once
#    ckpt_5 is written (steps slowed so that it does so before step 10)
remount 1400k
$MPIEXEC -n 4 "$TRIAD" "$deck" $common diag.slow_rank=0 diag.slow_seconds=0.4 io.run_dir="'$mnt/run'" \
    > "$scratch/last.out" 2>&1 &
pid=$!
wait_for "$mnt/run/ckpt_5.h5" && fill_to 300
wait $pid
st=$?
rm -f "$mnt/fill"
[ $st -eq 1 ] && grep -q "error: checkpoint at step 10 failed: not enough space in $mnt/run: the checkpoint needs about" \
    "$scratch/last.out" && grep -q "KiB are free" "$scratch/last.out" &&
    grep -q "stopping (the disk filled faster than the run checked: no checkpoint of this step fits)" "$scratch/last.out"
ok $? "a checkpoint that cannot fit is not started: status 1 (got $st), the space needed and free"
grep '^error' "$scratch/last.out" | diag
! grep -q "ckpt_10.h5 written" "$scratch/last.out" && [ ! -e "$mnt/run/ckpt_10.h5" ] && [ ! -e "$mnt/run/ckpt_10.h5.tmp" ]
ok $? "nothing claims ckpt_10 was written, and no ckpt_10 file is left"
verify "$mnt/run/ckpt_5.h5"
ok $? "the previous checkpoint ckpt_5.h5 is still there and verifies"

# 3. restart = 'auto' on a 100 % full disk
dd if=/dev/zero of="$mnt/fill" bs=4k > /dev/null 2>&1
triad_run 4 "$deck" $common io.restart=auto io.run_dir="'$mnt/run'"
st=$?
[ $st -eq 1 ] && grep -q "restarted from $mnt/run/ckpt_5.h5 at step 5" "$scratch/last.out" &&
    grep -q "error: the file system of $mnt/run has 0 KiB free" "$scratch/last.out"
ok $? "restart = 'auto' on a 100 % full disk reads ckpt_5.h5, then stops before writing, with the reason (status $st)"
grep '^error' "$scratch/last.out" | diag

# 4. a stop asked for when its checkpoint cannot fit (the disk filled by
#    another process after ckpt_400; steps slowed so that the stop comes
#    before the next checkpoint step)
remount 1400k
more="parallel.tp=2 train.steps=100000 io.checkpoint_every=400 io.keep_checkpoints=2 io.log_every=1000 io.metrics_flush=100000"
$MPIEXEC -n 4 "$TRIAD" "$deck" $more diag.slow_rank=0 diag.slow_seconds=0.01 io.run_dir="'$mnt/run'" \
    > "$scratch/stop.out" 2>&1 &
pid=$!
wait_for "$mnt/run/ckpt_400.h5" && fill_to 300
touch "$mnt/run/STOP"
wait $pid
st=$?
[ $st -eq 3 ] && grep -q "stopped without a checkpoint of step [0-9]*: the newest good one is $mnt/run/ckpt_400.h5" \
    "$scratch/stop.out"
ok $? "a stop whose checkpoint cannot fit: status 3 (got $st), naming ckpt_400.h5 to resume from"
grep '^error\|stopped without' "$scratch/stop.out" | diag
verify "$mnt/run/ckpt_400.h5"
ok $? "and ckpt_400.h5 verifies"

# 5. metrics.h5 fills the disk (no periodic checkpoints)
remount 1500k
triad_run 2 "$deck" train.steps=200000 io.metrics_flush=1 io.log_every=50000 io.run_dir="'$mnt/run'"
st=$?
[ $st -eq 1 ] && grep -q "stopping while a checkpoint still fits" "$scratch/last.out" &&
    grep -q "the checkpoint of step [0-9]* is written" "$scratch/last.out" && ! grep -q "HDF5-DIAG" "$scratch/last.out"
ok $? "metrics.h5 filling the disk: a clean stop with a checkpoint, status 1 (got $st), no HDF5 error dump"
grep '^error' "$scratch/last.out" | head -3 | diag
rows=$("$PYTHON3" -c "import h5py,sys; print(len(h5py.File(sys.argv[1])['metrics/step'][:]))" "$mnt/run/metrics.h5" 2>&1)
last=$(ls "$mnt"/run/ckpt_*.h5 2>/dev/null | tail -1)
[ "$rows" -gt 100 ] 2>/dev/null && [ -n "$last" ] && verify "$last"
ok $? "metrics.h5 still opens ($rows rows) and the checkpoint verifies"

# 5b. a disk with room for keep_checkpoints + 1 checkpoints: once the run
#     keeps 2, each new one's rotation frees the room the next needs
remount 1700k
triad_run 1 "$deck" train.steps=30 io.checkpoint_every=3 io.keep_checkpoints=2 io.run_dir="'$mnt/run2'"
st=$?
[ $st -eq 0 ] && [ "$(grep -v '^#' "$mnt/run2/checkpoints.txt" | tr '\n' ' ')" = "ckpt_24.h5 ckpt_27.h5 " ]
ok $? "with rotation at 2 kept, 30 steps on a disk of 1.7 MB run to the end (status $st), a checkpoint every 3 steps"
grep '^error' "$scratch/last.out" | diag
umount "$mnt"

# 6. a damaged metrics.h5 beside a good checkpoint: the restart goes on
mkdir -p "$scratch/dm" && cp "$scratch/ref/ckpt_15.h5" "$scratch/dm/" &&
    head -c 3000 "$scratch/ref/metrics.h5" > "$scratch/dm/metrics.h5"
triad_run 4 "$deck" $common io.restart=auto io.run_dir="'$scratch/dm'"
st=$?
[ $st -eq 0 ] && grep -q "warning: $scratch/dm/metrics.h5 could not be continued .*moved to $scratch/dm/metrics.h5.damaged.1" \
    "$scratch/last.out" && [ -f "$scratch/dm/metrics.h5.damaged.1" ] &&
    "$PYTHON3" -c "import h5py,sys; s=h5py.File(sys.argv[1])['metrics/step'][:]; sys.exit(not (list(s) == list(range(16, 21))))" \
        "$scratch/dm/metrics.h5"
ok $? "a damaged metrics.h5 is moved aside on restart (status $st) and a new one holds steps 16..20"

# 6b. metrics.h5 held open by a reader with HDF5's file lock (h5py's default)
mkdir -p "$scratch/lk" && cp "$scratch/ref/ckpt_15.h5" "$scratch/ref/metrics.h5" "$scratch/lk/"
"$PYTHON3" - "$scratch/lk/metrics.h5" "$scratch/lk.ready" "$scratch/lk.done" <<'PY' &
import h5py, os, sys, time
f = h5py.File(sys.argv[1], "r")
open(sys.argv[2], "w").close()
for i in range(1200):
    if os.path.exists(sys.argv[3]):
        break
    time.sleep(0.05)
PY
reader=$!
wait_for "$scratch/lk.ready"
triad_run 4 "$deck" $common io.restart=auto io.run_dir="'$scratch/lk'"
st=$?
touch "$scratch/lk.done"
wait $reader
grep "error\|hint\|warning" "$scratch/last.out" | diag
[ $st -eq 1 ] && grep -q "cannot continue $scratch/lk/metrics.h5: another program has it open with HDF5's file lock" \
    "$scratch/last.out" && ! ls "$scratch/lk" | grep -q damaged && cmp -s "$scratch/lk/metrics.h5" "$scratch/ref/metrics.h5"
ok $? "a metrics.h5 a reader holds open is not taken for damaged: status 1 (got $st) naming the lock, the file unchanged"

# 7. a stop at a checkpoint step: one checkpoint, written once
mkdir -p "$scratch/once" && touch "$scratch/once/STOP"
triad_run 4 "$deck" parallel.tp=2 train.steps=20 io.checkpoint_every=1 io.run_dir="'$scratch/once'"
st=$?
[ $st -eq 3 ] && [ "$(grep -c 'checkpoint .*ckpt_1.h5 written' "$scratch/last.out")" -eq 1 ] &&
    grep -q "stopping at step 1 (stop file); its checkpoint is written" "$scratch/last.out"
ok $? "a stop at a checkpoint step writes it once (status $st)"

# 8. the run directory removed mid-run (steps slowed to 0.2 s, so the stop
# comes before the next checkpoint step), then SIGUSR1 to this test's mpirun
$MPIEXEC -n 2 "$TRIAD" "$deck" train.steps=1000 io.checkpoint_every=5 diag.slow_rank=0 diag.slow_seconds=0.2 \
    io.run_dir="'$scratch/gone'" > "$scratch/gone.out" 2>&1 &
pid=$!
for i in $(seq 1 600); do grep -q "ckpt_5.h5 written" "$scratch/gone.out" && break; sleep 0.05; done
rm -rf "$scratch/gone"
kill -USR1 $pid
wait $pid
st=$?
grep "^error\|hint\|stopped" "$scratch/gone.out" | diag
[ $st -eq 1 ] && grep -q "the newest checkpoint this run wrote, $scratch/gone/ckpt_5.h5, is gone too" "$scratch/gone.out" &&
    grep -q "no longer exists (removed while the run went on?)" "$scratch/gone.out" &&
    ! grep -q "which a requeued job resumes from\|is intact" "$scratch/gone.out"
ok $? "io.run_dir removed mid-run, then a stop: status 1 (got $st) saying the checkpoints are gone, no resume promised"
done_testing
