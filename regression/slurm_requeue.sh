#!/bin/sh
# slurm_requeue: jobscripts/template.sbatch on a local single-node Slurm
# cluster (munged, slurmctld, slurmd started here, in a scratch directory, on
# free ports).  The job is sent SIGUSR1 the way --signal=B:USR1@N does it
# (scancel --signal=USR1 --batch: the batch shell only); the script forwards
# it to triad, which checkpoints and exits 3; the script requeues the job; the
# second run resumes from the checkpoint (io.restart = 'auto') and finishes.
# The loss series must be bitwise that of an uninterrupted run without Slurm,
# with one metrics row per step.  A second job is stopped through the stop
# file RUN_DIR/STOP: checkpoint, exit 3, no requeue.  A third is cancelled
# (scancel: SIGTERM to everything): checkpoint, exit 3, no requeue.  A
# fourth is stopped, and its stop's checkpoint fails on rank 0 (a fault
# shim): MPI_Abort's status 3 reaches the script through srun, which
# requeues; the next run resumes from the earlier checkpoint.  Last, a hang
# under srun ends with the watchdog's status 4.  SKIPs without
# slurm-wlm and munge, or when not root (slurmd must run as root).  The
# daemons are stopped and the scratch directory removed at exit, whatever
# happened; every wait is bounded.  docs/slurm.md describes it.
. "$(dirname "$0")/lib.sh"

STEPS=${SLURM_TEST_STEPS:-3000}      # about 2.5 s of tiny steps on 2 idle ranks
EVERY=300                            # the signal goes once ckpt_300.h5 appears
NP=2

for prog in munged slurmctld slurmd sbatch scontrol scancel squeue sinfo srun; do
    if ! command -v "$prog" > /dev/null 2>&1 && [ ! -x "/usr/sbin/$prog" ]; then
        skip "no $prog: install slurm-wlm and munge to run the Slurm requeue test"
        done_testing
    fi
done
if [ "$(id -u)" -ne 0 ]; then
    skip "not root: slurmd (and munged as the munge user) need root"
    done_testing
fi
if ! id munge > /dev/null 2>&1; then
    skip "no munge user (the munge package creates it)"
    done_testing
fi
if ! "$PYTHON3" -c 'import h5py' 2> /dev/null; then
    skip "$PYTHON3 has no h5py"
    done_testing
fi
PATH=$PATH:/usr/sbin
export PATH

# ---------------------------------------------------------------- helpers
# wait_for SECONDS COMMAND...: poll COMMAND every 0.2 s until it succeeds;
# status 1 on timeout.
wait_for() {
    _end=$(( $(date +%s) + $1 )); shift
    while ! "$@" > /dev/null 2>&1; do
        [ "$(date +%s)" -ge "$_end" ] && return 1
        sleep 0.2
    done
    return 0
}
pid_of() { cat "$1" 2> /dev/null; }
alive() { [ -n "$1" ] && kill -0 "$1" 2> /dev/null; }

# stop PIDFILE NAME: SIGTERM, up to 10 s, then SIGKILL.
stop_daemon() {
    _p=$(pid_of "$1")
    alive "$_p" || return 0
    kill -TERM "$_p" 2> /dev/null
    _i=0
    while alive "$_p" && [ $_i -lt 50 ]; do sleep 0.2; _i=$((_i + 1)); done
    if alive "$_p"; then
        echo "# $2 did not stop in 10 s: SIGKILL"
        kill -KILL "$_p" 2> /dev/null
    fi
}

