#!/bin/sh
# Mixed precision: bf16 and fp16 runs stay close to fp32 (stated tolerances)
# while really rounding; an overflow anywhere skips the step on every rank
# and the loss scale backs off and grows as configured; a real fp16
# overflow recovers; a NaN that persists stops the run naming the tensor;
# restarts are bitwise; an overflow under ZeRO-2 is skipped by every rank.
# (bf16 and fp16 against fp32 in every layout, with recomputation and ZeRO:
# the regression cases bf16*, fp16_overflow_tp2_dp2.)
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
# metric Q RUN: the column Q of RUN's metrics.h5, one value per line
metric() {
    "$PYTHON3" -c "import h5py,sys; [print(repr(float(x))) for x in h5py.File(sys.argv[2] + '/metrics.h5')['metrics/' + sys.argv[1]][:]]" "$1" "$2"
}

for p in fp32 bf16 fp16; do
    triad_run 1 "$deck" train.precision="'$p'" io.run_dir="'$scratch/$p'"
    ok $? "precision = '$p' trains 30 steps on one rank"
done
# bf16 keeps 8 significant bits, fp16 11.  Measured over the 30 steps: loss
# 2.7e-3 (bf16) and 6.3e-4 (fp16), grad norm 8.4e-2 and 9.6e-3.
for tol in "bf16 1e-2 0.1" "fp16 2.5e-3 0.03"; do
    set -- $tol
    out=$(compare_runs "$scratch/$1" "$scratch/fp32" "$2" loss && compare_runs "$scratch/$1" "$scratch/fp32" "$3" grad_norm)
    ok $? "$1: per-step loss within $2, grad norm within $3 relative of fp32"
    echo "$out" | diag
done
dev() { compare_runs "$scratch/$1" "$scratch/fp32" 0 loss | sed -n 's/.*deviation \([^ ]*\).*/\1/p'; }
b=$(dev bf16); h=$(dev fp16)
awk "BEGIN { exit !($b > 1e-5 && $h > 1e-6 && $h < $b) }"
ok $? "the formats are real: bf16 deviates from fp32 ($b), fp16 less ($h)"

# (stored activations packed in 16 bits: the regression case bf16_pp2_1f1b)

# a forced overflow on one rank: skipped everywhere, replicas stay bitwise equal
triad_run 4 "$deck" train.precision="'fp16'" parallel.tp=2 train.steps=10 train.loss_scale_window=4 \
    train.loss_scale_hysteresis=1 diag.inject_overflow_step=6 diag.inject_rank=3 diag.check_every=1 \
    io.run_dir="'$scratch/ovf'"
st=$?
ok $st "fp16 on tp 2 x dp 2 with an overflow injected on world rank 3 at step 6 finishes"
grep -q "step 6: gradients not finite (first on world rank 3): update skipped on every rank" "$scratch/last.out"
ok $? "the overflow is found on rank 3 and the step is skipped by one consensus"
[ "$(grep -c 'replica(s) bitwise identical' "$scratch/last.out")" -eq 10 ]
ok $? "the replicas hold bitwise-identical parameters after every step, the skipped one included"
skipped=$(metric skipped "$scratch/ovf" | tr '\n' ' ')
scales=$(metric loss_scale "$scratch/ovf" | tr '\n' ' ')
[ "$skipped" = "0.0 0.0 0.0 0.0 0.0 1.0 0.0 0.0 0.0 0.0 " ] || [ "$skipped" = "0 0 0 0 0 1 0 0 0 0 " ]
ok $? "metrics.h5 records step 6 as skipped, no other ($skipped)"
# window 4: grows after steps 4; hysteresis 1: backs off after step 6; grows after 10 ... (not reached)
[ "$scales" = "65536.0 65536.0 65536.0 65536.0 131072.0 131072.0 65536.0 65536.0 65536.0 65536.0 " ]
ok $? "the loss scale grows after 4 good steps and backs off after the overflow ($scales)"
out=$(metric loss "$scratch/ovf" | sed -n 6p)
awk "BEGIN { exit !($out < 1e30) }"
ok $? "the loss of the skipped step is still the finite forward loss ($out)"

