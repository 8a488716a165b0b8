#!/bin/sh
# slurm_requeue: jobscripts/template.sbatch on a local single-node Slurm
# cluster (munged, slurmctld, slurmd started here, in a scratch directory, on
# free ports).  The job is sent SIGUSR1 the way --signal=B:USR1@N does it
# (scancel --signal=USR1 --batch: the batch shell only); the script forwards
# it to triad, which checkpoints and exits 3; the script requeues the job; the
# second run resumes from the checkpoint (io.restart = 'auto') and finishes.
# The loss series must be bitwise that of an uninterrupted run without Slurm,
# with one metrics row per step.  SKIPs without slurm-wlm and munge, or
# when not root (slurmd must run as root).  The daemons are stopped at exit.
. "$(dirname "$0")/lib.sh"

STEPS=${SLURM_TEST_STEPS:-3000}      # about 2.5 s of tiny steps on 2 idle ranks
EVERY=300                            # the signal goes once ckpt_300.h5 appears
NP=2

for prog in munged mungekey slurmctld slurmd sbatch scontrol scancel squeue sinfo srun; do
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
jobid=
cleanup() {
    st=$?
    if [ -n "$jobid" ] && [ -f "$S/slurm.conf" ]; then
        timeout 10 scancel "$jobid" > /dev/null 2>&1
        wait_for 15 job_gone
    fi
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

job_gone() { [ -z "$(timeout 10 squeue -h -j "$jobid" -o %i 2> /dev/null)" ]; }
job_field() {   # job_field NAME: from scontrol show job
    timeout 10 scontrol -o show job "$jobid" 2> /dev/null | tr ' ' '\n' | sed -n "s/^$1=//p"
}
job_state_is() { [ "$(job_field JobState)" = "$1" ]; }

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

export SLURM_CONF=$S/slurm.conf
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
if runuser -u munge -- mungekey --create --keyfile="$S/munge/munge.key" > "$S/log/mungekey.log" 2>&1 &&
   runuser -u munge -- munged --socket="$sock" --key-file="$S/munge/munge.key" \
       --pid-file="$S/munge/munged.pid" --log-file="$S/munge/munged.log" \
       --seed-file="$S/munge/munged.seed" > "$S/log/munged.out" 2>&1 &&
   wait_for 10 test -S "$sock" &&
   slurmctld -f "$SLURM_CONF" > "$S/log/slurmctld.out" 2>&1 &&
   wait_for 20 timeout 5 scontrol ping &&
   slurmd -f "$SLURM_CONF" > "$S/log/slurmd.out" 2>&1 &&
   wait_for 30 sh -c 'timeout 5 sinfo -h -n "$0" -o %T | grep -qx idle' "$node"; then
    started=1
fi
ok $((1 - started)) "local Slurm cluster up: munged, slurmctld (port $ctld_port), slurmd (port $slurmd_port), node $node idle"
if [ $started -ne 1 ]; then
    for f in "$S/log/"* "$S/munge/munged.log"; do
        [ -s "$f" ] && { echo "--- $f"; tail -15 "$f"; } | diag
    done
    done_testing
fi

# ---------------------------------------------------------------- the job
# jobscripts/template.sbatch itself, its resources overridden on the command
# line (these take precedence over its #SBATCH lines); the environment
# (TRIAD, OMPI_ALLOW_RUN_AS_ROOT, SLURM_CONF) is exported to the job.
log=$S/work/job.out
export TRIAD
# shellcheck disable=SC2086
jobid=$(cd "$S/work" && TRIAD="$TRIAD" timeout 20 sbatch --parsable \
    --job-name=triad-requeue-test --nodes=1 --ntasks=$NP --ntasks-per-node=$NP \
    --cpus-per-task=1 --time=10 --output="$log" \
    "$top_srcdir/jobscripts/template.sbatch" "$DECKS/tiny.nml" $ARGS io.run_dir="'$S/work/run'" \
    2> "$S/sbatch.err")
jobid=${jobid%%;*}
[ -n "$jobid" ]
ok $? "sbatch template.sbatch: job ${jobid:-none}"
if [ -z "$jobid" ]; then diag < "$S/sbatch.err"; done_testing; fi

# Signal once the run is past its first periodic checkpoint: mid-run.
t0=$(date +%s)
wait_for 120 test -f "$S/work/run/ckpt_$EVERY.h5"
st=$?
dt=$(( $(date +%s) - t0 ))
ok $st "the job is running: ckpt_$EVERY.h5 written ($dt s after submission)"
if [ $st -ne 0 ]; then
    { job_field JobState; job_field Reason; cat "$log"; tail -20 "$S/log/slurmd.log"; } 2>&1 | diag
    done_testing
fi
timeout 10 scancel --signal=USR1 --batch "$jobid"
ok $? "scancel --signal=USR1 --batch $jobid (what --signal=B:USR1@N sends)"

# The requeued job runs again and completes; the record stays (MinJobAge).
wait_for 180 job_state_is COMPLETED
st=$?
state=$(job_field JobState)
ok $st "the job completed (state ${state:-?}, $(( $(date +%s) - t0 )) s after submission)"
restarts=$(job_field Restarts)
[ "$restarts" = 1 ]
ok $? "requeued once: scontrol show job says Restarts=${restarts:-?}"
exitcode=$(job_field ExitCode)
[ "$exitcode" = "0:0" ]
ok $? "final exit code 0:0 (got ${exitcode:-?})"

grep "^===\|stopping at\|restarted from" "$log" | diag
grep -q "^=== SIGUSR1 received" "$log"
ok $? "the batch shell got SIGUSR1 and forwarded it"
stop_line=$(grep -m1 "stopping at step [0-9]* (signal)" "$log")
stop_step=$(echo "$stop_line" | sed -n 's/.*stopping at step \([0-9]*\) .*/\1/p')
[ -n "$stop_step" ] && [ "$stop_step" -ge "$EVERY" ] && [ "$stop_step" -lt "$STEPS" ]
ok $? "triad stopped mid-run at step ${stop_step:-?} of $STEPS on the signal"
grep -q "^=== triad exited with status 3" "$log" && grep -q "requeueing job $jobid" "$log"
ok $? "first run exited 3 (checkpoint written) and the script requeued the job"
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
        print(f"final loss {jl[-1]!r} (step {js[-1]}) == reference {rl[-1]!r}; all {n} losses bitwise equal")
else:
    bad = 1
sys.exit(bad)
PY
st=$?
diag < "$S/compare.out"
ok $st "metrics.h5: steps 1..$STEPS once each; the loss series is bitwise that of the uninterrupted run"

if [ "$tap_failed" -ne 0 ]; then
    { echo "--- job log"; cat "$log"; echo "--- slurmctld.log"; tail -30 "$S/log/slurmctld.log"; } | diag
fi
done_testing