S=$scratch
jobs=
cleanup() {
    st=$?
    for j in $jobs; do
        timeout 10 scancel "$j" > /dev/null 2>&1
        wait_for 15 job_gone "$j"
    done
    stop_daemon "$S/slurmd.pid" slurmd
    stop_daemon "$S/slurmctld.pid" slurmctld
    stop_daemon "$S/munge/munged.pid" munged
    # Anything of this test's that outlived its job (it names the scratch dir).
    for p in $(pgrep -f "$S/" 2> /dev/null); do
        [ "$p" != $$ ] && kill -KILL "$p" 2> /dev/null
    done
    rm -rf "$S"
    exit $st
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# Job helpers; the job id is the first argument.
job_gone() { [ -z "$(timeout 10 squeue -h -j "$1" -o %i 2> /dev/null)" ]; }
job_field() {   # job_field ID NAME: a field of scontrol show job
    timeout 10 scontrol -o show job "$1" 2> /dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"
}
job_ended() {   # a final state (the record stays MinJobAge seconds)
    case $(job_field "$1" JobState) in
    COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE) return 0 ;;
    esac
    return 1
}
# submit NAME RUN_DIR: jobscripts/template.sbatch itself, its resources
# overridden on the command line (these take precedence over its #SBATCH
# lines); the environment (TRIAD, OMPI_ALLOW_RUN_AS_ROOT, SLURM_CONF) is
# exported to the job.  Prints the job id; the log is $S/work/NAME.out.
submit() {
    # shellcheck disable=SC2086
    (cd "$S/work" && TRIAD="$TRIAD" timeout 20 sbatch --parsable \
        --job-name="triad-$1" --nodes=1 --ntasks=$NP --ntasks-per-node=$NP \
        --cpus-per-task=1 --time=10 --output="$S/work/$1.out" \
        "$top_srcdir/jobscripts/template.sbatch" "$DECKS/tiny.nml" $ARGS io.run_dir="'$2'" \
        2>> "$S/sbatch.err") | sed 's/;.*//'
}

# Ranks wait politely: srun starts them directly, so Open MPI cannot know
# that this (shared, possibly oversubscribed) test machine has no core to
# spare; spinning ranks ran several times slower.  Exported to the jobs too.
export OMPI_MCA_mpi_yield_when_idle=1

# ---------------------------------------------------------------- reference
# The same deck, uninterrupted, without Slurm (the job launches with srun:
# the numbers must not depend on the launcher).
ARGS="train.steps=$STEPS train.peak_gflops=100 io.checkpoint_every=$EVERY io.log_every=250"
t0=$(date +%s)
# shellcheck disable=SC2086
timeout 300 $MPIEXEC -n $NP "$TRIAD" "$DECKS/tiny.nml" $ARGS io.run_dir="'$S/ref'" > "$S/ref.out" 2>&1
st=$?
dt=$(( $(date +%s) - t0 ))
ok $st "reference run without Slurm ($STEPS steps on $NP ranks, $dt s)"
[ $st -eq 0 ] || tail -20 "$S/ref.out" | diag

