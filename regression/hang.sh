#!/bin/sh
# The hang watchdog (diag.hang_timeout): one rank of 4 frozen (SIGSTOP to a
# child of this test's own mpirun) mid-run; the job ends within the timeout
# and a few seconds with status 4; each live rank's report
# (run_dir/hang.rank<R>.txt) says where it is blocked (communicator,
# operation) and lists its last communication calls; the summary on stderr
# names the frozen rank as the one that stopped making progress.  A run
# with a short timeout and no fault ends normally; a wait for a pipeline
# message names its peer and tag.  An evaluation longer than the timeout
# is no hang (each held-out batch is progress), and a rank frozen inside
# one is still caught.
. "$(dirname "$0")/lib.sh"
# (the kill sequence users get, not lib.sh's none: the frozen rank is sent
# SIGCONT and SIGTERM a second apart once the others have exited)
export OMPI_MCA_odls_base_sigkill_timeout=1

deck="$DECKS/tiny.nml"
run="parallel.pp=2 train.micro_batch_size=2 diag.hang_timeout=3"
wait_for_step() { # LOG STEP: poll until LOG shows the step, 60 s at most
    _t=0
    while [ $_t -lt 600 ] && ! grep -q "^step  *$2/" "$1" 2> /dev/null; do sleep 0.1; _t=$((_t + 1)); done
}

triad_run 4 "$deck" $run train.steps=40 io.run_dir="'$scratch/ok'"
st=$?
[ $st -eq 0 ] && [ ! -e "$scratch/ok/hang.rank00000.txt" ]
ok $? "no fault, diag.hang_timeout = 3 s: the run ends normally (status $st), no report"

$MPIEXEC -n 4 "$TRIAD" "$deck" $run train.steps=1000000 io.run_dir="'$scratch/h'" > "$scratch/h.out" 2>&1 &
mp=$!
wait_for_step "$scratch/h.out" 20
victim=$(pgrep -P "$mp" | sed -n 3p)
vrank=$([ -n "$victim" ] && tr '\0' '\n' < "/proc/$victim/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
t0=$(date +%s)
[ -n "$victim" ] && kill -STOP "$victim"
wait "$mp"
st=$?
dt=$(($(date +%s) - t0))
[ -n "$victim" ] && kill -CONT "$victim" 2> /dev/null
[ $st -eq 4 ] && [ $dt -le 20 ]
ok $? "a rank frozen mid-run: the job ends in $dt s (timeout 3 s) with status 4 (got $st)"
n=$(ls "$scratch/h"/hang.rank*.txt 2> /dev/null | wc -l)
[ "$n" -ge 3 ] && grep -q "^blocked in: " "$scratch/h/hang.rank00000.txt" &&
    grep -q "communication calls it finished" "$scratch/h/hang.rank00000.txt"
ok $? "the live ranks wrote where they are blocked and their last calls ($n reports: the frozen one may add its own once mpirun sends it SIGCONT to end it)"
head -n 5 "$scratch/h/hang.rank00000.txt" | diag
frozen=$(grep -o "the rank(s) that stopped making progress: [0-9, ]*" "$scratch/h.out" | sed 's/.*: //')
grep -q "the job hung (diag.hang_timeout = 3 s)" "$scratch/h.out" && [ -n "$frozen" ] && [ "$frozen" = "$vrank" ]
ok $? "the summary names the frozen rank as the one that stopped making progress (rank ${frozen:-none}; frozen: ${vrank:-?})"
grep "rank .*: " "$scratch/h.out" | grep -v "^step" | head -n 8 | diag

# A rank that is slow, not frozen: stage 0 sleeps 8 s before its step, so
# stage 1 waits for its activations in a point-to-point receive.  Both
# report (rank 0: its step has not finished), so no rank is named as
# stopped, and rank 1's report names the message it waits for.
triad_run 2 "$deck" $run train.steps=3 diag.slow_rank=0 diag.slow_seconds=8 io.run_dir="'$scratch/p2p'"
st=$?
grep "^blocked in: " "$scratch/p2p/hang.rank00001.txt" 2> /dev/null | diag
[ $st -eq 4 ] && grep -Eq "^blocked in: pp recv wait: peer 0 tag [0-9]+, [0-9]+ bytes" "$scratch/p2p/hang.rank00001.txt" &&
    grep -q "has not finished" "$scratch/p2p/hang.rank00000.txt" &&
    ! grep -q "the rank(s) that stopped making progress" "$scratch/last.out"
ok $? "a pipeline receive that waits too long: status 4 (got $st), the report names the peer, tag and bytes waited for"
[ $st -eq 4 ] && [ ! -e "$scratch/p2p/triad.lock" ]
ok $? "... and the run directory's lock is given back as the watchdog ends the job (a job on another host may run there)"
# Evaluation (train.eval_every): 12 held-out batches after step 2, rank 0
# 0.4 s slower before each (diag.slow_rank), about 5 s in all against a
# 2 s timeout; each batch, and each training step, stays within it.
corpus="$top_srcdir/regression/cases/data/corpus.txt"
evrun="parallel.pp=2 train.micro_batch_size=2 diag.hang_timeout=2 model.vocab_size=256 data.kind='text'
data.path='$corpus' data.val_path='$corpus' train.eval_every=2 train.eval_batches=12 diag.slow_rank=0
diag.slow_seconds=0.4 train.warmup_steps=0"
triad_run 2 "$deck" $evrun train.steps=2 io.run_dir="'$scratch/ev'"
st=$?
secs=$(sed -n 's/^step 2: validation loss .* (\([0-9.]*\) s)$/\1/p' "$scratch/last.out")
[ $st -eq 0 ] && [ ! -e "$scratch/ev/hang.rank00000.txt" ] && [ -n "$secs" ] &&
    "$PYTHON3" -c "import sys; sys.exit(not float(sys.argv[1]) > 2)" "$secs"
ok $? "an evaluation of ${secs:-?} s with diag.hang_timeout = 2 s: no hang (status $st), its batches are progress"

# The same evaluation with rank 0 frozen 2 s after step 1 (inside the
# evaluation after step 2): rank 1 waits for its activations and reports.
$MPIEXEC -n 2 "$TRIAD" "$deck" $evrun train.steps=2 io.run_dir="'$scratch/evh'" > "$scratch/evh.out" 2>&1 &
mp=$!
wait_for_step "$scratch/evh.out" 1
sleep 2
victim=
for q in $(pgrep -P "$mp"); do
    [ "$(tr '\0' '\n' < "/proc/$q/environ" 2> /dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')" = 0 ] && victim=$q
done
[ -n "$victim" ] && kill -STOP "$victim"
wait "$mp"
st=$?
[ -n "$victim" ] && kill -CONT "$victim" 2> /dev/null
grep "^blocked in: " "$scratch/evh/hang.rank00001.txt" 2> /dev/null | diag
[ $st -eq 4 ] && grep -q "^blocked in: pp recv wait" "$scratch/evh/hang.rank00001.txt" &&
    ! grep -q "validation loss" "$scratch/evh.out"
ok $? "a rank frozen inside the evaluation: status 4 (got $st), the other rank's report names the receive it waits in"
done_testing
