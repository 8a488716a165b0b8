#!/bin/sh
# One rank's reads or writes of io.run_dir failing, the others' still good
# (a node's mount failing: an LD_PRELOAD shim, regression/faults/eio_rank.c,
# makes that rank's writes into, or reads from, a checkpoint fail with
# EIO).  HDF5 1.10's collective close of a file whose writes failed on some
# ranks leaves the ranks at different points of its metadata flush: it
# hangs.  triad has rank 0 alone write a checkpoint's metadata, and leaves
# a file a write into which failed open.
# 1. Rank 0's writes fail (the data's): the file is left open and the job
#    ends through MPI_Abort, status 1 in seconds (it hung before), the
#    failing write named, ckpt_5.h5 intact and verified, nothing of the
#    failed file left (MPI-IO's own files beside it too), the run
#    directory's lock given back (MPI_Abort runs no exit handlers);
#    metrics.h5 readable with every row up to the failing step (flushed
#    before each checkpoint, io.metrics_flush past it).
# 2. restart = 'auto' in the same folder resumes from ckpt_5.h5, without a
#    warning, and ends with the uninterrupted run's losses bitwise.
# 3. Rank 1's writes fail where it writes nothing (dp 2: rank 0 writes the
#    data and the metadata): the checkpoints are written (it hung before;
#    that the shim fails rank 1's writes, 4 shows).
# 4. Rank 1's writes fail where it writes its shard (tp 2), synchronous and
#    in the background: status 1, rank 1's write named.
# 5. A stop (the stop file) whose checkpoint meets rank 0's failing writes,
#    with an earlier good checkpoint: status 3 through MPI_Abort's code (a
#    requeued job resumes from the earlier one).
# 6. Rank 0's writes fail in a background checkpoint's layout, whose
#    metadata only HDF5 writes, which triad cannot see: the hang watchdog
#    ends the job (status 4), its report naming HDF5's writing of a
#    checkpoint (an HDF5 whose rank 0 reports the failure instead: status 1).
# 7. Rank 1 cannot read the newest checkpoint (restart = 'auto', and
#    io.restart naming it): status 1, the rank and the error named, the file
#    said to be perhaps intact, no earlier checkpoint taken instead and
#    nothing in io.run_dir changed (it said "truncated or damaged" or "is
#    missing" and advised removing the checkpoints, and 'auto' fell back to
#    an earlier one, moving the newer aside).
# 8. A data shard truncated under the run (by another program), which the
#    run reads through a mapping: status 1, the file named as having lost
#    bytes under the run (the kernel's SIGBUS was Open MPI's "Bus error"
#    with a backtrace, status 135).
# 9. Rank 0's writes into metrics.h5 fail (the folder still takes writes):
#    the run stops with its checkpoint and status 1, through MPI_Abort
#    (HDF5 1.10's own close of the half-flushed file in MPI_Finalize
#    crashed: status 139); restart = 'auto' moves the damaged file aside and
#    finishes.
. "$(dirname "$0")/lib.sh"
deck="$DECKS/tiny.nml"
common="train.steps=20 io.checkpoint_every=5 io.metrics_flush=100"
verify() { "$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$1" > "$scratch/verify.out" 2>&1; }
shim="$scratch/eio_rank.so"
if ! ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/regression/faults/eio_rank.c" -ldl 2> "$scratch/cc.err"; then
    skip "cannot build the LD_PRELOAD shim ($(head -n 1 "$scratch/cc.err"))"
    done_testing
fi
# failing OPS RANK FILE OUT ARGS...: triad on 2 ranks, RANK's OPS (read or write) of FILE failing; the status (124: a
# hang); $scratch/mark made by the first failure
failing() {
    ops=$1 r=$2 file=$3 out=$4
    shift 4
    rm -f "$scratch/mark"
    LD_PRELOAD="$shim" TRIAD_FAULT_OPS=$ops TRIAD_FAULT_PATH=$file TRIAD_FAULT_RANK=$r TRIAD_FAULT_MARK="$scratch/mark" \
        timeout 120 $MPIEXEC -n 2 "$TRIAD" "$deck" $common "$@" > "$out" 2>&1
}
triad_run 2 "$deck" $common parallel.dp=2 io.run_dir="'$scratch/ref'"
ok $? "the uninterrupted run"

