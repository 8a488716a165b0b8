#!/bin/sh
# Zero-bubble pipelines (docs/pipeline.md, "Zero bubble" and "Running B and W"): zb-h1,
# zb-h2 and zbv split each backward into B (input gradients) and W (weight
# gradients, deferred) and train to the same bits as pp = 1 -- every step's
# loss and grad norm and the final checkpoint -- in fp32, under tp + SP, dp
# (overlapped all-reduce) and ZeRO-1/2/3, full and selective recomputation,
# bf16, fp16 with a skipped step, cp and llama; a run restarted under
# another schedule continues the same bits (files with W: schedule_file.sh);
# triad schedule predicts from the run's own F, B and W times (those of
# the steps a restart ran).
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
common="model.n_layer=4 train.steps=3 train.batch_size=8 train.micro_batch_size=1 io.save_final=.true. train.peak_gflops=100.0"

# metric Q RUN: the column Q of RUN's metrics.h5, one value per line
metric() {
    "$PYTHON3" -c "import h5py,sys; [print(repr(float(x))) for x in h5py.File(sys.argv[2] + '/metrics.h5')['metrics/' + sys.argv[1]][:]]" "$1" "$2"
}

# bitwise RUN REF: every step's loss and grad norm and the final checkpoint of run_dir RUN equal REF's
bitwise() {
    compare_runs "$scratch/$1" "$scratch/$2" 0 loss grad_norm 2>&1 &&
        "$PYTHON3" "$top_srcdir/regression/compare_ckpt.py" "$(ls "$scratch/$1"/ckpt_*.h5 | tail -1)" \
            "$(ls "$scratch/$2"/ckpt_*.h5 | tail -1)" 0 2>&1
}

# feature NAME W OVERRIDES...: the pp = 1 reference on W ranks, then each
# zero-bubble schedule on pp = 2 (2W ranks), bitwise equal to it
feature() {
    name=$1 w=$2
    shift 2
    triad_run "$w" "$deck" $common "$@" io.run_dir="'$scratch/$name-ref'"
    st=$?
    [ $st -eq 0 ] || { ok 1 "$name: the pp = 1 reference runs (exit $st)"; tail -5 "$scratch/last.out" | diag; return; }
    for s in zb-h1 zb-h2 zbv; do
        v=1
        [ $s = zbv ] && v=2
        triad_run $((2 * w)) "$deck" $common "$@" parallel.pp=2 parallel.virtual_stages=$v parallel.schedule="'$s'" \
            io.run_dir="'$scratch/$name-$s'"
        st=$?
        out=$([ $st -eq 0 ] && bitwise "$name-$s" "$name-ref")
        rc=$?
        ok $rc "$s, $name: bitwise equal to pp = 1 (every step's loss and grad norm, the final parameters; exit $st)"
        [ $rc -eq 0 ] || { echo "$out" | tail -5 | diag; tail -5 "$scratch/last.out" | diag; }
    done
}

feature fp32 1
feature tp2-sp 2 parallel.tp=2 parallel.sequence_parallel=.true.
feature dp2-overlap 2 parallel.dp=2
feature zero1 2 parallel.dp=2 parallel.zero_stage=1
feature zero2 2 parallel.dp=2 parallel.zero_stage=2
feature zero3 2 parallel.dp=2 parallel.zero_stage=3
feature recompute-full 1 train.recompute="'full'"
feature recompute-selective 1 train.recompute="'selective'"
feature bf16 1 train.precision="'bf16'"
feature fp16-skip 1 train.precision="'fp16'" train.loss_scale_hysteresis=1 diag.inject_overflow_step=2 diag.inject_rank=0
feature cp2 2 parallel.cp=2
feature llama 1 model.arch="'llama'" model.n_kv_head=2 model.ffn_hidden=64

