#!/bin/sh
# A checkpoint's writes failing on one rank only, the folder still taking
# writes elsewhere (a node's mount of io.run_dir failing: an LD_PRELOAD
# shim, regression/faults/eio_rank.c, makes that rank's writes into the
# checkpoint fail with EIO).  HDF5 1.10's collective close of a file whose
# writes failed on some ranks leaves the ranks at different points of its
# metadata flush: it hangs.  triad has rank 0 alone write the checkpoint's
# metadata, and leaves a file whose writes failed open.
# 1. Rank 0's writes fail (the data's, which triad sees): the file is left
#    open and the job ends through MPI_Abort, status 1 in seconds (it hung
#    before), the failing write named, ckpt_5.h5 intact and verified, the
#    run directory's lock given back (MPI_Abort runs no exit handlers);
#    metrics.h5 readable with every row up to the failing step (flushed
#    before each checkpoint, io.metrics_flush past it: MPI_Abort runs no
#    clean-up).
# 2. restart = 'auto' in the same folder resumes from ckpt_5.h5, without a
#    warning, and ends with the uninterrupted run's losses bitwise.
# 3. Rank 1's writes fail where it writes nothing (dp 2: rank 0 writes the
#    data and the metadata): the checkpoints are written (it hung before).
# 4. Rank 1's writes fail where it writes its shard (tp 2), synchronous and
#    in the background: status 1, rank 1's write named.
# 5. Rank 0's writes fail in a background checkpoint's layout, whose
#    metadata only HDF5's close writes, which triad cannot see: the hang
#    watchdog ends the job (status 4) and its report names that close.
. "$(dirname "$0")/lib.sh"
deck="$DECKS/tiny.nml"
common="train.steps=20 io.checkpoint_every=5 io.metrics_flush=100"
verify() { "$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$1" > "$scratch/verify.out" 2>&1; }
shim="$scratch/eio_rank.so"
if ! ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/regression/faults/eio_rank.c" -ldl 2> "$scratch/cc.err"; then
    skip "cannot build the LD_PRELOAD shim ($(head -n 1 "$scratch/cc.err"))"
    done_testing
fi
# failing RANK OUT ARGS...: triad on 2 ranks, RANK's writes into ckpt_10.h5.tmp failing; the status (124: a hang)
failing() {
    r=$1 out=$2
    shift 2
    LD_PRELOAD="$shim" TRIAD_FAULT_PATH=ckpt_10.h5.tmp TRIAD_FAULT_RANK=$r \
        timeout 120 $MPIEXEC -n 2 "$TRIAD" "$deck" $common "$@" > "$out" 2>&1
}
triad_run 2 "$deck" $common parallel.dp=2 io.run_dir="'$scratch/ref'"
ok $? "the uninterrupted run"

# 1. rank 0's writes fail
failing 0 "$scratch/r0.out" parallel.dp=2 io.run_dir="'$scratch/run'"
st=$?
grep "^error\|hint\|MPI_ABORT" "$scratch/r0.out" | diag
[ $st -eq 1 ] &&
    grep -q "^error: checkpoint at step 10 failed: rank 0: writing /[a-z0-9_./]* failed" "$scratch/r0.out" &&
    grep -q "the newest good checkpoint, $scratch/run/ckpt_5.h5, is intact and restart = 'auto' resumes from it" \
        "$scratch/r0.out" &&
    verify "$scratch/run/ckpt_5.h5" && [ ! -e "$scratch/run/ckpt_10.h5" ] && [ ! -e "$scratch/run/triad.lock" ]
ok $? "rank 0's writes into ckpt_10 fail: status 1 (got $st; 124 is a hang), the write named, ckpt_5.h5 verifies, the run's lock given back"
"$PYTHON3" - "$scratch/run/metrics.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    steps = list(f["metrics/step"][:])
print("# metrics.h5 steps", steps)
sys.exit(int(steps != list(range(1, 11))))
PY
ok $? "metrics.h5 reads, with the rows of steps 1-10 (flushed before the checkpoint)"

# 2. the restart in the same folder
triad_run 2 "$deck" $common parallel.dp=2 io.restart=auto io.run_dir="'$scratch/run'"
[ $? -eq 0 ] && grep -q "restarted from $scratch/run/ckpt_5.h5 at step 5" "$scratch/last.out" &&
    ! grep -q "warning" "$scratch/last.out" &&
    compare_runs "$scratch/ref" "$scratch/run" 0 loss grad_norm > "$scratch/cmp.out" 2>&1
st=$?
diag < "$scratch/cmp.out"
ok $st "restart = 'auto' in the same folder resumes from ckpt_5.h5, the losses the uninterrupted run's bitwise"

# 3. rank 1's writes fail where it has nothing to write
for a in false true; do
    failing 1 "$scratch/r1.out" parallel.dp=2 io.async_checkpoint=.$a. io.run_dir="'$scratch/r1$a'"
    st=$?
    grep "^error\|blocked" "$scratch/r1.out" | diag
    [ $st -eq 0 ] && grep -q "checkpoint $scratch/r1$a/ckpt_10.h5 written \(in the background \)\?and verified" "$scratch/r1.out"
    ok $? "dp 2, async_checkpoint $a: rank 1, which writes nothing of a checkpoint, cannot write: ckpt_10 written and verified (status $st; 124 is a hang)"
done

# 4. rank 1's writes fail where it writes its shard
for a in false true; do
    failing 1 "$scratch/r1.out" parallel.tp=2 io.async_checkpoint=.$a. io.run_dir="'$scratch/tp$a'"
    st=$?
    grep "^error\|blocked" "$scratch/r1.out" | diag
    [ $st -eq 1 ] && grep -q "^error: checkpoint at step 10 failed: rank 1: writing /model/h\.[0-9.a-z_/]* .*failed" "$scratch/r1.out" &&
        verify "$scratch/tp$a/ckpt_5.h5"
    ok $? "tp 2, async_checkpoint $a: rank 1's writes of its shard fail: status 1 (got $st), its write named, ckpt_5.h5 verifies"
done

# 5. rank 0's writes fail in a background checkpoint's layout: inside HDF5's close
failing 0 "$scratch/lay.out" parallel.dp=2 io.async_checkpoint=.true. diag.hang_timeout=3 io.run_dir="'$scratch/lay'"
st=$?
grep "blocked in" "$scratch/lay.out" | diag
[ $st -eq 4 ] && grep -q "^blocked in: HDF5's collective close of a checkpoint being written" "$scratch/lay/hang.rank00000.txt" &&
    grep -q "^blocked in: HDF5's collective close of a checkpoint being written" "$scratch/lay/hang.rank00001.txt" &&
    verify "$scratch/lay/ckpt_5.h5"
ok $? "rank 0's writes fail inside HDF5's close of a layout: the watchdog ends it (status 4, got $st), the close named; ckpt_5.h5 verifies"
done_testing