# 1. rank 0's writes fail
failing write 0 ckpt_10.h5.tmp "$scratch/r0.out" parallel.dp=2 io.run_dir="'$scratch/run'"
st=$?
grep "^error\|hint\|MPI_ABORT" "$scratch/r0.out" | diag
ls "$scratch/run" | diag
[ $st -eq 1 ] && [ -f "$scratch/mark" ] &&
    grep -q "^error: checkpoint at step 10 failed: rank 0: writing /[a-z0-9_./]* failed" "$scratch/r0.out" &&
    grep -q "the newest good checkpoint, $scratch/run/ckpt_5.h5, is intact and restart = 'auto' resumes from it" \
        "$scratch/r0.out" &&
    verify "$scratch/run/ckpt_5.h5" && [ -z "$(ls "$scratch/run" | grep ckpt_10)" ] && [ ! -e "$scratch/run/triad.lock" ]
ok $? "rank 0's writes into ckpt_10 fail: status 1 (got $st; 124 is a hang), the write named, ckpt_5.h5 verifies, nothing of ckpt_10 left, the run's lock given back"
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
ok $st "restart = 'auto' in the same folder resumes from ckpt_5.h5 without a warning, the losses the uninterrupted run's bitwise"

# 3. rank 1's writes fail where it has nothing to write
for a in false true; do
    failing write 1 ckpt_10.h5.tmp "$scratch/r1.out" parallel.dp=2 io.async_checkpoint=.$a. io.run_dir="'$scratch/r1$a'"
    st=$?
    grep "^error\|blocked" "$scratch/r1.out" | diag
    [ $st -eq 0 ] && grep -q "checkpoint $scratch/r1$a/ckpt_10.h5 written \(in the background \)\?and verified" "$scratch/r1.out"
    ok $? "dp 2, async_checkpoint $a: rank 1, which writes nothing of a checkpoint, cannot write: ckpt_10 written and verified (status $st; 124 is a hang)"
done

# 4. rank 1's writes fail where it writes its shard
for a in false true; do
    failing write 1 ckpt_10.h5.tmp "$scratch/r1.out" parallel.tp=2 io.async_checkpoint=.$a. io.run_dir="'$scratch/tp$a'"
    st=$?
    grep "^error\|blocked" "$scratch/r1.out" | diag
    [ $st -eq 1 ] && [ -f "$scratch/mark" ] &&
        grep -q "^error: checkpoint at step 10 failed: rank 1: writing /model/h\.[0-9.a-z_/]* .*failed" "$scratch/r1.out" &&
        verify "$scratch/tp$a/ckpt_5.h5"
    ok $? "tp 2, async_checkpoint $a: rank 1's writes of its shard fail: status 1 (got $st), its write named, ckpt_5.h5 verifies"
done

# 5. a stop whose checkpoint fails, with an earlier good one: status 3
triad_run 2 "$deck" $common parallel.dp=2 train.steps=7 io.run_dir="'$scratch/stop'" && touch "$scratch/stop/STOP" &&
    failing write 0 ckpt_6.h5.tmp "$scratch/stop.out" parallel.dp=2 io.restart=auto io.run_dir="'$scratch/stop'"
st=$?
grep "^error\|stopp\|status" "$scratch/stop.out" | diag
[ $st -eq 3 ] && [ -f "$scratch/mark" ] && grep -q "^error: checkpoint at step 6 failed: rank 0: writing" "$scratch/stop.out" &&
    grep -q "the newest good one is $scratch/stop/ckpt_5.h5, which a requeued job resumes from (status 3)" "$scratch/stop.out" &&
    verify "$scratch/stop/ckpt_5.h5"
ok $? "a stop's checkpoint meets rank 0's failing writes: status 3 through MPI_Abort (got $st), ckpt_5.h5 named and verified"

# 6. rank 0's writes fail in a background checkpoint's layout: inside HDF5
failing write 0 ckpt_10.h5.tmp "$scratch/lay.out" parallel.dp=2 io.async_checkpoint=.true. diag.hang_timeout=5 \
    io.run_dir="'$scratch/lay'"
st=$?
grep "blocked in\|^error" "$scratch/lay.out" | diag
{ { [ $st -eq 4 ] && grep -q "^blocked in: HDF5's writing of a checkpoint" "$scratch/lay/hang.rank00000.txt" &&
    grep -q "^blocked in: HDF5's writing of a checkpoint" "$scratch/lay/hang.rank00001.txt"; } ||
    { [ $st -eq 1 ] && grep -q "^error: checkpoint at step 10 failed" "$scratch/lay.out"; }; } && verify "$scratch/lay/ckpt_5.h5"
ok $? "rank 0's writes fail inside HDF5 in a layout: the watchdog ends it naming HDF5's writing (status 4, got $st; or 1 where HDF5 says so), ckpt_5.h5 verifies"

