#!/bin/sh
# io.async_checkpoint: checkpoints written by a background thread while
# training goes on.  The training is bitwise the same as with synchronous
# checkpoints and so is every checkpoint's content (tp 2 x dp 2 with ZeRO-1:
# column blocks and ZeRO slices written at their offsets; and under ZeRO-3); a restart from
# one continues bit for bit; SIGKILL at random points of a background write
# leaves the previous checkpoint usable (and the restart bitwise); a stop
# waits for the write in flight and seals it; a write
# stored wrongly is caught by the writer's read-back and the previous
# checkpoint is kept; a file not yet sealed fails tools/ckpt_info.py.
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
common="model.n_layer=4 train.steps=30 train.batch_size=8 train.micro_batch_size=2 train.lr=3d-3 io.checkpoint_every=5 io.keep_checkpoints=3"
grid="parallel.tp=2 parallel.zero_stage=1 io.save_final=.true."
verify() { "$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$1" > /dev/null 2>&1; }

# 1. the same run and the same files with synchronous and background checkpoints
triad_run 4 "$deck" $common $grid io.run_dir="'$scratch/sync'"
ok $? "reference with synchronous checkpoints (tp 2 x dp 2, ZeRO-1, 30 steps)"
triad_run 4 "$deck" $common $grid io.async_checkpoint=.true. io.run_dir="'$scratch/async'"
st=$?
[ $st -eq 0 ] && [ "$(grep -c 'written in the background and verified' "$scratch/last.out")" -eq 5 ] &&
    grep -q "ckpt_30.h5 written and verified" "$scratch/last.out"
ok $? "background checkpoints at steps 5 ... 25 are sealed and reported, the final one written at once (status $st)"
grep 'written in the background' "$scratch/last.out" | head -1 | diag
compare_runs "$scratch/async" "$scratch/sync" 0 loss grad_norm > /dev/null
ok $? "the losses and gradient norms are bitwise those of the run with synchronous checkpoints"
same=0
for s in 20 25; do
    h5diff "$scratch/async/ckpt_$s.h5" "$scratch/sync/ckpt_$s.h5" /model /model > /dev/null 2>&1 &&
        h5diff "$scratch/async/ckpt_$s.h5" "$scratch/sync/ckpt_$s.h5" /optim /optim > /dev/null 2>&1 &&
        verify "$scratch/async/ckpt_$s.h5" || same=1
done
ok $same "the background-written ckpt_20.h5 and ckpt_25.h5 hold the synchronous ones' tensors and checksums, and verify"
[ "$(ls "$scratch/async" | grep -c '^ckpt_.*\.h5$')" -eq 3 ] && ! ls "$scratch/async" | grep -q '\.tmp$'
ok $? "io.keep_checkpoints = 3 holds for background checkpoints; no temporary file is left"

# 1b. ZeRO-3 (pp 2 x dp 2): the parameters' slices are snapshot from the model's slice itself
z3="parallel.pp=2 parallel.zero_stage=3"
triad_run 4 "$deck" $common $z3 io.run_dir="'$scratch/z3sync'" &&
    triad_run 4 "$deck" $common $z3 io.async_checkpoint=.true. io.run_dir="'$scratch/z3async'" &&
    compare_runs "$scratch/z3async" "$scratch/z3sync" 0 loss grad_norm > /dev/null &&
    h5diff "$scratch/z3async/ckpt_25.h5" "$scratch/z3sync/ckpt_25.h5" /model /model > /dev/null 2>&1 &&
    h5diff "$scratch/z3async/ckpt_25.h5" "$scratch/z3sync/ckpt_25.h5" /optim /optim > /dev/null 2>&1 &&
    verify "$scratch/z3async/ckpt_25.h5"
ok $? "ZeRO-3 on pp 2 x dp 2: background checkpoints leave the training bitwise and hold the synchronous tensors"

