#!/bin/sh
# Checkpoint and restart: stopping cleanly (stop file, SIGUSR1, the time
# limit) and after SIGKILL, restart = 'auto' continuing bit for bit,
# corrupted and truncated
# checkpoints skipped, a failed write and a write stored wrongly (caught by
# the read-back) leaving the previous one intact,
# metrics.h5 continued without gaps, a checkpoint of another model refused
# (restarts on other grids and ZeRO stages: the regression cases restart_*).
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
common="model.n_layer=4 train.steps=30 train.batch_size=8 train.micro_batch_size=2 train.lr=3d-3 io.checkpoint_every=5 io.keep_checkpoints=3"
triad_run 2 "$deck" $common io.run_dir="'$scratch/ref'"
ok $? "uninterrupted reference (dp = 2, 30 steps)"

# 1. the stop file: stop after the first step with a checkpoint and status 3
mkdir -p "$scratch/a" && touch "$scratch/a/STOP"
triad_run 2 "$deck" $common io.run_dir="'$scratch/a'"
st=$?
[ $st -eq 3 ] && [ -f "$scratch/a/ckpt_1.h5" ] && [ ! -f "$scratch/a/STOP" ] && grep -q "stopping at step 1 (stop file)" "$scratch/last.out"
ok $? "a stop file stops all ranks at the next step with a checkpoint and exit status 3"
triad_run 2 "$deck" $common io.restart=auto io.run_dir="'$scratch/a'"
st=$?
[ $st -eq 0 ] && grep -q "restarted from $scratch/a/ckpt_1.h5 at step 1" "$scratch/last.out"
ok $? "restart = 'auto' resumes from it and finishes"
compare_runs "$scratch/a" "$scratch/ref" 0 loss grad_norm lr > /dev/null
ok $? "the resumed run is bitwise identical to the uninterrupted one; metrics.h5 has every step once"

# 2. SIGUSR1 to mpirun (forwarded to every rank) in the middle of a longer run
slow="model.n_layer=2 model.d_model=128 model.seq_len=64 model.vocab_size=256 train.steps=60 train.batch_size=16 train.micro_batch_size=4 io.checkpoint_every=1000"
triad_run 2 "$deck" $slow io.run_dir="'$scratch/sref'"
ok $? "uninterrupted reference of a slower run"
$MPIEXEC -n 2 "$TRIAD" "$deck" $slow io.run_dir="'$scratch/s'" > "$scratch/s.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 200 ] && ! grep -q "^step     10/" "$scratch/s.out" 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
kill -USR1 $pid
wait $pid
st=$?
[ $st -eq 3 ] && grep -q "stopping at step [0-9]* (signal)" "$scratch/s.out"
ok $? "SIGUSR1 mid-run: checkpoint and exit status 3 (got $st)"
triad_run 2 "$deck" $slow io.restart=auto io.run_dir="'$scratch/s'"
ok $? "restart after the signal"
compare_runs "$scratch/s" "$scratch/sref" 0 loss > /dev/null
ok $? "signal + restart: losses bitwise identical to the uninterrupted run"

# 2b. the time limit: io.max_seconds stops the run with a checkpoint, and a
# restart continues from it
triad_run 2 "$deck" $slow train.steps=1000000 io.max_seconds=2 io.run_dir="'$scratch/ms'"
st=$?
n=$(sed -n 's/.*stopping at step \([0-9]*\) (io.max_seconds reached).*/\1/p' "$scratch/last.out")
[ $st -eq 3 ] && [ -n "$n" ] && "$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$scratch/ms/ckpt_$n.h5" > /dev/null 2>&1
ok $? "io.max_seconds = 2: stopped at step ${n:-?} with a verified checkpoint, status 3 (got $st)"
triad_run 2 "$deck" $slow train.steps=$((${n:-0} + 3)) io.restart=auto io.run_dir="'$scratch/ms'"
[ $? -eq 0 ] && grep -q "restarted from $scratch/ms/ckpt_$n.h5 at step $n" "$scratch/last.out"
ok $? "restart = 'auto' continues from it"

