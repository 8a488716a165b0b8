#!/bin/sh
# I/O faults: a checkpoint counts as written only when it reads back whole.
# 1. A full disk (a small tmpfs) at a 4-rank (tp 2 x dp 2) checkpoint: the
#    checkpoint that cannot fit is not started (a write error inside HDF5's
#    collective close can hang; one lost inside MPI-IO's collective write
#    would be caught by the read-back of every new file): status 1 with the
#    space needed and free, the previous checkpoint intact and verified,
#    nothing half-written left; it restarts to the uninterrupted run's
#    losses bitwise.
# 1b. restart = 'auto' on a 100 % full disk reads its checkpoint (reading
#    needs no space) and fails at the first checkpoint with the true reason.
# 2. The same full disk when a stop is asked for: status 3 naming the
#    previous checkpoint, which a requeued job resumes from.
# 3. A stop at a checkpoint step writes that checkpoint once.
# 4. metrics.h5 on a full disk: status 1 with the reason (no HDF5 error
#    dump, no crash), the file still opens with the rows written.
# 5. A damaged metrics.h5 does not block a restart: it is moved aside with a
#    warning and a new one starts at the checkpoint's step.
# Skipped where tmpfs cannot be mounted (not root, or no CAP_SYS_ADMIN).
. "$(dirname "$0")/lib.sh"
deck="$DECKS/tiny.nml"
common="parallel.tp=2 train.steps=20 io.checkpoint_every=5 io.keep_checkpoints=2"
mnt="$scratch/fs"
mkdir -p "$mnt"
if ! mount -t tmpfs -o size=640k tmpfs "$mnt" 2> "$scratch/mount.err"; then
    skip "cannot mount a tmpfs to fill ($(head -1 "$scratch/mount.err"))"
    done_testing
fi
trap 'umount "$mnt" 2> /dev/null; rm -rf "$scratch"' EXIT
verify() { "$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$1" > "$scratch/verify.out" 2>&1; }

# 1. full disk at the step-10 checkpoint (ckpt_5 fits beside metrics.h5, a second one does not)
triad_run 4 "$deck" $common io.run_dir="'$scratch/ref'"
ok $? "uninterrupted reference: tp 2 x dp 2, 20 steps"
triad_run 4 "$deck" $common io.run_dir="'$mnt/run'"
st=$?
cp "$scratch/last.out" "$scratch/full.out"
[ $st -eq 1 ] && grep -q "error: checkpoint at step 10 failed: not enough space in $mnt/run: the checkpoint needs about" \
    "$scratch/full.out" && grep -q "MiB are free" "$scratch/full.out"
ok $? "full disk at a 4-rank checkpoint: status 1 (got $st), the space needed and free"
grep '^error' "$scratch/full.out" | diag
! grep -q "ckpt_10.h5 written" "$scratch/full.out" && [ ! -e "$mnt/run/ckpt_10.h5" ] && [ ! -e "$mnt/run/ckpt_10.h5.tmp" ]
ok $? "nothing claims ckpt_10 was written, and no ckpt_10 file is left"
verify "$mnt/run/ckpt_5.h5"
ok $? "the previous checkpoint ckpt_5.h5 is still there and verifies"
mkdir -p "$scratch/resume" && cp "$mnt/run/ckpt_5.h5" "$mnt/run/metrics.h5" "$scratch/resume/"
triad_run 4 "$deck" $common io.restart=auto io.run_dir="'$scratch/resume'"
[ $? -eq 0 ] && grep -q "restarted from $scratch/resume/ckpt_5.h5 at step 5" "$scratch/last.out" &&
    compare_runs "$scratch/resume" "$scratch/ref" 0 loss grad_norm > "$scratch/cmp.out"
ok $? "restarted from it elsewhere: every step's loss and grad norm bitwise equal to the uninterrupted run"
diag < "$scratch/cmp.out"
dd if=/dev/zero of="$mnt/fill" bs=4k > /dev/null 2>&1 # the rest of the disk
triad_run 4 "$deck" $common io.restart=auto io.run_dir="'$mnt/run'"
st=$?
[ $st -eq 1 ] && grep -q "restarted from $mnt/run/ckpt_5.h5 at step 5" "$scratch/last.out" &&
    grep -q "checkpoint at step 10 failed: not enough space" "$scratch/last.out"