# ---------------------------------------------------------------- cluster
node=$(hostname -s)
ports=$("$PYTHON3" - <<'PY'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
)
ctld_port=${ports% *}
slurmd_port=${ports#* }

chmod 755 "$S"              # the munge user must reach its directory
mkdir -p "$S/munge" "$S/state" "$S/spool" "$S/log" "$S/work"
chown munge:munge "$S/munge"
chmod 755 "$S/munge"      # munged: the socket directory must be searchable by all
sock=$S/munge/munge.socket.2
if [ ${#sock} -gt 100 ]; then
    skip "scratch path too long for a unix socket ($sock): set TMPDIR shorter"
    done_testing
fi

SLURM_CONF="$S/slurm.conf"
export SLURM_CONF
cat > "$SLURM_CONF" <<EOF
ClusterName=triadtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock,cred_expire=5
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
KillWait=5
MinJobAge=600
SchedulerParameters=sched_interval=1
NodeName=$node NodeAddr=127.0.0.1 CPUs=4 Sockets=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF

started=0
node_idle() { timeout 5 sinfo -h -n "$node" -o %T | grep -qx idle; }
# A key of our own (mungekey where munge >= 0.5.14 has it, else random bytes).
make_key() {
    if command -v mungekey > /dev/null 2>&1 || [ -x /usr/sbin/mungekey ]; then
        runuser -u munge -- mungekey --create --keyfile="$S/munge/munge.key"
    else
        dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 2> /dev/null &&
            chown munge:munge "$S/munge/munge.key" && chmod 400 "$S/munge/munge.key"
    fi
}
if make_key > "$S/log/mungekey.log" 2>&1 &&
   runuser -u munge -- munged --socket="$sock" --key-file="$S/munge/munge.key" \
       --pid-file="$S/munge/munged.pid" --log-file="$S/munge/munged.log" \
       --seed-file="$S/munge/munged.seed" > "$S/log/munged.out" 2>&1 &&
   wait_for 10 test -S "$sock" &&
   slurmctld -f "$SLURM_CONF" > "$S/log/slurmctld.out" 2>&1 &&
   wait_for 20 timeout 5 scontrol ping &&
   slurmd -f "$SLURM_CONF" > "$S/log/slurmd.out" 2>&1 &&
   wait_for 30 node_idle; then
    started=1
fi
ok $((1 - started)) "local Slurm cluster up: munged, slurmctld (port $ctld_port), slurmd (port $slurmd_port), node $node idle"
if [ $started -ne 1 ]; then
    for f in "$S/log/"* "$S/munge/munged.log"; do
        [ -s "$f" ] && { echo "--- $f"; tail -15 "$f"; } | diag
    done
    done_testing
fi

# ---------------------------------------------------------------- job 1: requeue
# Signalled like --signal=B:USR1@N does it, once the run is past its first
# periodic checkpoint (mid-run): checkpoint, exit 3, requeue, resume, finish.
log=$S/work/requeue.out
t0=$(date +%s)
jobid=$(submit requeue "$S/work/run")
jobs="$jobs $jobid"
[ -n "$jobid" ]
ok $? "sbatch template.sbatch: job ${jobid:-none}"
if [ -z "$jobid" ]; then diag < "$S/sbatch.err"; done_testing; fi

wait_for 120 test -f "$S/work/run/ckpt_$EVERY.h5"
st=$?
dt=$(( $(date +%s) - t0 ))
ok $st "the job is running: ckpt_$EVERY.h5 written ($dt s after submission)"
if [ $st -ne 0 ]; then
    { job_field "$jobid" JobState; job_field "$jobid" Reason; cat "$log"; tail -20 "$S/log/slurmd.log"; } 2>&1 | diag
    done_testing
fi
timeout 10 scancel --signal=USR1 --batch "$jobid"
ok $? "scancel --signal=USR1 --batch $jobid (what --signal=B:USR1@N sends)"

wait_for 240 job_ended "$jobid"
state=$(job_field "$jobid" JobState)
[ "$state" = COMPLETED ]
ok $? "the job completed (state ${state:-?}, $(( $(date +%s) - t0 )) s after submission)"
restarts=$(job_field "$jobid" Restarts)
[ "$restarts" = 1 ]
ok $? "requeued once: scontrol show job says Restarts=${restarts:-?}"
exitcode=$(job_field "$jobid" ExitCode)
[ "$exitcode" = "0:0" ]
ok $? "final exit code 0:0 (got ${exitcode:-?})"

grep "^===\|stopping at\|restarted from" "$log" | diag
grep -q "^=== SIGUSR1 received" "$log"
ok $? "the batch shell got SIGUSR1 and forwarded it"
stop_step=$(sed -n 's/.*stopping at step \([0-9]*\) (signal).*/\1/p' "$log" | head -n 1)
[ -n "$stop_step" ] && [ "$stop_step" -ge "$EVERY" ] && [ "$stop_step" -lt "$STEPS" ]
ok $? "triad stopped mid-run at step ${stop_step:-?} of $STEPS on the signal"
grep -q "^=== triad exited with status 3" "$log" && grep -q "requeueing job $jobid" "$log"
ok $? "the first run exited 3 (checkpoint written) and the script requeued the job"
grep -q "^=== triad job $jobid run 2 " "$log"
ok $? "the log shows a second run of job $jobid (--open-mode=append)"
grep -q "restarted from .*ckpt_${stop_step:-x}\.h5 at step ${stop_step:-x}" "$log"
ok $? "the second run restarted from ckpt_${stop_step:-?}.h5"
[ "$(grep -c '^=== triad exited with status 0' "$log")" -eq 1 ] && grep -q "^=== done" "$log"
ok $? "the second run finished with status 0"

"$PYTHON3" - "$S/ref/metrics.h5" "$S/work/run/metrics.h5" "$STEPS" > "$S/compare.out" 2>&1 <<'PY'
import sys, h5py, numpy as np
ref, job, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with h5py.File(ref, "r") as f:
    rs, rl = f["metrics/step"][:], f["metrics/loss"][:]
with h5py.File(job, "r") as f:
    js, jl = f["metrics/step"][:], f["metrics/loss"][:]
bad = 0
if not np.array_equal(js, np.arange(1, n + 1)):
    u, c = np.unique(js, return_counts=True)
    missing = sorted(set(range(1, n + 1)) - set(u.tolist()))
    print(f"job metrics steps: {len(js)} rows, duplicated {u[c > 1][:10].tolist()}, missing {missing[:10]}")
    bad = 1
if not np.array_equal(rs, np.arange(1, n + 1)):
    print(f"reference metrics steps: {len(rs)} rows, not 1..{n}")
    bad = 1
if len(jl) == len(rl):
    diff = np.flatnonzero(jl != rl)
    if diff.size:
        i = diff[0]
        print(f"loss differs at {diff.size} steps, first at step {rs[i]}: {jl[i]!r} vs {rl[i]!r}")
        bad = 1
    else:
        print(f"all {n} losses bitwise equal")
else:
    bad = 1
if len(jl) and len(rl) and jl[-1] == rl[-1]:
    print(f"final loss bitwise equal: {jl[-1]!r} (step {js[-1]}), reference {rl[-1]!r} (step {rs[-1]})")
else:
    print(f"final loss differs: {jl[-1:]!r} vs reference {rl[-1:]!r}")
sys.exit(bad)
PY
st=$?
diag < "$S/compare.out"
grep -q "^final loss bitwise equal" "$S/compare.out"
ok $? "the final loss (/metrics/loss, last row) is bitwise that of the uninterrupted run"
ok $st "metrics.h5: steps 1..$STEPS once each, the whole loss series bitwise equal"

# ---------------------------------------------------------------- job 2: stop file
# RUN_DIR/STOP asks for a clean stop that is NOT requeued: triad checkpoints
# and exits 3, the script sees why in the log and ends the job.
log2=$S/work/stopfile.out
job2=$(submit stopfile "$S/work/run2")
jobs="$jobs $job2"
wait_for 120 test -f "$S/work/run2/ckpt_$EVERY.h5" && touch "$S/work/run2/STOP"
wait_for 120 job_ended "$job2"
state=$(job_field "$job2" JobState); exitcode=$(job_field "$job2" ExitCode); restarts=$(job_field "$job2" Restarts)
grep "^===\|stopping at" "$log2" | diag
stop2=$(sed -n 's/.*stopping at step \([0-9]*\) (stop file).*/\1/p' "$log2" | head -n 1)
[ -n "$stop2" ] && grep -q "^=== stopped through the stop file: not requeued" "$log2" &&
    [ "$exitcode" = "3:0" ] && [ "$restarts" = 0 ]
ok $? "touch RUN_DIR/STOP: stopped at step ${stop2:-?} with a checkpoint, job ended with 3 (${state:-?} ${exitcode:-?}), not requeued (Restarts=${restarts:-?})"
"$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$S/work/run2/ckpt_${stop2:-x}.h5" > "$S/info.out" 2>&1
st=$?
grep "^step\|^written\|^model\|^checksums\|^verdict\|error" "$S/info.out" | diag
ok $st "tools/ckpt_info.py --verify: ckpt_${stop2:-?}.h5 is whole, every checksum matches"

# ---------------------------------------------------------------- job 3: scancel
# A plain scancel (what the time limit itself does): Slurm sends SIGTERM to
# the batch shell and to every process of the job; srun forwards it to the
# ranks.  triad checkpoints within KillWait (5 s here) and exits 3; the
# script reports the cancellation and does not requeue.
log3=$S/work/cancel.out
job3=$(submit cancel "$S/work/run3")
jobs="$jobs $job3"
wait_for 120 test -f "$S/work/run3/ckpt_$EVERY.h5" && timeout 10 scancel "$job3"
wait_for 120 job_ended "$job3"
restarts=$(job_field "$job3" Restarts)
grep "^===\|stopping at\|written and verified" "$log3" | diag
stop3=$(sed -n 's/.*stopping at step \([0-9]*\) (signal).*/\1/p' "$log3" | head -n 1)
[ -n "$stop3" ] && grep -q "^=== triad exited with status 3" "$log3" &&
    grep -q "^=== cancelled (SIGTERM): not requeued" "$log3" && [ "$restarts" = 0 ] &&
    "$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$S/work/run3/ckpt_$stop3.h5" > "$S/info.out" 2>&1
ok $? "scancel $job3: stopped at step ${stop3:-?} with a verified checkpoint, status 3, not requeued (Restarts=${restarts:-?})"

# ---------------------------------------------------------------- job 4: a stop whose checkpoint fails
# The stop's own checkpoint meets rank 0's failing writes (the shim of
# io_errors.sh, given by a launcher of the test's to the first run only),
# with an earlier good checkpoint: the ranks end through MPI_Abort with
# status 3, which srun passes on; the script requeues, and the next run
# resumes from the earlier checkpoint and finishes.
shim=$S/eio_rank.so
if ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/regression/faults/eio_rank.c" -ldl 2> "$S/cc.err"; then
    log4=$S/work/abort3.out
    args4="train.peak_gflops=100 io.checkpoint_every=$EVERY io.log_every=250"
    # shellcheck disable=SC2086
    timeout 300 $MPIEXEC -n $NP "$TRIAD" "$DECKS/tiny.nml" $args4 train.steps=$EVERY io.save_final=.true. io.run_dir="'$S/work/run4'" \
        > "$S/run4.out" 2>&1
    [ $? -eq 0 ] && [ -f "$S/work/run4/ckpt_$EVERY.h5" ]
    ok $? "job 4's first $EVERY steps without Slurm: ckpt_$EVERY.h5, the earlier good checkpoint"
    cat > "$S/fault_launch.sh" <<EOF
#!/bin/sh
# the first run only: rank 0's writes into a checkpoint fail
if [ "\${SLURM_RESTART_COUNT:-0}" -eq 0 ]; then
    export LD_PRELOAD=$shim TRIAD_FAULT_OPS=write TRIAD_FAULT_PATH=.h5.tmp TRIAD_FAULT_RANK=0 TRIAD_FAULT_MARK=$S/mark4
fi
exec srun --mpi=pmix --kill-on-bad-exit=1 "\$@"
EOF
    chmod +x "$S/fault_launch.sh"
    # 20,000 steps: the signal surely comes before the end; no periodic
    # checkpoint (its failure would be an error, status 1)
    saved=$ARGS
    ARGS="train.peak_gflops=100 io.log_every=250 train.steps=20000 io.checkpoint_every=0"
    TRIAD_LAUNCH=$S/fault_launch.sh
    export TRIAD_LAUNCH
    job4=$(submit abort3 "$S/work/run4")
    unset TRIAD_LAUNCH
    ARGS=$saved
    jobs="$jobs $job4"
    wait_for 120 grep -q "restarted from .*ckpt_$EVERY.h5" "$log4" && timeout 10 scancel --signal=USR1 --batch "$job4"
    wait_for 240 job_ended "$job4"
    state=$(job_field "$job4" JobState); exitcode=$(job_field "$job4" ExitCode); restarts=$(job_field "$job4" Restarts)
    grep "^===\|^error\|newest good\|restarted from" "$log4" | diag
    [ -f "$S/mark4" ] && grep -q "^error: checkpoint at step [0-9]* failed: rank 0: writing" "$log4" &&
        grep -q "the newest good one is $S/work/run4/ckpt_$EVERY.h5, which a requeued job resumes from (status 3)" "$log4" &&
        grep -q "^=== triad exited with status 3" "$log4" && grep -q "requeueing job $job4" "$log4"
    ok $? "a stop whose checkpoint fails on rank 0 (with ckpt_$EVERY.h5 before it): MPI_Abort's status 3 through srun, the job requeued"
    [ "$(grep -c "restarted from .*ckpt_$EVERY.h5 at step $EVERY" "$log4")" -eq 2 ] &&
        [ "$(grep -c '^=== triad exited with status 0' "$log4")" -eq 1 ] &&
        [ "$state" = COMPLETED ] && [ "$exitcode" = "0:0" ] && [ "$restarts" = 1 ]
    ok $? "the requeued run resumed from ckpt_$EVERY.h5 and finished (${state:-?} ${exitcode:-?}, Restarts=${restarts:-?})"

    # A hang (rank 0's writes failing inside HDF5's layout of a background
    # checkpoint, io_errors.sh's case 6): the watchdog's status 4 through srun.
    LD_PRELOAD=$shim TRIAD_FAULT_OPS=write TRIAD_FAULT_PATH=.h5.tmp TRIAD_FAULT_RANK=0 \
        timeout 120 srun --mpi=pmix --kill-on-bad-exit=1 -n $NP "$TRIAD" "$DECKS/tiny.nml" train.steps=20 \
        io.checkpoint_every=10 io.async_checkpoint=.true. diag.hang_timeout=5 io.run_dir="'$S/work/hang'" \
        > "$S/hang.out" 2>&1
    st=$?
    grep "^error\|hint\|srun: error" "$S/hang.out" | diag
    [ $st -eq 4 ] && [ -f "$S/work/hang/hang.rank00000.txt" ]
    ok $? "a hang under srun: the watchdog's status 4 (got $st; 124 is a hang), each rank's report written"
else
    skip "cannot build the LD_PRELOAD shim ($(head -n 1 "$S/cc.err"))"
fi

if [ "$tap_failed" -ne 0 ]; then
    { for f in "$log" "$log2" "$log3" "${log4:-}"; do echo "--- $f"; cat "$f"; done
      echo "--- slurmctld.log"; tail -30 "$S/log/slurmctld.log"; } 2>&1 | diag
fi
done_testing
