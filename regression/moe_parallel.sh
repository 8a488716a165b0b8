#!/bin/sh
# A mixture of experts (docs/moe.md) on the parallel grid: expert
# parallelism ep = 2 and 4 within 1e-6 of ep = 1 (every step's loss, grad
# norm and load-balancing loss) on dp 4, under tp 2 + SP, under pp 2, with
# cp 2 (and cp alone against one rank), and on
# tp 2 x ep 2 x dp 2 x pp 2 (8 ranks);
# a checkpoint restarted across ep, one of another mixture refused (its
# dense layers, router, top-k, shared gate or norm epsilon); a forced imbalance (a router of zeros
# sends every token to experts 0 and 1, on one ep rank: the other's get no
# rows, the capacity drops half); and every feature bitwise equal to its
# plain run: pp 2 under 1f1b, interleaved, zb-h1, zb-h2 and zbv (and zb-h1 with
# ep 2 against 1f1b with ep 2), dp 2 with ZeRO-1 (ZeRO-2 within
# 1e-6: another order of the same sums; ZeRO-3 bitwise equal to it), full
# and selective recomputation, bf16 and fp16 on pp 2, a restart; the statistics in
# metrics.h5; ZeRO-1, 2 and 3 with ep 2 and 4 (the experts' state sliced over
# their own replicas), on the 8-rank grid too, and their checkpoints
# restarted on other ep and ZeRO stages; ep 4 without shared experts;
# leading dense blocks under ep and ZeRO-2/3, restarted on pp 2, and on the
# 8-rank grid with a stage of dense blocks alone; triad eval's held-out
# loss with a capacity the training's (its micro-batch); the hang watchdog naming
# an ep all-to-all.
. "$(dirname "$0")/lib.sh"

cat > "$scratch/moe.nml" << EOF2
&model
  arch = 'llama', n_layer = 4, n_head = 4, n_kv_head = 2, d_model = 32, seq_len = 16, vocab_size = 64
  n_expert = 4, n_expert_active = 2, moe_ffn_hidden = 24, n_shared_expert = 1
/
&train
  steps = 4, batch_size = 8, micro_batch_size = 1, lr = 1.0d-2, min_lr = 1.0d-3, warmup_steps = 2, seed = 7
  peak_gflops = 100.0, moe_aux_loss = 0.02, moe_z_loss = 1e-3
/
&data
  kind = 'synthetic'
/
&io
  save_final = .true.
/
EOF2
deck="$scratch/moe.nml"

# run NAME NP OVERRIDES...: a run into $scratch/NAME
run() {
    name=$1 np=$2
    shift 2
    triad_run "$np" "$deck" "$@" io.run_dir="'$scratch/$name'"
    st=$?
    [ $st -eq 0 ] || { echo "$name: exit $st" | diag; grep -E -A1 '^error' "$scratch/last.out" | diag; }
    return $st
}

# close NAME REF RTOL WHAT: every step's loss, grad norm and load-balancing loss of NAME within RTOL of REF's
close() {
    out=$(compare_runs "$scratch/$1" "$scratch/$2" "$3" loss grad_norm moe_aux_loss 2>&1)
    rc=$?
    ok $rc "$4 (every step's loss, grad norm and load-balancing loss within $3 of $2)"
    [ $rc -eq 0 ] || echo "$out" | tail -5 | diag
}

# bitwise NAME REF WHAT: every step's loss, grad norm, aux loss and the final checkpoint equal
bitwise() {
    out=$(compare_runs "$scratch/$1" "$scratch/$2" 0 loss grad_norm moe_aux_loss 2>&1 &&
        "$PYTHON3" "$top_srcdir/regression/compare_ckpt.py" "$(ls "$scratch/$1"/ckpt_*.h5 | tail -1)" \
            "$(ls "$scratch/$2"/ckpt_*.h5 | tail -1)" 0 2>&1)
    rc=$?
    ok $rc "$3: bitwise equal to $2 (every step's loss, grad norm, load-balancing loss and the final parameters)"
    [ $rc -eq 0 ] || echo "$out" | tail -5 | diag
}

