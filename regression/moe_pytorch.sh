#!/bin/sh
# The mixture-of-experts llama against an independent PyTorch implementation
# of Hugging Face's MixtralForCausalLM and Qwen2MoeForCausalLM
# (regression/moe_torch.py): from the same initial weights and the same
# text, 20 AdamW steps of per-step fp32 losses within 1e-5 relative, and the
# held-out loss (train.eval_every) after steps 5, 10, 15, 20 too.  Every
# layer is MoE (4 experts, top-2, two micro-batches per step, routed each on
# its own) with the load-balancing loss in the objective: Mixtral's softmax
# router with renormalised top-2; Qwen2-MoE's shared expert behind its
# sigmoid gate, top-2 not renormalised, with the router z-loss; a sigmoid
# router; a capacity factor of 1.0 that drops slots; on one rank, on dp 2,
# and on tp 2 (sequence parallel) x pp 2.  Then leading dense blocks
# (model.moe_dense_layers) on one rank and on tp 2 x pp 2 with a stage of
# dense blocks alone, and their greedy text.
. "$(dirname "$0")/lib.sh"

if ! "$PYTHON3" -c "import torch" 2> /dev/null; then
    skip "no PyTorch for $PYTHON3 (Debian: apt-get install python3-torch; tools/install-deps.sh installs it)"
    done_testing
fi
corpus="$top_srcdir/regression/cases/data/corpus.txt"
cat > "$scratch/moe.nml" << EOF2
&model
  arch = 'llama', n_layer = 2, n_head = 4, n_kv_head = 2, d_model = 32, seq_len = 16
  vocab_size = 256, norm_eps = 1e-6, rope_theta = 500000
  n_expert = 4, n_expert_active = 2, moe_ffn_hidden = 24
/
&train
  steps = 20, batch_size = 4, micro_batch_size = 2, lr = 3.0d-3, min_lr = 3.0d-4, warmup_steps = 3, seed = 11
  peak_gflops = 100.0, moe_aux_loss = 0.02
  eval_every = 5, eval_batches = 3
/
&data
  kind = 'text', path = '$corpus', shuffle = .false., val_path = '$corpus'
/
EOF2
# reference WHAT NP [overrides]: a run on NP ranks against the PyTorch
# reference, from the initial weights of the same deck (train.steps = 0)
n=0
reference() {
    what=$1 np=$2
    shift 2
    n=$((n + 1))
    r="$scratch/run$n"
    : > "$r.cmp"
    triad_run "$np" "$scratch/moe.nml" train.steps=0 "$@" io.run_dir="'$r.0'" &&
        triad_run "$np" "$scratch/moe.nml" "$@" io.run_dir="'$r'" &&
        "$PYTHON3" "$top_srcdir/regression/moe_torch.py" "$r" "$r.0/ckpt_0.h5" "$corpus" > "$r.cmp" 2>&1
    st=$?
    worst=$(sed -n 's/^worst //p' "$r.cmp")
    [ $st -eq 0 ] && [ "$(grep -c '^ *[0-9]' "$r.cmp")" -eq 20 ] && [ "$(grep -c '^eval' "$r.cmp")" -eq 4 ] &&
        [ "$(grep -c '^aux' "$r.cmp")" -eq 20 ] && awk "BEGIN { exit !($worst <= 1e-5) }"
    ok $? "$what: 20 steps of per-step losses, load-balancing losses and 4 held-out losses within 1e-5 of PyTorch (worst ${worst:-none})"
    [ -n "$worst" ] || diag < "$scratch/last.out"
    tail -n 4 "$r.cmp" | diag
}
reference "mixtral: softmax, top-2 renormalised, aux loss, 1 rank" 1
reference "qwen2-moe: shared expert with sigmoid gate, top-2 not renormalised, z-loss, 1 rank" 1 \
    model.n_shared_expert=2 model.moe_norm_topk=.false. model.qkv_bias=.true. train.moe_z_loss=1e-3
reference "sigmoid router, renormalised, 1 rank" 1 model.moe_router='sigmoid'
reference "capacity factor 1.0 with drops, 1 rank" 1 train.moe_capacity=1.0
drops=$(sed -n 's/.*| dropped \([0-9.]*\)%.*/\1/p' "$scratch/last.out" | sort -n | tail -n 1)
awk "BEGIN { exit !(${drops:-0} > 1) }"
ok $? "capacity factor 1.0: the progress line shows token choices dropped (up to ${drops:-none}% a step)"
reference "mixtral on dp 2" 2
reference "qwen2-moe on tp 2 + SP x pp 2" 4 parallel.tp=2 parallel.pp=2 parallel.sequence_parallel=.true. \
    model.n_shared_expert=2 model.moe_norm_topk=.false. model.qkv_bias=.true.
# leading dense blocks (Qwen2-MoE's mlp_only_layers, DeepSeek's first_k_dense_replace): the dense MLP ffn_hidden
# wide, the auxiliary losses the means over the MoE blocks; on tp 2 + SP x pp 2 the first stage holds dense blocks
# alone
qd="model.n_shared_expert=2 model.moe_norm_topk=.false. model.qkv_bias=.true. model.ffn_hidden=40"
reference "qwen2-moe, 1 leading dense block of 3, z-loss, 1 rank" 1 $qd model.n_layer=3 model.moe_dense_layers=1 \
    train.moe_z_loss=1e-3
dl=$r
reference "qwen2-moe, 3 leading dense blocks of 4, on tp 2 + SP x pp 2" 4 $qd model.n_layer=4 \
    model.moe_dense_layers=3 parallel.tp=2 parallel.pp=2 parallel.sequence_parallel=.true.
# triad sample of a trained mixture: its greedy text on 1 and 2 ranks (tp 2)
# equals the reference's greedy continuation
last=$(ls "$scratch/run2"/ckpt_*.h5 | tail -n 1)
"$PYTHON3" "$top_srcdir/regression/moe_torch.py" --greedy "$last" The 12 > "$scratch/ref.txt" 2>&1
for np in 1 2; do
    $MPIEXEC -n $np "$TRIAD" sample "$last" sample.prompt=The sample.max_new_tokens=12 sample.temperature=0 \
        > "$scratch/moe$np.txt" 2> "$scratch/last.out"
    [ $? -eq 0 ] && cmp -s "$scratch/moe$np.txt" "$scratch/ref.txt"
    ok $? "qwen2-moe, triad sample on $np rank(s): greedy text = PyTorch's ('$(tr -d '\n' < "$scratch/moe$np.txt")')"
    [ -s "$scratch/moe$np.txt" ] || diag < "$scratch/last.out"
done
last=$(ls "$dl"/ckpt_*.h5 | tail -n 1)
"$PYTHON3" "$top_srcdir/regression/moe_torch.py" --greedy "$last" The 12 > "$scratch/ref.txt" 2>&1
$MPIEXEC -n 2 "$TRIAD" sample "$last" sample.prompt=The sample.max_new_tokens=12 sample.temperature=0 \
    > "$scratch/dl.txt" 2> "$scratch/last.out"
[ $? -eq 0 ] && cmp -s "$scratch/dl.txt" "$scratch/ref.txt"
ok $? "qwen2-moe with a leading dense block, triad sample on 2 ranks (tp 2): greedy text = PyTorch's ('$(tr -d '\n' < "$scratch/dl.txt")')"
[ -s "$scratch/dl.txt" ] || diag < "$scratch/last.out"
done_testing