# 2. a restart from a background-written checkpoint continues bit for bit
mkdir -p "$scratch/r" && cp "$scratch/async/ckpt_20.h5" "$scratch/r/"
triad_run 4 "$deck" $common $grid io.async_checkpoint=.true. io.restart="'$scratch/r/ckpt_20.h5'" io.run_dir="'$scratch/r'"
[ $? -eq 0 ] && grep -q "restarted from $scratch/r/ckpt_20.h5 at step 20" "$scratch/last.out" &&
    h5diff "$scratch/r/ckpt_30.h5" "$scratch/sync/ckpt_30.h5" /model /model > /dev/null 2>&1
ok $? "restart from the background-written ckpt_20.h5: the same final model as the uninterrupted run"

# 3. SIGKILL inside a background write (diag.slow_checkpoint stretches it to
# 2 s): the ranks are the children of this test's own mpirun
kdeck="$common parallel.zero_stage=1 io.async_checkpoint=.true. diag.slow_checkpoint=2"
triad_run 2 "$deck" $common parallel.zero_stage=1 io.run_dir="'$scratch/kref'"
ok $? "uninterrupted reference for the kill test (dp 2, ZeRO-1)"
seed=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
for k in 1 2 3; do
    dir="$scratch/kill$k"
    delay=$(awk -v s="$seed" -v k="$k" 'BEGIN { srand(s + k); printf "%.2f", rand() * 1.9 }')
    $MPIEXEC -n 2 "$TRIAD" "$deck" $kdeck io.run_dir="'$dir'" > "$scratch/kill$k.out" 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 600 ] && [ ! -e "$dir/ckpt_10.h5.tmp" ]; do sleep 0.05; i=$((i + 1)); done
    sleep "$delay"
    pkill -KILL -P $pid 2>/dev/null; kill -KILL $pid 2>/dev/null
    wait $pid 2>/dev/null
    left=$(ls "$dir" | grep '^ckpt_' | tr '\n' ' ')
    echo "kill $k: ${delay} s into the write of ckpt_10; left: $left" | diag
    [ $i -lt 600 ] && verify "$dir/ckpt_5.h5" && { [ ! -e "$dir/ckpt_10.h5" ] || verify "$dir/ckpt_10.h5"; }
    ok $? "SIGKILL $delay s into the background write of ckpt_10: ckpt_5.h5 verifies (and ckpt_10.h5 only if whole)"
    triad_run 2 "$deck" $common parallel.zero_stage=1 io.async_checkpoint=.true. io.restart=auto io.run_dir="'$dir'"
    [ $? -eq 0 ] && grep -q "restarted from $dir/ckpt_[0-9]*.h5 at step" "$scratch/last.out" &&
        compare_runs "$dir" "$scratch/kref" 0 loss > /dev/null
    ok $? "restart = 'auto' after it: losses bitwise equal to the uninterrupted run"
done

# 3b. a stop (the stop file) while a background write is in flight: the run
# waits for it, seals it, writes the stop's own checkpoint and ends with 3
dir="$scratch/stop"
$MPIEXEC -n 2 "$TRIAD" "$deck" $kdeck io.run_dir="'$dir'" > "$scratch/stop.out" 2>&1 &
pid=$!
i=0
while [ $i -lt 600 ] && [ ! -e "$dir/ckpt_5.h5.tmp" ]; do sleep 0.05; i=$((i + 1)); done
touch "$dir/STOP"
wait $pid
st=$?
grep 'stopping\|background' "$scratch/stop.out" | diag
s=$(sed -n 's/.*stopping at step \([0-9]*\) (stop file).*/\1/p' "$scratch/stop.out")
[ $st -eq 3 ] && [ -n "$s" ] && grep -q "ckpt_5.h5 written in the background and verified" "$scratch/stop.out" &&
    verify "$dir/ckpt_5.h5" && verify "$dir/ckpt_$s.h5"