# --- expert parallelism against ep = 1
run ep1 4 parallel.dp=4 && run ep2 4 parallel.dp=4 parallel.ep=2 && run ep4 4 parallel.dp=4 parallel.ep=4
close ep2 ep1 1e-6 "ep 2 on dp 4"
close ep4 ep1 1e-6 "ep 4 on dp 4"
# without shared experts (Mixtral): what overlaps the dispatch is each rank's own rows at its own experts
run ns-ep1 4 parallel.dp=4 model.n_shared_expert=0 && run ns-ep4 4 parallel.dp=4 parallel.ep=4 model.n_shared_expert=0
close ns-ep4 ns-ep1 1e-6 "ep 4 on dp 4 without shared experts"
grep -q 'experts over ep 4 of the dp ranks' "$scratch/last.out"
ok $? "the grid line names the expert parallelism"
out=$("$PYTHON3" - "$scratch/ep4/metrics.h5" 2>&1 << 'PY'

import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    rows, names, ops = f["comm/bytes"][()], f["comm"].attrs["rows"].decode().split(), f["comm"].attrs["columns"].decode().split()
    a2a = rows[names.index("ep")][ops.index("all-to-all")]
    print("ep 4: %.0f bytes of all-to-all on rank 0" % a2a)
    sys.exit(0 if a2a > 0 else 1)
PY
)
ok $? "ep 4: the all-to-all is counted in metrics.h5's /comm (communicator ep)"
echo "$out" | diag
run tp-ep1 4 parallel.tp=2 parallel.dp=2 parallel.sequence_parallel=.true. &&
    run tp-ep2 4 parallel.tp=2 parallel.dp=2 parallel.sequence_parallel=.true. parallel.ep=2
close tp-ep2 tp-ep1 1e-6 "ep 2 under tp 2 + SP x dp 2"
run pp-ep1 4 parallel.pp=2 parallel.dp=2 && run pp-ep2 4 parallel.pp=2 parallel.dp=2 parallel.ep=2
close pp-ep2 pp-ep1 1e-6 "ep 2 under pp 2 x dp 2"
run cp2 2 parallel.cp=2 && run cp2-ep2 2 parallel.cp=2 parallel.ep=2 && run cp1 1
close cp2 cp1 1e-6 "cp 2 (the auxiliary losses' sums over the cp ranks)"
close cp2-ep2 cp1 1e-6 "cp 2 with ep 2 (the tokens exchanged between the cp ranks)"
"$PYTHON3" - "$scratch/cp2/metrics.h5" "$scratch/cp1/metrics.h5" << 'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(f, "r")["metrics/moe_tokens"][()] for f in sys.argv[1:])
sys.exit(0 if a.shape == b.shape and (a == b).all() and (a.sum(axis=2) == 8 * 16 * 2).all() else 1)
PY
ok $? "cp 2: the tokens each expert took (metrics/moe_tokens) equal one rank's, 2 choices of 128 tokens a layer"
"$PYTHON3" "$top_srcdir/tools/plot_metrics.py" "$scratch/cp2" -o "$scratch/moe.png" --quantities loss,moe_tokens \
    --smooth 2 > "$scratch/plot.out" 2>&1 && [ -s "$scratch/moe.png" ]
ok $? "tools/plot_metrics.py draws moe_tokens ([steps, L, E]: a line per layer and expert)"
tail -3 "$scratch/plot.out" | diag
run grid 8 parallel.tp=2 parallel.sequence_parallel=.true. parallel.pp=2 parallel.dp=2 parallel.ep=2 train.threads=1
close grid ep1 1e-6 "tp 2 + SP x ep 2 x dp 2 x pp 2 on 8 ranks"

# --- a checkpoint of ep 2 continued on ep 4 and on ep 1
run part-ep2 4 parallel.dp=4 parallel.ep=2 train.steps=4 io.checkpoint_every=2 &&
    cp -r "$scratch/part-ep2" "$scratch/part-ep1" && cp -r "$scratch/part-ep2" "$scratch/part-ep4" &&
    run part-ep4 4 parallel.dp=4 parallel.ep=4 io.restart="'$scratch/part-ep4/ckpt_2.h5'" &&
    run part-ep1 4 parallel.dp=4 io.restart="'$scratch/part-ep1/ckpt_2.h5'"
