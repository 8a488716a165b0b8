#!/bin/sh
# The llama family against an independent PyTorch implementation of
# Hugging Face's LlamaForCausalLM (regression/llama_torch.py): from the same
# initial weights and the same text, 20 AdamW steps of per-step fp32 losses
# within 1e-5 relative; grouped-query and multi-head attention, an untied
# and a tied head, on one rank and on tp 2 (sequence parallel) x pp 2; and
# the held-out loss (train.eval_every) after steps 5, 10, 15, 20 too.
# Llama 3's rotary frequency remap (model.rope_scaling = 'llama3') on a
# head of 16 channels, theta 500000, factor 8, original context 64: of
# its 8 frequencies one kept, one smoothed, six divided (the reference
# counts them), on one rank and on cp 2 x tp 2; and triad sample of the
# trained model gives the reference's greedy continuation.
. "$(dirname "$0")/lib.sh"

if ! "$PYTHON3" -c "import torch" 2> /dev/null; then
    skip "no PyTorch for $PYTHON3 (Debian: apt-get install python3-torch; tools/install-deps.sh installs it)"
    done_testing
fi
corpus="$top_srcdir/regression/cases/data/corpus.txt"
cat > "$scratch/llama.nml" << EOF2
&model
  arch = 'llama', n_layer = 2, n_head = 4, n_kv_head = 2, d_model = 32, ffn_hidden = 80, seq_len = 16
  vocab_size = 256, norm_eps = 1e-6, rope_theta = 500000
/
&train
  steps = 20, batch_size = 4, lr = 3.0d-3, min_lr = 3.0d-4, warmup_steps = 3, seed = 11, peak_gflops = 100.0
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
    triad_run "$np" "$scratch/llama.nml" train.steps=0 "$@" io.run_dir="'$r.0'" &&
        triad_run "$np" "$scratch/llama.nml" "$@" io.run_dir="'$r'" &&
        "$PYTHON3" "$top_srcdir/regression/llama_torch.py" "$r" "$r.0/ckpt_0.h5" "$corpus" > "$r.cmp" 2>&1
    st=$?
    worst=$(sed -n 's/^worst //p' "$r.cmp")
    [ $st -eq 0 ] && [ "$(grep -c '^ *[0-9]' "$r.cmp")" -eq 20 ] && [ "$(grep -c '^eval' "$r.cmp")" -eq 4 ] &&
        awk "BEGIN { exit !($worst <= 1e-5) }"
    ok $? "$what: 20 steps of per-step losses and 4 held-out losses within 1e-5 of PyTorch (worst ${worst:-none})"
    [ -n "$worst" ] || diag < "$scratch/last.out"
    tail -n 4 "$r.cmp" | diag
}
reference "llama GQA, untied head, 1 rank" 1
reference "llama MHA, tied head, 1 rank" 1 model.n_kv_head=0 model.tie_embeddings=.true.
reference "llama GQA on tp 2 + SP x pp 2" 4 parallel.tp=2 parallel.pp=2 parallel.sequence_parallel=.true. \
    train.micro_batch_size=2
llama3="model.n_head=2 model.rope_scaling='llama3' model.rope_factor=8 model.rope_low_freq_factor=1
model.rope_high_freq_factor=4 model.rope_original_max_positions=64"
reference "llama GQA, HS 16, rope_scaling = 'llama3', 1 rank" 1 $llama3 model.n_kv_head=1
grep -q "^rope llama3: kept 1 smoothed 1 divided 6$" "$scratch/run$n.cmp"
ok $? "... the remap keeps one frequency, smooths one and divides six ($(grep '^rope' "$scratch/run$n.cmp"))"
"$PYTHON3" "$top_srcdir/regression/llama_torch.py" --greedy "$scratch/run$n/ckpt_20.h5" The 12 > "$scratch/ref.txt" 2>&1
$MPIEXEC -n 1 "$TRIAD" sample "$scratch/run$n/ckpt_20.h5" sample.prompt=The sample.max_new_tokens=12 \
    sample.temperature=0 > "$scratch/sample.txt" 2> "$scratch/sample.err"
[ $? -eq 0 ] && cmp -s "$scratch/sample.txt" "$scratch/ref.txt"
ok $? "... triad sample of it: greedy text = PyTorch's ('$(tr -d '\n' < "$scratch/sample.txt")')"
diag < "$scratch/sample.err"
reference "llama MHA, HS 16, rope_scaling = 'llama3' on cp 2 x tp 2" 4 $llama3 model.n_kv_head=2 parallel.cp=2 \
    parallel.tp=2
done_testing