ok $? "a stop during a background write: it is sealed (ckpt_5.h5), the stop's ckpt_$s.h5 written, status 3 (got $st)"
triad_run 2 "$deck" $common parallel.zero_stage=1 io.async_checkpoint=.true. io.restart=auto io.run_dir="'$dir'"
[ $? -eq 0 ] && grep -q "restarted from $dir/ckpt_$s.h5 at step $s" "$scratch/last.out" &&
    compare_runs "$dir" "$scratch/kref" 0 loss > /dev/null
ok $? "restart = 'auto' resumes from ckpt_$s.h5: losses bitwise equal to the uninterrupted run"

# 3c. a wait for a long background write is not a hang while the writers
# make progress (diag.hang_timeout = 2 s; the write of ckpt_5 takes 6 s, and
# the checkpoint of step 10 waits for it), on every rank: without ZeRO the
# second dp rank has nothing to write and waits for the first
triad_run 2 "$deck" $common io.async_checkpoint=.true. diag.slow_checkpoint=6 \
    diag.hang_timeout=2 train.steps=12 io.run_dir="'$scratch/long'"
st=$?
[ $st -eq 0 ] && grep -q "ckpt_5.h5 written in the background and verified: .* [3-9][0-9.]* s waiting for the writer" \
    "$scratch/last.out" && ! grep -q "the job hung\|: hang:" "$scratch/last.out"
ok $? "waiting 6 s for a background write that advances, with diag.hang_timeout = 2: no hang report (status $st)"

# 3d. a file of a background write not yet sealed (its datasets made, no
# checksum stored yet: a copy of the .tmp, or one renamed by hand) is not
# passed by tools/ckpt_info.py, with or without --verify
cp "$scratch/long/ckpt_5.h5" "$scratch/unsealed.h5" && "$PYTHON3" - "$scratch/unsealed.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f.visititems(lambda n, o: o.attrs.__delitem__("checksum") if isinstance(o, h5py.Dataset) else None)
PY
"$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$scratch/unsealed.h5" > "$scratch/unsealed.out" 2>&1
st=$?
"$PYTHON3" "$top_srcdir/tools/ckpt_info.py" "$scratch/unsealed.h5" > /dev/null 2>&1
st2=$?
tail -1 "$scratch/unsealed.out" | diag
[ $st -eq 1 ] && [ $st2 -eq 1 ] && grep -q "carry no checksum .*never sealed" "$scratch/unsealed.out"
ok $? "an unsealed background checkpoint fails tools/ckpt_info.py (--verify: $st, without: $st2), saying so"

# 4. a disk that stores other bytes than it was given (the LD_PRELOAD shim
# of restart.sh): the writer's read-back catches it before the rename
shim="$scratch/bad_write.so"
if ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/regression/faults/bad_write.c" -ldl 2> "$scratch/cc.err"; then
    LD_PRELOAD="$shim" TRIAD_FAULT_PATH=ckpt_10.h5.tmp triad_run 2 "$deck" $common io.async_checkpoint=.true. \
        io.run_dir="'$scratch/bw'"
    st=$?
    grep '^error\|hint' "$scratch/last.out" | diag
    [ $st -eq 1 ] && grep -q "checkpoint at step 10 failed: rank [01]: $scratch/bw/ckpt_10.h5.tmp does not read back as written (" \
        "$scratch/last.out" && grep -q "the newest good checkpoint, $scratch/bw/ckpt_5.h5, is intact" "$scratch/last.out" &&
        [ ! -e "$scratch/bw/ckpt_10.h5" ] && [ ! -e "$scratch/bw/ckpt_10.h5.tmp" ] && verify "$scratch/bw/ckpt_5.h5"
    ok $? "a background write stored wrongly is caught by its read-back: status 1 (got $st), ckpt_5.h5 kept and whole"
else
    skip "cannot build the LD_PRELOAD shim ($(head -1 "$scratch/cc.err"))"
fi

done_testing