close part-ep4 ep1 1e-6 "ep 2's step-2 checkpoint restarted on ep 4"
close part-ep1 ep1 1e-6 "ep 2's step-2 checkpoint restarted on ep 1"

# --- a restart or init_from of another mixture is refused before a tensor
# is read, the key named (these read fine as tensors: the leading dense
# block's MLP has the shared expert's shape; the others change no shape)
for change in "model.moe_dense_layers=1 model.ffn_hidden=24|moe_dense_layers = 1 here, 0 in the checkpoint" \
    "model.moe_router='sigmoid'|moe_router = 'sigmoid' here, 'softmax' in the checkpoint" \
    "model.moe_norm_topk=.false.|moe_norm_topk = .false. here, .true. in the checkpoint" \
    "model.moe_shared_gate=.false.|moe_shared_gate = .false. here, .true. in the checkpoint" \
    "model.norm_eps=1e-3|norm_eps = 0.001 here, 1e-05 in the checkpoint"; do
    keys=${change%%|*} said=${change#*|}
    for how in restart init_from; do
        rm -rf "$scratch/other"
        # shellcheck disable=SC2086
        triad_run 1 "$deck" $keys io.$how="'$scratch/part-ep2/ckpt_2.h5'" io.run_dir="'$scratch/other'"
        st=$?
        grep "^error" "$scratch/last.out" | diag
        [ $st -eq 1 ] && grep -q "the checkpoint holds another model (&model: $said)" "$scratch/last.out" &&
            [ ! -e "$scratch/other/metrics.h5" ]
        ok $? "io.$how of the mixture's checkpoint with $keys: refused (status $st), '$said' named, nothing written"
    done
done

# --- a forced imbalance: the router of zeros gives every expert the same
# score, and the first two (on ep rank 0) win every token
# (written as weights from elsewhere: /model alone, no checksums)
run zero0 1 train.steps=0 && "$PYTHON3" - "$scratch/zero0/ckpt_0.h5" "$scratch/skew.h5" << 'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f, h5py.File(sys.argv[2], "w") as g:
    def copy(name, obj):
        if isinstance(obj, h5py.Dataset):
            g["model/" + name] = 0 * obj[()] if name.endswith("router_w") else obj[()]
    f["model"].visititems(copy)
PY
init="io.init_from='$scratch/skew.h5'"
run skew-ep1 4 parallel.dp=4 train.moe_capacity=1.0 "$init" &&
    run skew-ep2 4 parallel.dp=4 parallel.ep=2 train.moe_capacity=1.0 "$init"
close skew-ep2 skew-ep1 1e-6 "a forced imbalance on ep 2"
out=$("$PYTHON3" - "$scratch/skew-ep2/metrics.h5" 2>&1 << 'PY'

import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    t, drop = f["metrics/moe_tokens"][0], f["metrics/moe_dropped"][0]
    print("step 1: tokens per expert of layer 0 %s, dropped %.3f" % (list(t[0]), drop))
    # 8 sequences x 16 tokens, 2 choices each, all to experts 0 and 1; capacity 1.0 keeps a quarter of each rank's
    # choices per expert: half of them
    sys.exit(0 if t.shape == (4, 4) and (t[:, 0] == 128).all() and (t[:, 1] == 128).all() and (t[:, 2:] == 0).all()
             and drop == 0.5 else 1)
PY
)
ok $? "a forced imbalance: every token chooses experts 0 and 1 (metrics/moe_tokens), the capacity drops half of the choices (moe_dropped)"
echo "$out" | diag

# --- every feature bitwise equal to its plain run
run ref 1 && run pp2 2 parallel.pp=2 && run pp2v 2 parallel.pp=2 parallel.virtual_stages=2 parallel.schedule="'interleaved'"
bitwise pp2 ref "pp 2, 1f1b"
bitwise pp2v ref "pp 2, interleaved"
for s in zb-h1 zb-h2 zbv; do # (the experts' backward split: B the input gradients, W the weights' later)
    v=1
    [ $s = zbv ] && v=2
    run $s 2 parallel.pp=2 parallel.virtual_stages=$v parallel.schedule="'$s'" && bitwise $s ref "pp 2, $s"
done
run zb-ep2 4 parallel.pp=2 parallel.dp=2 parallel.ep=2 parallel.schedule="'zb-h1'"
bitwise zb-ep2 pp-ep2 "zb-h1 with ep 2 (W's all-to-alls) on pp 2 x dp 2, against 1f1b"
run full 1 train.recompute="'full'" && run sel 1 train.recompute="'selective'"
bitwise full ref "full recomputation"
bitwise sel ref "selective recomputation"
# (ZeRO-1 sums each replica's micro-batches, then over the replicas, as dp
# does; ZeRO-2 and 3 reduce each micro-batch's layer as it ends: another
# order of the same sums)
run dp2 2 parallel.dp=2
for z in 1 2 3; do run zero$z 2 parallel.dp=2 parallel.zero_stage=$z; done
bitwise zero1 dp2 "ZeRO-1 on dp 2"
close zero2 dp2 1e-6 "ZeRO-2 on dp 2"
bitwise zero3 zero2 "ZeRO-3 on dp 2"
run bf16 1 train.precision="'bf16'" && run bf16-pp2 2 train.precision="'bf16'" parallel.pp=2
bitwise bf16-pp2 bf16 "bf16 on pp 2"
run fp16 1 train.precision="'fp16'" && run fp16-pp2 2 train.precision="'fp16'" parallel.pp=2
bitwise fp16-pp2 fp16 "fp16 (dynamic loss scale) on pp 2"
run halves 1 train.steps=4 io.checkpoint_every=2 && run halves 1 io.restart="'$scratch/halves/ckpt_2.h5'"
bitwise halves ref "restarted from step 2"

# --- a NaN in one expert: the NaN watch names the layer's experts and the expert's tensor
triad_run 1 "$deck" diag.inject_nan_step=2 diag.inject_tensor="'h.1/expert.3/fc_w'" train.steps=6 \
    io.run_dir="'$scratch/nan'"
[ $? -eq 1 ] && grep -q "First non-finite forward output: h.1/experts' fc .*Non-finite parameter: h.1/expert.3/fc_w" \
    "$scratch/last.out"
ok $? "a NaN injected into h.1/expert.3/fc_w stops the run naming the experts' output and that expert's tensor"

# --- ZeRO under expert parallelism: the dense tensors' state sliced over the
# 4 dp ranks, each expert's over its 2 replicas (edp); a checkpoint of those
# slices restarted without ZeRO on ep 4 and with ZeRO-3 on ep 1
for z in 1 2 3; do run ep2-zero$z 4 parallel.dp=4 parallel.ep=2 parallel.zero_stage=$z; done
close ep2-zero1 ep1 1e-6 "ZeRO-1 with ep 2 on dp 4"
close ep2-zero2 ep1 1e-6 "ZeRO-2 with ep 2 on dp 4"
bitwise ep2-zero3 ep2-zero2 "ZeRO-3 with ep 2 on dp 4"
run ep4-zero2 4 parallel.dp=4 parallel.ep=4 parallel.zero_stage=2
close ep4-zero2 ep1 1e-6 "ZeRO-2 with ep 4 on dp 4"
run grid-zero3 8 parallel.tp=2 parallel.sequence_parallel=.true. parallel.pp=2 parallel.dp=2 parallel.ep=2 \
    parallel.zero_stage=3 train.threads=1
close grid-zero3 ep1 1e-6 "ZeRO-3 on tp 2 + SP x ep 2 x dp 2 x pp 2 (8 ranks)"
run zpart 4 parallel.dp=4 parallel.ep=2 parallel.zero_stage=2 io.checkpoint_every=2 &&
    cp -r "$scratch/zpart" "$scratch/zpart-ep4" && cp -r "$scratch/zpart" "$scratch/zpart-z3" &&
    run zpart-ep4 4 parallel.dp=4 parallel.ep=4 io.restart="'$scratch/zpart-ep4/ckpt_2.h5'" &&
    run zpart-z3 4 parallel.dp=4 parallel.zero_stage=3 io.restart="'$scratch/zpart-z3/ckpt_2.h5'"
close zpart-ep4 ep1 1e-6 "ZeRO-2 with ep 2's step-2 checkpoint restarted on ep 4 without ZeRO"
close zpart-z3 ep1 1e-6 "ZeRO-2 with ep 2's step-2 checkpoint restarted on ep 1 with ZeRO-3"

# --- leading dense blocks (model.moe_dense_layers): a rank whose layers are
# both kinds (ZeRO's layer buffers and gathers of different sizes, a dense
# layer's experts' part empty) and a pipeline stage of dense layers alone
# under ep (no expert on it)
dense="model.moe_dense_layers=1 model.ffn_hidden=40"
run dl-ep1 4 parallel.dp=4 $dense && run dl-ep2 4 parallel.dp=4 parallel.ep=2 $dense
close dl-ep2 dl-ep1 1e-6 "1 leading dense block: ep 2 on dp 4"
for z in 2 3; do run dl-zero$z 4 parallel.dp=4 parallel.ep=2 parallel.zero_stage=$z $dense io.checkpoint_every=2; done
close dl-zero2 dl-ep1 1e-6 "1 leading dense block: ZeRO-2 with ep 2 on dp 4"
"$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$scratch/dl-zero2/ckpt_2.h5" > "$scratch/info.out" 2>&1 &&
    grep -q "^/model/h.1/expert.3/fcproj_w .* ok$" "$scratch/info.out" && grep -q "^verdict *ok$" "$scratch/info.out"
ok $? "tools/ckpt_info.py --verify: a mixture's checkpoint (a dense block, routers, experts, shared experts) is whole"
tail -2 "$scratch/info.out" | diag
bitwise dl-zero3 dl-zero2 "1 leading dense block: ZeRO-3 with ep 2 on dp 4"
cp -r "$scratch/dl-zero2" "$scratch/dl-part" &&
    run dl-part 2 parallel.pp=2 $dense io.restart="'$scratch/dl-part/ckpt_2.h5'"
close dl-part dl-ep1 1e-6 "1 leading dense block: ZeRO-2 with ep 2's step-2 checkpoint restarted on pp 2"
dense="model.moe_dense_layers=2 model.ffn_hidden=40"
run dl2-ref 1 $dense &&
    run dl2-grid 8 parallel.tp=2 parallel.sequence_parallel=.true. parallel.pp=2 parallel.dp=2 parallel.ep=2 \
        parallel.zero_stage=3 train.threads=1 $dense
close dl2-grid dl2-ref 1e-6 "2 leading dense blocks, the first stage dense alone: ZeRO-3 on tp 2 + SP x ep 2 x dp 2 x pp 2"

# --- an overflow injected on ep rank 1 (diag.inject_overflow_step) goes into
# a gradient its norm counts (an expert's; it took wte, which ep rank 0
# counts), so every rank skips the step
run ovf-ep 2 parallel.dp=2 parallel.ep=2 train.precision="'fp16'" diag.inject_overflow_step=2 diag.inject_rank=1
[ $? -eq 0 ] && grep -q "step 2: gradients not finite (first on world rank 1): update skipped on every rank" \
    "$scratch/last.out"
ok $? "fp16 on ep 2: an overflow injected on ep rank 1 skips step 2 on every rank"

# --- the capacity's held-out loss: per micro-batch, so triad eval keeps the
# training's micro-batch and gives its evaluation (to the 9 decimals it
# prints): micro_batch_size = 2 on one rank, evaluated on one rank and on dp 2
# (2 a replica); micro_batch_size = 0 on dp 2 (4 a replica: batch_size / the
# dp the checkpoint records), evaluated on one rank; where it does not divide
# (dp 2 of a batch of 2) a note says whose micro-batches the loss is of
"$PYTHON3" -c "import random, sys
r = random.Random(5)
for name, n in (('train', 6000), ('val', 2000)):
    open(sys.argv[1] + '/' + name + '.txt', 'w').write(''.join(r.choice('abcdefgh \n') for _ in range(n)))" "$scratch"
text="model.vocab_size=256 data.kind='text' data.path='$scratch/train.txt' data.val_path='$scratch/val.txt'"
capacity="train.moe_capacity=0.5 train.eval_every=4 train.eval_batches=2"
# shellcheck disable=SC2086
run cap 1 $text $capacity train.micro_batch_size=2 && run cap-dp2 2 $text $capacity parallel.dp=2
same_eval() { # same_eval RUN WHAT NP ARGS...: triad eval's held-out loss is RUN's last evaluation (9 decimals)
    name=$1 what=$2 np=$3
    shift 3
    triad_run "$np" eval "$scratch/$name/ckpt_4.h5" "$@"
    st=$?
    loss=$(sed -n 's/^held-out .*: loss \([0-9.]*\) .*/\1/p' "$scratch/last.out")
    grep "^held-out\|micro-batch\|^note" "$scratch/last.out" | diag
    [ $st -eq 0 ] && ! grep -q "^note: .*micro-batch" "$scratch/last.out" && "$PYTHON3" -c "import h5py, sys
sys.exit('%.9f' % h5py.File(sys.argv[1], 'r')['eval/loss'][-1] != sys.argv[2])" "$scratch/$name/metrics.h5" "$loss"
    ok $? "moe_capacity 0.5: triad eval $what gives the training's held-out loss ($loss)"
}
same_eval cap "of micro-batches of 2, on 1 rank" 1
same_eval cap "of micro-batches of 2, on dp 2" 2
same_eval cap-dp2 "of micro_batch_size = 0 on dp 2, on 1 rank" 1
triad_run 2 eval "$scratch/cap/ckpt_4.h5" train.batch_size=2
[ $? -eq 0 ] && grep -q "^note: .*the training's micro-batch of 2 sequences does not divide this grid's 1 sequences per replica: with moe_capacity = 0.5 the held-out loss is that of micro-batches of 1 (set train.micro_batch_size to choose)" "$scratch/last.out"
ok $? "... and on dp 2 of a batch of 2, a note: the loss is that of micro-batches of 1"
triad_run 1 eval "$scratch/cap/ckpt_4.h5" train.micro_batch_size=0
[ $? -eq 0 ] && grep -q "1 micro-batch(es) of 8 sequences per replica" "$scratch/last.out"
ok $? "... and train.micro_batch_size = 0 given on the command line is taken (batch_size / dp: 8)"
# the capacity over each cp rank's positions: trained on cp 2, evaluated on cp 2 the training's loss; on one rank
# a note says it is not
# shellcheck disable=SC2086
run cap-cp2 2 $text $capacity parallel.cp=2
same_eval cap-cp2 "of cp 2, on cp 2" 2 parallel.cp=2
triad_run 1 eval "$scratch/cap-cp2/ckpt_4.h5"
[ $? -eq 0 ] && grep -q "^note: .*trained on cp = 2, evaluated on cp = 1, the held-out loss is not the training's (parallel.cp = 2 gives it)" "$scratch/last.out"
ok $? "... and of cp 2 on one rank, a note: the loss is not the training's, parallel.cp = 2 gives it"

# --- the hang watchdog names the all-to-all: rank 0 sleeps 8 s before its
# step, so rank 1 waits for it in its first mixture layer's exchange
triad_run 2 "$deck" parallel.dp=2 parallel.ep=2 train.steps=3 diag.hang_timeout=3 diag.slow_rank=0 \
    diag.slow_seconds=8 io.run_dir="'$scratch/hang'"
st=$?
grep "^blocked in: " "$scratch/hang/hang.rank00001.txt" 2> /dev/null | diag
[ $st -eq 4 ] && grep -q "^blocked in: ep all-to-all" "$scratch/hang/hang.rank00001.txt"
ok $? "a rank that waits too long in the experts' exchange: status 4 (got $st), its report names the ep all-to-all"
done_testing
