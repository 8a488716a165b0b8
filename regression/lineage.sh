#!/bin/sh
# The run directory follows the run's lineage (run_dir/checkpoints.txt):
# 1. a new run in a directory that holds another run's output is refused with
#    the fix; with io.overwrite that output is moved aside, and the new run's
#    checkpoints are kept although the old run's had higher steps;
# 2. an explicit restart from an earlier checkpoint moves the later ones
#    aside (never deleted), and restart = 'auto' then resumes from the new
#    lineage, not from the abandoned later checkpoint; metrics.h5 holds each
#    step once.
# 3. One job per run directory (run_dir/triad.lock), with HDF5's file
#    locking off as sites set it: a second job is refused naming the first;
#    a lock left by a process that is gone is taken over.
. "$(dirname "$0")/lib.sh"
deck="$DECKS/tiny.nml"
common="train.steps=20 io.checkpoint_every=5 io.keep_checkpoints=3"
d="$scratch/run"
steps() { "$PYTHON3" -c "import h5py,sys; print(' '.join(str(x) for x in h5py.File(sys.argv[1])['metrics/step'][:]))" "$1"; }

triad_run 1 "$deck" $common io.run_dir="'$d'"
ok $? "a first run of 20 steps, a checkpoint every 5 (the last step writes none here)"
[ "$(grep -v '^#' "$d/checkpoints.txt" | tr '\n' ' ')" = "ckpt_5.h5 ckpt_10.h5 ckpt_15.h5 " ]
ok $? "checkpoints.txt lists the lineage, oldest first: $(grep -v '^#' "$d/checkpoints.txt" | tr '\n' ' ')"

# 1. a new run in the same directory
triad_run 1 "$deck" train.steps=6 io.checkpoint_every=5 io.run_dir="'$d'"
st=$?
[ $st -eq 1 ] && grep -q "io.run_dir = '$d' holds another run's output (metrics.h5 and 3 checkpoints)" "$scratch/last.out" &&
    grep -q "hint: continue it with io.restart = 'auto', choose another io.run_dir, or set io.overwrite = .true." \
        "$scratch/last.out" && [ -f "$d/ckpt_15.h5" ]
ok $? "a new run in it is refused (status $st) with the fix, and nothing is touched"
triad_run 1 "$deck" train.steps=6 io.checkpoint_every=5 io.save_final=.true. io.overwrite=.true. io.run_dir="'$d'"
st=$?
[ $st -eq 0 ] && [ -f "$d/superseded.1/ckpt_15.h5" ] && [ -f "$d/superseded.1/metrics.h5" ] &&
    [ -f "$d/ckpt_5.h5" ] && [ -f "$d/ckpt_6.h5" ] && [ "$(steps "$d/metrics.h5")" = "1 2 3 4 5 6" ]
ok $? "with io.overwrite the old output moves to superseded.1/; the new run keeps its ckpt_5 and ckpt_6"

# 2. an explicit restart from an earlier checkpoint of the lineage
e="$scratch/e"
triad_run 1 "$deck" $common io.run_dir="'$e'"
triad_run 1 "$deck" $common io.restart="'$e/ckpt_10.h5'" train.steps=12 io.run_dir="'$e'"
st=$?
[ $st -eq 0 ] && [ -f "$e/abandoned.1/ckpt_15.h5" ] && [ ! -e "$e/ckpt_15.h5" ] &&
    grep -q "ckpt_15.h5 is later than the restart's checkpoint: moved to $e/abandoned.1/" "$scratch/last.out"
ok $? "an explicit restart from ckpt_10 moves the later ckpt_15 aside into abandoned.1/ (status $st)"
triad_run 1 "$deck" $common io.restart=auto io.run_dir="'$e'"
st=$?
[ $st -eq 0 ] && grep -q "restarted from $e/ckpt_10.h5 at step 10" "$scratch/last.out"
ok $? "restart = 'auto' then resumes from the lineage's ckpt_10, not the abandoned ckpt_15 (status $st)"
[ "$(steps "$e/metrics.h5")" = "$(seq -s ' ' 1 20)" ]
ok $? "and metrics.h5 holds each of the 20 steps once"
triad_run 1 "$deck" $common io.run_dir="'$scratch/u'"
compare_runs "$e" "$scratch/u" 0 loss > /dev/null
ok $? "its losses are bitwise those of an uninterrupted run"
# 3. two jobs in one run directory, HDF5 file locking off
j="$scratch/j"
HDF5_USE_FILE_LOCKING=FALSE $MPIEXEC -n 1 "$TRIAD" "$deck" train.steps=1000000 \
    io.checkpoint_every=1000 io.log_every=100000 io.run_dir="'$j'" > "$scratch/first.out" 2>&1 &
pid=$!
for i in $(seq 1 600); do [ -e "$j/metrics.h5" ] && break; sleep 0.05; done
HDF5_USE_FILE_LOCKING=FALSE triad_run 1 "$deck" train.steps=20 io.restart=auto io.run_dir="'$j'"
st=$?
touch "$j/STOP"
wait $pid
st1=$?
[ $st -eq 1 ] && grep -q "io.run_dir = '$j' is in use by another job: pid [0-9]* on $(hostname)" "$scratch/last.out"
ok $? "a second job in a run directory in use is refused (status $st), naming the first; HDF5 locking off"
grep '^error' "$scratch/last.out" | diag
[ $st1 -eq 3 ] && [ ! -e "$j/triad.lock" ]
ok $? "the first job went on undisturbed, stopped cleanly (status $st1) and gave its lock back"
printf 'host %s pid 999999999 job - since 0\n' "$(hostname)" > "$j/triad.lock"
at=$(sed -n 's/^stopping at step \([0-9]*\).*/\1/p' "$scratch/first.out")
triad_run 1 "$deck" train.steps=$((at + 2)) io.restart=auto io.run_dir="'$j'"
st=$?
[ $st -eq 0 ] && grep -q "warning: took over $j/triad.lock of a process that is gone" "$scratch/last.out"
ok $? "a lock left by a process that is gone is taken over with a warning (status $st)"
# two jobs take over one stale lock at the same moment (an LD_PRELOAD shim: the other job's lock appears just as this
# one removes the stale one): this job is refused, the other's lock left as it was
shim="$scratch/lock_race.so"
if ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/regression/faults/lock_race.c" -ldl 2> "$scratch/cc.err"; then
    printf 'host %s pid 999999999 job - since 0\n' "$(hostname)" > "$j/triad.lock"
    other="host $(hostname) pid $$ job 4242 since 7"
    $MPIEXEC -n 1 -x LD_PRELOAD="$shim" -x TRIAD_FAULT_HOLDER="$other" "$TRIAD" "$deck" train.steps=$((at + 4)) \
        io.restart=auto io.run_dir="'$j'" > "$scratch/last.out" 2>&1
    st=$?
    grep '^error' "$scratch/last.out" | diag
    [ $st -eq 1 ] && grep -q "cannot take $j/triad.lock: another process took it meanwhile" "$scratch/last.out" &&
        [ "$(cat "$j/triad.lock")" = "$other" ] && [ -z "$(ls "$j" | grep stale)" ]
    ok $? "a stale lock another job takes over at the same moment: refused (status $st), the other's lock kept"
else
    skip "cannot build the LD_PRELOAD shim ($(head -1 "$scratch/cc.err"))"
fi
done_testing
