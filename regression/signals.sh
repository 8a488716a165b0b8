#!/bin/sh
# Signals, honoured from the first instruction, the way Slurm, mpirun and
# the job scripts deliver them.  Only the processes this test started are
# signalled: mpirun (its pid) and its children (the ranks, found with
# pgrep -P), never anything found by name.
# 1. SIGUSR1 during start-up (forwarded by mpirun): status 3, nothing written.
# 2. SIGTERM to each rank during a restart's start-up (how scancel and the
#    time limit reach ranks): status 3 naming the checkpoint it restarted
#    from; the next restart ends bitwise equal to the uninterrupted run.
# 3. SIGTERM to mpirun mid-run.  Open MPI 4's mpirun does not forward TERM:
#    it sends the ranks SIGCONT, SIGTERM odls_base_sigkill_timeout seconds
#    later, SIGKILL as long after that, and reports 1 whatever they exit
#    with.  The ranks checkpoint in that window: the checkpoint is written
#    and verified, any lock the killed run left is taken over, the restart is
#    bitwise.
# 4. The job script given SIGTERM (template.sbatch, here outside Slurm with
#    mpirun as its launcher) asks triad to stop through SIGUSR1, which
#    mpirun forwards: status 3, the checkpoint written; it resumes bitwise.
# 5. SIGUSR1 at a checkpoint step (every step is one): written once, and
#    the lock given back though mpirun kills the ranks at once.
# 6. SIGKILL of one rank: the launcher ends the job within seconds, naming
#    the rank (Open MPI does; the job scripts ask srun for the same with
#    --kill-on-bad-exit).
# 7. SIGINT (Ctrl-C) where it reaches triad itself (a run without a
#    launcher): the first stops it with a checkpoint and status 3; once that
#    handler has fired, a second ends the run at once.
. "$(dirname "$0")/lib.sh"
deck="$DECKS/tiny.nml"

# caught PID SIGNUM: has process PID installed its handler for SIGNUM?
caught() {
    _m=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status" 2> /dev/null)
    [ -n "$_m" ] && [ $(( 0x$_m >> ($2 - 1) & 1 )) -eq 1 ]
}
# ranks_ready PID NP SIGNUM: mpirun PID has NP children and each catches SIGNUM
ranks_ready() {
    _n=0
    for _r in $(pgrep -P "$1"); do caught "$_r" "$3" && _n=$((_n + 1)); done
    [ "$_n" -eq "$2" ]
}
# wait_until TENTHS COMMAND...: poll every 0.02 s, for at most TENTHS/10 s
wait_until() {
    _t=$(($1 * 5)); shift
    while [ $_t -gt 0 ]; do "$@" && return 0; sleep 0.02; _t=$((_t - 1)); done
    return 1
}
started() { grep -q "^step  *$2/" "$1" 2> /dev/null; }
# signal_at PID LOG SIGNAL: once LOG shows step 50, send SIGNAL to PID and
# wait for it; sets st (its status) and stop (the step triad stopped at).
signal_at() {
    wait_until 300 started "$2" 50 && kill -"$3" "$1"
    wait "$1"
    st=$?
    stop=$(sed -n 's/.*stopping at step \([0-9]*\) (signal).*/\1/p' "$2" | head -n 1)
}
# resume DIR REF [KEY=VALUE...]: restart = 'auto' in DIR (with the settings
# after REF); to the end bitwise equal to the uninterrupted run REF?
resume() {
    _dir=$1 _ref=$2
    shift 2
    triad_run 2 "$deck" $slow "$@" io.restart=auto io.run_dir="'$_dir'" &&
        grep -q "restarted from $_dir/ckpt_$stop.h5 at step $stop" "$scratch/last.out" &&
        compare_runs "$_dir" "$_ref" 0 loss grad_norm > "$scratch/cmp.out"
}
# A start-up of most of a second (initialising 5M parameters or reading
# them, the plan, the sgemm probe); the signal goes within 0.02 s of the
# ranks' handlers appearing, before MPI_Init has returned.
med="model.n_layer=4 model.n_head=8 model.d_model=256 model.seq_len=64 model.vocab_size=8192
     train.batch_size=2 train.micro_batch_size=1 train.steps=4 train.warmup_steps=0"

# 1. SIGUSR1 through mpirun while the ranks start
$MPIEXEC -n 2 "$TRIAD" "$deck" $med io.run_dir="'$scratch/u'" > "$scratch/u.out" 2>&1 &
pid=$!
wait_until 300 ranks_ready $pid 2 10 && kill -USR1 $pid
wait $pid
st=$?
[ $st -eq 3 ] && grep -q "stop asked during start-up: nothing written; a requeued job starts from the beginning" \
    "$scratch/u.out" && ! ls "$scratch/u"/ckpt_* > /dev/null 2>&1 && ! grep -q "^step" "$scratch/u.out"