# 7. rank 1 cannot read the newest checkpoint (ckpt_15.h5 of the uninterrupted run's folder, copied)
cp -r "$scratch/ref" "$scratch/rd" && before=$(ls -l "$scratch/rd")
failing read 1 ckpt_15.h5 "$scratch/rd.out" parallel.dp=2 train.steps=25 io.restart=auto io.run_dir="'$scratch/rd'"
st=$?
grep "error\|hint\|warning" "$scratch/rd.out" | diag # (not at a line's start: rank 0's deck on stdout may share its line)
[ $st -eq 1 ] && [ -f "$scratch/mark" ] &&
    grep -q "error: restart = 'auto': .*rank 1 cannot read $scratch/rd/ckpt_15.h5: Input/output error; the file itself may be intact" "$scratch/rd.out" &&
    grep -q "hint: check io.run_dir's file system from that rank's node, then restart: nothing in io.run_dir was changed" "$scratch/rd.out" &&
    ! grep -q "warning\|damaged\|remove the broken" "$scratch/rd.out" && [ "$(ls -l "$scratch/rd")" = "$before" ]
ok $? "restart = 'auto', rank 1 cannot read ckpt_15.h5: status 1 (got $st), the rank and EIO named, no earlier one taken, io.run_dir as it was"
failing read 1 ckpt_15.h5 "$scratch/rd.out" parallel.dp=2 train.steps=25 io.restart="'$scratch/rd/ckpt_15.h5'" \
    io.run_dir="'$scratch/rd2'"
st=$?
grep "^error\|hint" "$scratch/rd.out" | diag
[ $st -eq 1 ] && grep -q "rank 1 cannot read $scratch/rd/ckpt_15.h5: Input/output error; the file itself may be intact" "$scratch/rd.out" &&
    grep -q "hint: check the file system from that rank's node, then restart" "$scratch/rd.out"
ok $? "io.restart naming it: status 1 (got $st), the same words"

# 8. a data shard truncated under the run
mkdir -p "$scratch/data" && head -c 1500000 /dev/urandom | od -An -tx1 > "$scratch/data/book.txt" &&
    "$PYTHON3" "$top_srcdir/tools/make_tokens.py" "$scratch/data/book.txt" "$scratch/data/book" > /dev/null
timeout 120 $MPIEXEC -n 2 "$TRIAD" "$deck" parallel.dp=2 model.vocab_size=256 data.kind=tokens \
    data.path="'$scratch/data/book_000000.bin'" train.steps=400 diag.slow_rank=0 diag.slow_seconds=0.05 \
    io.run_dir="'$scratch/trunc'" > "$scratch/trunc.out" 2>&1 &
pid=$!
for i in $(seq 1 2400); do grep -q "^step  *3/" "$scratch/trunc.out" && break; sleep 0.05; done
truncate -s 2048 "$scratch/data/book_000000.bin"
wait $pid
st=$?
grep "^error\|hint\|Bus error" "$scratch/trunc.out" | diag
[ $st -eq 1 ] &&
    grep -q "^error: rank [01]: the file $scratch/data/book_000000.bin, mapped as it was opened ([0-9]* bytes), lost bytes under the run" "$scratch/trunc.out" &&
    ! grep -q "Bus error" "$scratch/trunc.out"
ok $? "a data shard truncated under the run: status 1 (got $st; 135 was a bus error), the file named"

# 9. rank 0's writes into metrics.h5 fail
failing write 0 metrics.h5 "$scratch/mw.out" parallel.dp=2 io.metrics_flush=5 io.run_dir="'$scratch/mw'"
st=$?
grep "error\|hint\|Segmentation\|signal" "$scratch/mw.out" | diag
[ $st -eq 1 ] && [ -f "$scratch/mark" ] && grep -q "step 5 to metrics.h5 failed; the rows flushed before are kept" "$scratch/mw.out" &&
    grep -q "the checkpoint of step 5 is written" "$scratch/mw.out" && ! grep -q "Segmentation\|signal 11" "$scratch/mw.out" &&
    verify "$scratch/mw/ckpt_5.h5"
ok $? "rank 0's writes into metrics.h5 fail: status 1 (got $st; 139 was HDF5's crash), the checkpoint of step 5 written and verified"
triad_run 2 "$deck" $common parallel.dp=2 io.restart=auto io.run_dir="'$scratch/mw'"
[ $? -eq 0 ] && grep -q "metrics.h5 could not be continued .* moved to" "$scratch/last.out" &&
    grep -q "restarted from $scratch/mw/ckpt_5.h5 at step 5" "$scratch/last.out"
ok $? "restart = 'auto' moves the damaged metrics.h5 aside and finishes"
done_testing