# the fp16 runs really skipped step 2
[ "$(metric skipped "$scratch/fp16-skip-zbv" | tr '\n' ' ')" = "0.0 1.0 0.0 " ]
ok $? "fp16 under zbv: step 2's overflow skipped the update (metrics.h5 skipped = 0 1 0)"

# restart across schedules: zb-h1 for 4 steps, a checkpoint at step 2; from it on under zbv and under 1f1b
long="model.n_layer=4 train.steps=4 train.batch_size=8 train.micro_batch_size=1 io.save_final=.true. train.peak_gflops=100.0"
triad_run 1 "$deck" $long io.run_dir="'$scratch/long-ref'" &&
    triad_run 2 "$deck" $long io.checkpoint_every=2 parallel.pp=2 parallel.schedule="'zb-h1'" io.run_dir="'$scratch/half'"
ok $? "4 steps on pp = 1; 4 steps of zb-h1 on pp = 2, checkpointed at step 2"
for s in "zbv 2" "1f1b 1"; do
    set -- $s
    triad_run 2 "$deck" $long parallel.pp=2 parallel.schedule="'$1'" parallel.virtual_stages=$2 \
        io.restart="'$scratch/half/ckpt_2.h5'" io.run_dir="'$scratch/re-$1'"
    st=$?
    out=$([ $st -eq 0 ] && "$PYTHON3" "$top_srcdir/regression/compare_ckpt.py" "$scratch/re-$1/ckpt_4.h5" \
        "$scratch/long-ref/ckpt_4.h5" 0 2>&1)
    ok $? "zb-h1's step-2 checkpoint restarted under $1: step 4's parameters equal pp = 1's bit for bit (exit $st)"
    [ -n "$out" ] && echo "$out" | tail -3 | diag
    [ $st -eq 0 ] || tail -5 "$scratch/last.out" | diag
done

# triad schedule predicts from a finished run's own times; after a restart in place, those of the steps it ran
triad_run 2 "$deck" $long io.checkpoint_every=2 parallel.pp=2 parallel.schedule="'zb-h1'" \
    io.restart="'$scratch/half/ckpt_2.h5'" io.run_dir="'$scratch/half'" &&
    "$TRIAD" schedule "$deck" world=2 $long parallel.pp=2 parallel.schedule="'zb-h1'" io.run_dir="'$scratch/half'" \
        > "$scratch/sched.out" 2>&1
st=$?
[ $st -eq 0 ] && grep -q "^measured by the run in .*half (metrics.h5, 2 steps)" "$scratch/sched.out" &&
    grep -q "^  rank 1: F [0-9.]* ms, B [0-9.]* ms, W [0-9.]* ms" "$scratch/sched.out" &&
    grep -q "^with the run's costs: bubble [0-9.]* %, idle per rank [0-9.]*/[0-9.]*" "$scratch/sched.out"
ok $? "triad schedule: each rank's F, B and W as the run measured them (2 steps after the restart, not 4) and the bubble with them"
[ $st -eq 0 ] || tail -5 "$scratch/sched.out" | diag
# a run that never finished (killed: its metrics.h5 has the steps, not the timers metrics_close writes):
# the schedule and the FLOPs' costs, no measured ones, no crash
cp -r "$scratch/half" "$scratch/killed" &&
    "$PYTHON3" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); del f['timers']
assert 'metrics/step' in f" "$scratch/killed/metrics.h5"
made=$?
"$TRIAD" schedule "$deck" world=2 $long parallel.pp=2 parallel.schedule="'zb-h1'" io.run_dir="'$scratch/killed'" \
    > "$scratch/sched.out" 2>&1
st=$?
[ $made -eq 0 ] && [ $st -eq 0 ] && grep -q "^F:B:W by the kernels' FLOPs" "$scratch/sched.out" &&
    ! grep -q "^measured by the run" "$scratch/sched.out"
ok $? "triad schedule beside a run that never finished (no /timers): the FLOPs' costs alone, status 0 (got $st)"
[ $st -eq 0 ] || tail -5 "$scratch/sched.out" | diag
done_testing
