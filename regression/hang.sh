#!/bin/sh
# The hang watchdog (diag.hang_timeout): one rank of 4 frozen (SIGSTOP to a
# child of this test's own mpirun) mid-run; the job ends within the timeout
# and a few seconds with status 4; each live rank's report
# (run_dir/hang.rank<R>.txt) says where it is blocked (communicator,
# operation) and lists its last communication calls; the summary on stderr
# names the frozen rank as the one that stopped making progress.  A run
# with a short timeout and no fault ends normally; a wait for a pipeline
# message names its peer and tag.
. "$(dirname "$0")/lib.sh"

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
done_testing