ok $? "SIGUSR1 during start-up: status 3 (got $st), no step run, nothing written"
grep "stop asked\|^error" "$scratch/u.out" | diag

# 2. SIGTERM to the ranks during a restart's start-up
triad_run 2 "$deck" $med io.checkpoint_every=2 io.run_dir="'$scratch/t'"
[ $? -eq 0 ] && [ -f "$scratch/t/ckpt_2.h5" ] && mkdir -p "$scratch/ref" && cp "$scratch/t/metrics.h5" "$scratch/ref/"
ok $? "an uninterrupted 4-step run (2 ranks) with a checkpoint at step 2"
$MPIEXEC -n 2 "$TRIAD" "$deck" $med io.checkpoint_every=2 io.restart=auto io.run_dir="'$scratch/t'" > "$scratch/t.out" 2>&1 &
pid=$!
wait_until 300 ranks_ready $pid 2 15 && for r in $(pgrep -P $pid); do kill -TERM "$r"; done
wait $pid
st=$?
[ $st -eq 3 ] && grep -q "stop asked during start-up: nothing written; a requeued job resumes from $scratch/t/ckpt_2.h5" \
    "$scratch/t.out" && ! grep -q "^step" "$scratch/t.out"
ok $? "SIGTERM to the ranks while a restart starts: status 3 (got $st), naming the checkpoint it resumes from"
grep "stop asked\|^error" "$scratch/t.out" | diag
triad_run 2 "$deck" $med io.checkpoint_every=2 io.restart=auto io.run_dir="'$scratch/t'"
[ $? -eq 0 ] && grep -q "restarted from $scratch/t/ckpt_2.h5 at step 2" "$scratch/last.out" &&
    compare_runs "$scratch/t" "$scratch/ref" 0 loss grad_norm > "$scratch/cmp.out"
ok $? "the restart after it: every step's loss and grad norm bitwise equal to the uninterrupted run"
diag < "$scratch/cmp.out"

# 3. SIGTERM to mpirun in the middle of a run (600 steps of about 9 ms)
slow="model.n_layer=2 model.d_model=128 model.seq_len=64 model.vocab_size=256 train.steps=600 train.batch_size=16
      train.micro_batch_size=4 io.checkpoint_every=1000 io.log_every=50"
triad_run 2 "$deck" $slow io.run_dir="'$scratch/sref'"
ok $? "uninterrupted reference of a 600-step run"
# (3 s, set so that a site's setting does not change the test: TERM reaches the ranks 3 s
# after mpirun got it, SIGKILL 3 s later, while 600 steps of ~9 ms are still running.  With
# Open MPI's default of 1 s the checkpoint must be written and verified within that second:
# it is on an idle machine, but not always when other tests load the 2 cores)
OMPI_MCA_odls_base_sigkill_timeout=3 $MPIEXEC -n 2 "$TRIAD" "$deck" $slow io.run_dir="'$scratch/s'" \
    > "$scratch/s.out" 2>&1 &
signal_at $! "$scratch/s.out" TERM
[ -n "$stop" ] && grep -q "checkpoint $scratch/s/ckpt_$stop.h5 written and verified" "$scratch/s.out" &&
    "$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$scratch/s/ckpt_$stop.h5" > "$scratch/verify.out" 2>&1
ok $? "SIGTERM to mpirun at step 50: the ranks stop at step ${stop:-?} with a verified checkpoint (mpirun's status: $st)"
resume "$scratch/s" "$scratch/sref"
ok $? "its restart (taking over any lock the killed run left): losses bitwise equal to the uninterrupted run"
grep "lock" "$scratch/last.out" | diag

# 4 and 5 stop at step 50 or just after (SIGUSR1 reaches the ranks at once):
# 200 steps leave them room (150 steps, 1.4 s, after the signal), and
# their resumptions about a quarter of 3.'s
short="train.steps=200"
triad_run 2 "$deck" $slow $short io.run_dir="'$scratch/sref200'"
ok $? "uninterrupted reference of the same run cut to 200 steps"

# 4. the job script, given SIGTERM, stops triad through SIGUSR1 (mpirun forwards it): status 3
# (Triad's status 3 makes mpirun end the job as failed: it signals the
# exited ranks anyway, 2 x odls_base_sigkill_timeout, which the script sets
# to 10 s unless it is set; 3 s here, as in 3.)
mkdir -p "$scratch/job"
(cd "$scratch/job" && OMPI_MCA_odls_base_sigkill_timeout=3 TRIAD="$TRIAD" TRIAD_LAUNCH="$MPIEXEC -n 2" \
    exec bash "$top_srcdir/jobscripts/template.sbatch" "$deck" $slow $short io.run_dir="'$scratch/j'") \
    > "$scratch/job.out" 2>&1 &