ok $? "restart = 'auto' on a 100 % full disk reads ckpt_5.h5, then stops at the first checkpoint with the reason"
grep '^error' "$scratch/last.out" | diag
rm -f "$mnt/fill"

# 2. the same fault when a stop is asked for: the stop's checkpoint cannot be written
rm -rf "$mnt/run"
more="parallel.tp=2 train.steps=100000 io.checkpoint_every=400 io.keep_checkpoints=2 io.log_every=1000"
$MPIEXEC -n 4 "$TRIAD" "$deck" $more io.run_dir="'$mnt/run'" > "$scratch/stop.out" 2>&1 &
pid=$!
for i in $(seq 1 600); do [ -e "$mnt/run/ckpt_400.h5" ] && break; sleep 0.05; done
touch "$mnt/run/STOP"
wait $pid
st=$?
[ $st -eq 3 ] && grep -q "stopped without a checkpoint of step [0-9]*: the newest good one is $mnt/run/ckpt_400.h5" \
    "$scratch/stop.out"
ok $? "a stop whose checkpoint cannot be written: status 3 (got $st), naming ckpt_400.h5 to resume from"
grep '^error\|stopped without' "$scratch/stop.out" | diag
verify "$mnt/run/ckpt_400.h5"
ok $? "and ckpt_400.h5 verifies"
umount "$mnt"

# 4. metrics.h5 fills the disk (no checkpoints): a clean stop
mount -t tmpfs -o size=300k tmpfs "$mnt"
triad_run 2 "$deck" train.steps=20000 io.metrics_flush=1 io.log_every=5000 io.run_dir="'$mnt/run'"
st=$?
[ $st -eq 1 ] && grep -q "error: writing step [0-9]* to metrics.h5 failed (disk full?)" "$scratch/last.out" &&
    grep -q "stopping at step [0-9]* (metrics.h5 cannot be written)" "$scratch/last.out" &&
    ! grep -q "HDF5-DIAG" "$scratch/last.out"
ok $? "metrics.h5 on a full disk: status 1 (got $st), the reason once, no HDF5 error dump"
grep '^error' "$scratch/last.out" | head -3 | diag
rows=$("$PYTHON3" -c "import h5py,sys; print(len(h5py.File(sys.argv[1])['metrics/step'][:]))" "$mnt/run/metrics.h5" 2>&1)
[ "$rows" -gt 100 ] 2>/dev/null
ok $? "and metrics.h5 still opens, with $rows rows"
umount "$mnt"

# 5. a damaged metrics.h5 beside a good checkpoint: the restart goes on
mkdir -p "$scratch/dm" && cp "$scratch/ref/ckpt_15.h5" "$scratch/dm/" &&
    head -c 3000 "$scratch/ref/metrics.h5" > "$scratch/dm/metrics.h5"
triad_run 4 "$deck" $common io.restart=auto io.run_dir="'$scratch/dm'"
st=$?
[ $st -eq 0 ] && grep -q "warning: $scratch/dm/metrics.h5 could not be continued .*moved to $scratch/dm/metrics.h5.damaged.1" \
    "$scratch/last.out" && [ -f "$scratch/dm/metrics.h5.damaged.1" ] &&
    "$PYTHON3" -c "import h5py,sys; s=h5py.File(sys.argv[1])['metrics/step'][:]; sys.exit(not (list(s) == list(range(16, 21))))" \
        "$scratch/dm/metrics.h5"
ok $? "a damaged metrics.h5 is moved aside on restart (status $st) and a new one holds steps 16..20"

# 3. a stop at a checkpoint step: one checkpoint, written once
mkdir -p "$scratch/once" && touch "$scratch/once/STOP"
triad_run 4 "$deck" parallel.tp=2 train.steps=20 io.checkpoint_every=1 io.run_dir="'$scratch/once'"
st=$?
[ $st -eq 3 ] && [ "$(grep -c 'checkpoint .*ckpt_1.h5 written' "$scratch/last.out")" -eq 1 ] &&
    grep -q "stopping at step 1 (stop file); its checkpoint is written" "$scratch/last.out"
ok $? "a stop at a checkpoint step writes it once (status $st)"
done_testing