# ... and on tp rank 1 of the last stage (tp 2 x pp 2): the gradient it is put into is one its norm counts (it
# took the first on the rank, the tied wte's copy or a replicated norm, which tp rank 0 and the first stage count)
triad_run 4 "$deck" train.precision="'fp16'" parallel.tp=2 parallel.pp=2 train.steps=6 train.loss_scale_hysteresis=1 \
    diag.inject_overflow_step=3 diag.inject_rank=3 diag.check_every=1 io.run_dir="'$scratch/ovf-pp'"
st=$?
grep "^error\|not finite" "$scratch/last.out" | diag
[ $st -eq 0 ] && grep -q "step 3: gradients not finite (first on world rank 3): update skipped on every rank" \
    "$scratch/last.out" && [ "$(metric skipped "$scratch/ovf-pp" | tr '\n' ' ')" = "0.0 0.0 1.0 0.0 0.0 0.0 " ]
ok $? "fp16 on tp 2 x pp 2 with an overflow injected on world rank 3 (tp rank 1, last stage): step 3 skipped everywhere (status $st)"

# fp16 under ZeRO-2: an overflow injected into one rank's gradient slice is skipped by all
triad_run 4 "$deck" model.n_layer=4 train.steps=20 train.micro_batch_size=2 parallel.zero_stage=2 \
    train.precision="'fp16'" train.loss_scale_hysteresis=1 diag.inject_overflow_step=4 diag.inject_rank=2 \
    diag.check_every=1 io.run_dir="'$scratch/z2fp16'"
st=$?
[ $st -eq 0 ] && grep -q "step 4: gradients not finite (first on world rank 2)" "$scratch/last.out" &&
    grep -q "step 4: loss scale 65536 -> 32768" "$scratch/last.out"
ok $? "fp16 with zero_stage = 2: an overflow in rank 2's slice skips step 4 everywhere, the scale backs off"

# hysteresis 2 (default): one overflow skips the step but keeps the scale
triad_run 2 "$deck" train.precision="'fp16'" train.steps=8 diag.inject_overflow_step=3 diag.inject_rank=1 \
    io.run_dir="'$scratch/hyst'"
scales=$(metric loss_scale "$scratch/hyst" | sort -u | tr '\n' ' ')
[ "$scales" = "65536.0 " ] && [ "$(metric skipped "$scratch/hyst" | sed -n 3p)" = "1.0" ]
ok $? "with loss_scale_hysteresis = 2 a single overflow is skipped without a backoff"

# a real overflow: 2^24 overflows fp16 gradients; the scale backs off until they fit
triad_run 1 "$deck" train.precision="'fp16'" train.loss_scale=16777216 train.loss_scale_hysteresis=1 \
    io.run_dir="'$scratch/real'"
st=$?
first=$(metric skipped "$scratch/real" | head -1)
last=$(metric loss_scale "$scratch/real" | tail -1)
[ $st -eq 0 ] && [ "$first" = "1.0" ] && awk "BEGIN { exit !($last < 16777216) }"
ok $? "loss_scale = 2^24 overflows fp16 for real: the first step is skipped, the scale falls to $last"

# ... but at the smallest scale (loss_scale_min) nothing backs off: diag.nonfinite_steps = 3 such steps in a row
# stop the run (it skipped every update to the end and wrote its checkpoint, status 0)
triad_run 1 "$deck" train.precision="'fp16'" train.loss_scale=1e30 train.loss_scale_min=1e30 train.steps=20 \
    io.run_dir="'$scratch/floor'"
st=$?
grep "^error\|hint" "$scratch/last.out" | diag
[ $st -eq 1 ] && grep -q "^error: steps 1-3: the gradients were not finite at the smallest loss scale, train.loss_scale_min = 1e+30, 3 steps in a row" "$scratch/last.out" &&
    grep -q "hint: lower train.loss_scale_min" "$scratch/last.out" && ! ls "$scratch/floor"/ckpt_*.h5 > /dev/null 2>&1
ok $? "fp16 whose gradients overflow at loss_scale_min: stopped after 3 skipped steps in a row (status $st), no checkpoint"
compare_runs "$scratch/real" "$scratch/fp16" 0.05 loss > /dev/null ||
    "$PYTHON3" -c "import h5py,sys; l=h5py.File(sys.argv[1]+'/metrics.h5')['metrics/loss'][:]; sys.exit(not l[-1] < l[0] - 0.1)" "$scratch/real"