signal_at $! "$scratch/job.out" TERM
[ $st -eq 3 ] && [ -n "$stop" ] && grep -q "^=== triad exited with status 3" "$scratch/job.out" &&
    grep -q "^=== cancelled (SIGTERM): not requeued" "$scratch/job.out" && [ -f "$scratch/j/ckpt_$stop.h5" ]
ok $? "template.sbatch given SIGTERM: triad stops at step ${stop:-?} with a checkpoint, the job's status is 3 (got $st)"
grep "^===" "$scratch/job.out" | diag
resume "$scratch/j" "$scratch/sref200" $short
ok $? "and the job resubmitted ends bitwise equal to the uninterrupted run"

# 5. a signal at a checkpoint step: that checkpoint, written once
$MPIEXEC -n 2 "$TRIAD" "$deck" $slow $short io.checkpoint_every=1 io.run_dir="'$scratch/e'" > "$scratch/e.out" 2>&1 &
signal_at $! "$scratch/e.out" USR1
[ $st -eq 3 ] && [ -n "$stop" ] && [ "$(grep -c "checkpoint $scratch/e/ckpt_$stop.h5 written" "$scratch/e.out")" -eq 1 ]
ok $? "SIGUSR1 with a checkpoint every step: status 3 (got $st), ckpt_${stop:-?}.h5 written once"
# (status 3 makes mpirun kill the job's ranks at once, here: rank 0 gives the
# lock back as MPI_Finalize starts, not only at exit)
[ ! -e "$scratch/e/triad.lock" ]
ok $? "and the run directory's lock given back, though mpirun ended the ranks at once"
resume "$scratch/e" "$scratch/sref200" $short
ok $? "and resumes from it: losses bitwise equal to the uninterrupted run"

# 6. a rank killed outright (SIGKILL, as the OOM killer does): the whole job ends soon, naming it
$MPIEXEC -n 4 "$TRIAD" "$deck" $slow train.steps=1000000 parallel.pp=2 train.micro_batch_size=2 io.run_dir="'$scratch/k'" \
    > "$scratch/k.out" 2>&1 &
mp=$!
wait_until 300 started "$scratch/k.out" 50 # (the first step logged: io.log_every = 50)
victim=$(pgrep -P "$mp" | sed -n 3p)
t0=$(date +%s)
[ -n "$victim" ] && kill -KILL "$victim"
wait "$mp"
st=$?
dt=$(($(date +%s) - t0))
[ -n "$victim" ] && [ $st -ne 0 ] && [ $dt -le 60 ] && grep -q "process rank [0-9]* .*exited on signal 9" "$scratch/k.out"
ok $? "SIGKILL of one of 4 ranks: the job ends in ${dt} s (status $st), the launcher names the rank"
grep "exited on signal" "$scratch/k.out" | diag

# 7. SIGINT to triad run alone (the MPI singleton), as Ctrl-C sends it; the
# shell starts a background job with SIGINT ignored, so the default is
# restored for it first (exec: the job is triad itself, not a subshell).  Steps slowed to 0.3 s: the second SIGINT comes
# (once the first has been taken) well before the stop's step boundary.
default_int() { exec "$PYTHON3" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' "$@"; }
default_int "$TRIAD" "$deck" $slow $short io.run_dir="'$scratch/i'" > "$scratch/i.out" 2>&1 &
signal_at $! "$scratch/i.out" INT
[ $st -eq 3 ] && [ -n "$stop" ] && grep -q "checkpoint $scratch/i/ckpt_$stop.h5 written and verified" "$scratch/i.out" &&
    "$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$scratch/i/ckpt_$stop.h5" > "$scratch/verify.out" 2>&1 &&
    [ ! -e "$scratch/i/triad.lock" ]
ok $? "SIGINT to a run without a launcher: it stops at step ${stop:-?} with a verified checkpoint, status 3 (got $st)"
default_int "$TRIAD" "$deck" $slow $short diag.slow_rank=0 diag.slow_seconds=0.3 io.log_every=1 io.run_dir="'$scratch/i2'" \
    > "$scratch/i2.out" 2>&1 &
pid=$!
wait_until 300 started "$scratch/i2.out" 1 && kill -INT $pid && wait_until 100 eval '! caught $pid 2' && kill -INT $pid
wait $pid
st=$?
[ $st -eq $((128 + 2)) ] && ! grep -q "checkpoint .* written" "$scratch/i2.out"
ok $? "a second SIGINT ends it at once, without a checkpoint (status $st)"
done_testing