# 3. SIGKILL: at most the steps since the last checkpoint are lost
$MPIEXEC -n 2 "$TRIAD" "$deck" $common io.run_dir="'$scratch/k'" > "$scratch/k.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 400 ] && [ ! -f "$scratch/k/ckpt_10.h5" ]; do sleep 0.02; i=$((i + 1)); done
pkill -KILL -P $pid 2>/dev/null; kill -KILL $pid 2>/dev/null   # the ranks (mpirun's children), then mpirun
wait $pid 2>/dev/null
triad_run 2 "$deck" $common io.restart=auto io.run_dir="'$scratch/k'"
st=$?
[ $st -eq 0 ] && grep -q "restarted from" "$scratch/last.out"
ok $? "after SIGKILL, restart = 'auto' resumes from the newest checkpoint"
compare_runs "$scratch/k" "$scratch/ref" 0 loss > /dev/null
ok $? "SIGKILL + restart: losses bitwise identical, no step missing or twice"

# 4. a corrupted and a truncated newest checkpoint are reported and skipped
mkdir -p "$scratch/c"
triad_run 2 "$deck" $common io.save_final=.true. io.run_dir="'$scratch/c'"   # keeps 20, 25, 30
# flip bytes in the middle of ckpt_30 (tensor data), truncate ckpt_25
"$PYTHON3" - "$scratch/c/ckpt_30.h5" "$scratch/c/ckpt_25.h5" <<'PY'
import sys, os
p = sys.argv[1]; n = os.path.getsize(p)
with open(p, "r+b") as f:
    f.seek(n // 2); b = f.read(64); f.seek(n // 2); f.write(bytes(x ^ 0x5A for x in b))
with open(sys.argv[2], "r+b") as f:
    f.truncate(os.path.getsize(sys.argv[2]) // 2)
PY
triad_run 2 "$deck" $common io.restart=auto io.run_dir="'$scratch/c'"
st=$?
grep -q "checkpoint $scratch/c/ckpt_30.h5 is unusable (checksum mismatch in" "$scratch/last.out"
ok $? "a corrupted checkpoint is reported with the dataset whose checksum fails"
grep -q "checkpoint $scratch/c/ckpt_25.h5 is unusable" "$scratch/last.out" && grep -q "restarted from $scratch/c/ckpt_20.h5 at step 20" "$scratch/last.out"
ok $? "a truncated one too; the previous good checkpoint (step 20) is used"
[ $st -eq 0 ] && compare_runs "$scratch/c" "$scratch/ref" 0 loss > /dev/null
ok $? "and the run still ends bitwise identical to the uninterrupted one"
# (the restart from step 20 moved the later, unusable ones aside: they are kept, not deleted)
[ -f "$scratch/c/abandoned.1/ckpt_25.h5" ] && [ -f "$scratch/c/abandoned.1/ckpt_30.h5" ] && [ ! -e "$scratch/c/ckpt_30.h5" ]
ok $? "the checkpoints later than the one resumed from are moved aside into abandoned.1/"
triad_run 1 "$deck" $common io.restart="'$scratch/c/abandoned.1/ckpt_30.h5'" io.run_dir="'$scratch/c2'"
[ $? -eq 1 ] && grep -q "checksum mismatch" "$scratch/last.out"
ok $? "an explicit restart from the corrupted file stops with the reason, status 1"

# 5. a failed write leaves the previous checkpoint intact and stops clearly
mkdir -p "$scratch/w/ckpt_10.h5.tmp"   # the temporary name cannot be created
triad_run 2 "$deck" $common io.run_dir="'$scratch/w'"
st=$?
[ $st -eq 1 ] && grep -q "checkpoint at step 10 failed: rank [0-9]*: cannot create" "$scratch/last.out" && \
    "$PYTHON3" -c "import h5py,sys; h5py.File(sys.argv[1])['model/wte']" "$scratch/w/ckpt_5.h5"
ok $? "a write failure stops with status 1 and the previous checkpoint still reads"

# 5b. a disk that reports a write as done and stores other bytes (an
# LD_PRELOAD shim flips a byte of every write into ckpt_10.h5.tmp): the
# read-back finds it before the rename; the previous checkpoint is kept
shim="$scratch/bad_write.so"
if ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/regression/faults/bad_write.c" -ldl 2> "$scratch/cc.err"; then
    LD_PRELOAD="$shim" TRIAD_FAULT_PATH=ckpt_10.h5.tmp triad_run 2 "$deck" $common io.run_dir="'$scratch/bw'"
    st=$?
    grep '^error\|hint' "$scratch/last.out" | diag
    [ $st -eq 1 ] && grep -q "checkpoint at step 10 failed: $scratch/bw/ckpt_10.h5.tmp does not read back as written (" \
        "$scratch/last.out" && grep -q "the newest good checkpoint, $scratch/bw/ckpt_5.h5, is intact" "$scratch/last.out" &&
        [ ! -e "$scratch/bw/ckpt_10.h5" ] && [ ! -e "$scratch/bw/ckpt_10.h5.tmp" ] &&
        "$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$scratch/bw/ckpt_5.h5" > /dev/null 2>&1
    ok $? "a write stored wrongly is caught by the read-back: status 1 (got $st), what failed named, ckpt_5.h5 kept and whole"
    triad_run 2 "$deck" $common io.restart=auto io.run_dir="'$scratch/bw'"
    [ $? -eq 0 ] && grep -q "restarted from $scratch/bw/ckpt_5.h5 at step 5" "$scratch/last.out" &&
        compare_runs "$scratch/bw" "$scratch/ref" 0 loss > /dev/null
    ok $? "restart = 'auto' resumes from ckpt_5.h5: losses bitwise equal to the uninterrupted run"
else
    skip "cannot build the LD_PRELOAD shim ($(head -1 "$scratch/cc.err"))"
    skip "(the restart after it)"
fi

# (resharding a checkpoint to other grids and ZeRO stages: the regression cases restart_*)

# 6. a checkpoint of another model is refused before any tensor is read, each difference named
c10="$scratch/ref/ckpt_30.h5"
[ -f "$c10" ] || c10=$(ls "$scratch"/ref/ckpt_*.h5 | tail -1)
triad_run 1 "$deck" model.n_layer=4 model.n_head=2 io.restart="'$c10'" io.run_dir="'$scratch/nh'"
[ $? -eq 1 ] && grep -q "restart from $c10: the checkpoint holds another model (&model: n_head = 2 here, 4 in the checkpoint)" "$scratch/last.out"
ok $? "a restart with another n_head (same tensor shapes) is refused, naming n_head"
triad_run 1 "$deck" model.n_layer=3 model.d_model=64 io.restart="'$c10'" io.run_dir="'$scratch/nl'"
[ $? -eq 1 ] && grep -q "n_layer = 3 here, 4 in the checkpoint; d_model = 64 here, 32 in the checkpoint" "$scratch/last.out"
ok $? "n_layer and d_model both differ: both are listed"
grep 'holds another' "$scratch/last.out" | diag
triad_run 1 "$deck" model.d_model=64 model.tie_embeddings=.false. io.restart=auto io.run_dir="'$scratch/ref'"
[ $? -eq 1 ] && grep -q "restart = 'auto': $scratch/ref/ckpt_[0-9]*.h5: the checkpoint holds another model (&model: .*d_model = 64 here, 32 in the checkpoint; tie_embeddings = .false. here, .true. in the checkpoint)" "$scratch/last.out" &&
    grep -q "hint: set the deck's &model as the checkpoint's to continue the run" "$scratch/last.out" &&
    ! grep -q "remove the broken checkpoints\|is unusable" "$scratch/last.out"
ok $? "restart = 'auto' with another &model names the deck's keys, not the checkpoints, as what is wrong"
grep 'holds another' "$scratch/last.out" | diag

# 7. a restart from another run's checkpoint into a directory with output of its own
triad_run 1 "$deck" train.steps=6 io.checkpoint_every=3 io.save_final=.true. io.run_dir="'$scratch/x'"
triad_run 1 "$deck" train.steps=6 io.checkpoint_every=3 train.seed=99 io.run_dir="'$scratch/y'"
sum6=$(cksum < "$scratch/x/ckpt_6.h5")
triad_run 1 "$deck" train.steps=9 io.checkpoint_every=3 io.restart="'$scratch/y/ckpt_3.h5'" io.run_dir="'$scratch/x'"
st=$?
[ $st -eq 1 ] && grep -q "io.restart = '$scratch/y/ckpt_3.h5' is not a checkpoint of io.run_dir = '$scratch/x', which holds another run's output (metrics.h5 and 2 checkpoints)" "$scratch/last.out" &&
    grep -q "hint: to continue that run use io.restart = 'auto'; to restart from this checkpoint here set io.overwrite = .true." "$scratch/last.out" &&
    [ "$(cksum < "$scratch/x/ckpt_6.h5")" = "$sum6" ] && [ "$(grep -v '^#' "$scratch/x/checkpoints.txt" | tr '\n' ' ')" = "ckpt_3.h5 ckpt_6.h5 " ]
ok $? "a restart from another run's checkpoint into a directory with output is refused (status $st), nothing touched"
triad_run 1 "$deck" train.steps=9 io.checkpoint_every=3 io.restart="'$scratch/y/ckpt_3.h5'" io.overwrite=.true. \
    io.save_final=.true. io.run_dir="'$scratch/x'"
st=$?
[ $st -eq 0 ] && [ "$(cksum < "$scratch/x/superseded.1/ckpt_6.h5")" = "$sum6" ] && [ -f "$scratch/x/superseded.1/metrics.h5" ] &&
    [ "$(grep -v '^#' "$scratch/x/checkpoints.txt" | tr '\n' ' ')" = "ckpt_6.h5 ckpt_9.h5 " ]
ok $? "with io.overwrite the directory's output moves to superseded.1/ and the restarted run goes on (status $st)"
# a job restarted from elsewhere, killed before its first checkpoint, then
# requeued with the same deck: its metrics.h5 alone is moved aside
mkdir -p "$scratch/rq" && cp "$scratch/x/metrics.h5" "$scratch/rq/"
triad_run 1 "$deck" train.steps=9 io.checkpoint_every=3 io.restart="'$scratch/y/ckpt_3.h5'" io.run_dir="'$scratch/rq'"
st=$?
[ $st -eq 0 ] && [ -f "$scratch/rq/superseded.1/metrics.h5" ] && [ -f "$scratch/rq/ckpt_6.h5" ] &&
    grep -q "$scratch/rq holds no checkpoint: its metrics.h5 moved to $scratch/rq/superseded.1/" "$scratch/last.out"
ok $? "a restart from elsewhere into a directory with no checkpoint (a requeue) goes on, its metrics.h5 moved aside"

# 8. a restart at or past train.steps
triad_run 1 "$deck" train.steps=2 train.warmup_steps=0 io.restart=auto io.save_final=.true. io.run_dir="'$scratch/x'"
st=$?
[ $st -eq 1 ] && grep -q "$scratch/x/ckpt_9.h5 is at step 9, past train.steps = 2: there is nothing to train" "$scratch/last.out" &&
    [ -f "$scratch/x/ckpt_9.h5" ] && [ "$(grep -v '^#' "$scratch/x/checkpoints.txt" | tr '\n' ' ')" = "ckpt_6.h5 ckpt_9.h5 " ]
ok $? "a restart past train.steps is refused (status $st), the directory untouched"
sum9=$(cksum < "$scratch/x/ckpt_9.h5")
triad_run 1 "$deck" train.steps=9 io.restart=auto io.save_final=.true. io.run_dir="'$scratch/x'"
st=$?
[ $st -eq 0 ] && grep -q "step 9 is train.steps: nothing to train" "$scratch/last.out" &&
    [ "$(cksum < "$scratch/x/ckpt_9.h5")" = "$sum9" ]
ok $? "a restart at train.steps trains nothing and leaves its checkpoint as it was (status $st)"

# 9. another batch size on restart: the samples go on from those consumed
# (lr = 0: each step's loss is its samples' mean loss under the same weights)
fixed="train.lr=0 train.min_lr=0 io.checkpoint_every=2"
triad_run 1 "$deck" train.steps=4 train.batch_size=4 $fixed io.run_dir="'$scratch/b4'"
triad_run 1 "$deck" train.steps=3 train.batch_size=8 $fixed io.restart="'$scratch/b4/ckpt_2.h5'" io.run_dir="'$scratch/b8'"
st=$?
"$PYTHON3" - "$scratch/b4/metrics.h5" "$scratch/b8/metrics.h5" > "$scratch/b8.cmp" 2>&1 << 'PY'
import sys, h5py
a = h5py.File(sys.argv[1])["metrics/loss"][:]
b = h5py.File(sys.argv[2])["metrics/loss"][:]
want = (a[2] + a[3]) / 2 # samples 8..15: steps 3 and 4 at batch 4
print(f"step 3 at batch 8: {b[0]:.9f}, the mean of steps 3 and 4 at batch 4: {want:.9f}")
sys.exit(0 if abs(b[0] - want) <= 1e-6 * abs(want) else 1)
PY
c=$?
diag < "$scratch/b8.cmp"
[ $st -eq 0 ] && [ $c -eq 0 ] &&
    grep -q "the deck feeds other data than $scratch/b4/ckpt_2.h5's run: train.batch_size = 8 (was 4); the run goes on from the samples it consumed" "$scratch/last.out"
ok $? "a restart with batch_size 8 after 2 steps of 4 trains on samples 8..15, neither repeated nor skipped, and says so"
done_testing