ok $? "and the run still learns"

# fp16 restart: the scaler state is in the checkpoint, the continuation bitwise
common="train.precision='fp16' train.steps=12 train.loss_scale_window=3 io.checkpoint_every=6"
triad_run 2 "$deck" $common io.run_dir="'$scratch/full'"
mkdir -p "$scratch/rs" && cp "$scratch/full/ckpt_6.h5" "$scratch/full/metrics.h5" "$scratch/rs/"
triad_run 2 "$deck" $common io.restart=auto io.run_dir="'$scratch/rs'"
st=$?
[ $st -eq 0 ] && compare_runs "$scratch/rs" "$scratch/full" 0 loss grad_norm loss_scale > /dev/null
ok $? "fp16 restart at step 6: losses, grad norms and loss scales of steps 7-12 bitwise equal"

# fp16 from a bf16 checkpoint: the file has no scaler, the deck's scale applies
triad_run 1 "$deck" train.precision="'bf16'" train.steps=12 io.checkpoint_every=6 io.run_dir="'$scratch/b16'"
mkdir -p "$scratch/x16" && cp "$scratch/b16/ckpt_6.h5" "$scratch/b16/metrics.h5" "$scratch/x16/"
triad_run 1 "$deck" train.precision="'fp16'" train.steps=12 io.restart=auto io.run_dir="'$scratch/x16'"
st=$?
[ $st -eq 0 ] && [ "$(metric loss_scale "$scratch/x16" | sed -n 7p)" = "65536.0" ]
ok $? "an fp16 run restarted from a bf16 checkpoint starts from the deck's loss scale"

# (bf16 under recomputation, ZeRO-1 and tp x pp: the regression cases bf16_*)
triad_run 2 "$deck" train.precision="'bf16'" io.save_final=.true. io.run_dir="'$scratch/bf16_2'"

# the checkpoint holds the fp32 master weights, not their bf16 rounding
"$PYTHON3" - "$scratch/bf16_2/ckpt_30.h5" <<'PY' 2>/dev/null
import sys, h5py, numpy as np
w = h5py.File(sys.argv[1])["model/h.0/fc_w"][:].astype(np.float32)
sys.exit(0 if (w.view(np.uint32) & 0xffff).any() else 1)
PY
ok $? "a bf16 run's checkpoint holds fp32 master weights (low mantissa bits in use)"

# a NaN that stays: the run stops after diag.nonfinite_steps, naming the tensor
triad_run 4 "$deck" model.n_layer=4 parallel.pp=2 train.micro_batch_size=2 diag.inject_nan_step=3 \
    diag.inject_tensor="'h.2/fc_w'" io.checkpoint_every=2 io.run_dir="'$scratch/nan'"
st=$?
[ $st -eq 1 ] && grep -q "the loss was not finite for 3 steps in a row (steps 3-5)" "$scratch/last.out"
ok $? "a NaN injected into h.2/fc_w stops the run after 3 non-finite steps with status 1"
grep -q "First non-finite forward output: h.2/fc (world rank 2). Non-finite parameter: h.2/fc_w" "$scratch/last.out"
ok $? "the message names the first non-finite output (h.2/fc) and the parameter (h.2/fc_w)"
[ -f "$scratch/nan/ckpt_2.h5" ] && [ ! -f "$scratch/nan/ckpt_4.h5" ]
ok $? "the checkpoint from before stays; none is written while the loss is not finite"
triad_run 1 "$deck" diag.inject_nan_step=5 diag.inject_tensor="'h.7/fc_w'" io.checkpoint_every=2 io.run_dir="'$scratch/bad'"
[ $? -eq 1 ] && grep -q "diag.inject_tensor = 'h.7/fc_w' names no parameter" "$scratch/last.out" &&
    ! grep -q "^step " "$scratch/last.out" && ! ls "$scratch/bad"/ckpt_*.h5 > /dev/null 2>&1
ok $? "an unknown diag.inject_tensor is a clear error at start-up (it trained to the step and wrote checkpoints first)"
done_testing
