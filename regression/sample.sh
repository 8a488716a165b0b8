#!/bin/sh
# triad sample: greedy text from a trained llama checkpoint equals the
# greedy continuation of an independent PyTorch implementation
# (regression/llama_torch.py --greedy: full forwards, no cache), on one rank
# and on tp 2; GPT-2 the same on 1 and 2 ranks; sampling with a seed is
# deterministic and the seed matters; token-id prompts and output; bad
# requests refused with the reason.
. "$(dirname "$0")/lib.sh"

corpus="$top_srcdir/regression/cases/data/corpus.txt"
train="model.vocab_size=256 model.seq_len=32 data.kind='text' data.path='$corpus' train.steps=60 train.batch_size=8
train.lr=1d-2 train.warmup_steps=5 io.save_final=.true."
triad_run 1 "$DECKS/tiny.nml" $train model.arch="'llama'" model.n_kv_head=2 io.run_dir="'$scratch/llama'"
ok $? "a byte-level llama (GQA) trained 60 steps on text"
triad_run 1 "$DECKS/tiny.nml" $train io.run_dir="'$scratch/gpt2'"
ok $? "a byte-level GPT-2 trained the same"
L=$scratch/llama/ckpt_60.h5 G=$scratch/gpt2/ckpt_60.h5
greedy="sample.prompt=The sample.max_new_tokens=24 sample.temperature=0"

if "$PYTHON3" -c "import torch" 2> /dev/null; then
    "$PYTHON3" "$top_srcdir/regression/llama_torch.py" --greedy "$L" The 24 > "$scratch/ref.txt" 2>&1
    for np in 1 2; do
        $MPIEXEC -n $np "$TRIAD" sample "$L" $greedy > "$scratch/llama$np.txt" 2> "$scratch/last.out"
        [ $? -eq 0 ] && cmp -s "$scratch/llama$np.txt" "$scratch/ref.txt"
        ok $? "llama, $np rank(s): greedy text = PyTorch's greedy continuation ('$(tr -d '\n' < "$scratch/llama$np.txt")')"
    done
else
    skip "no PyTorch for $PYTHON3: the llama reference (tools/install-deps.sh installs python3-torch)"
    skip "(the same on 2 ranks)"
fi
for np in 1 2; do
    $MPIEXEC -n $np "$TRIAD" sample "$G" $greedy > "$scratch/gpt2_$np.txt" 2> "$scratch/last.out"
    ok $? "gpt2, $np rank(s): triad sample runs"
done
cmp -s "$scratch/gpt2_1.txt" "$scratch/gpt2_2.txt"
ok $? "gpt2: greedy text on 2 ranks (tp 2) = on 1 ('$(tr -d '\n' < "$scratch/gpt2_1.txt")')"

s="sample.prompt=The sample.max_new_tokens=24 sample.temperature=0.9 sample.top_k=20 sample.top_p=0.95"
"$TRIAD" sample "$L" $s sample.seed=7 > "$scratch/s7a.txt" 2>/dev/null
"$TRIAD" sample "$L" $s sample.seed=7 > "$scratch/s7b.txt" 2>/dev/null
"$TRIAD" sample "$L" $s sample.seed=8 > "$scratch/s8.txt" 2>/dev/null
cmp -s "$scratch/s7a.txt" "$scratch/s7b.txt" && ! cmp -s "$scratch/s7a.txt" "$scratch/s8.txt"
ok $? "temperature 0.9, top_k 20, top_p 0.95: the same seed gives the same text, another seed another"
printf '84 104 101\n' > "$scratch/prompt.ids"
"$TRIAD" sample "$L" sample.prompt_tokens="'$scratch/prompt.ids'" sample.max_new_tokens=24 sample.temperature=0 \
    > "$scratch/ids.txt" 2>/dev/null
cmp -s "$scratch/ids.txt" "$scratch/llama1.txt" || cmp -s "$scratch/ids.txt" "$scratch/ref.txt"
ok $? "a prompt of token ids (the bytes of 'The') gives the same text"

# refused WHAT PATTERN NP ARGS...
refused() {
    what=$1 pattern=$2 np=$3
    shift 3
    $MPIEXEC -n "$np" "$TRIAD" sample "$@" > "$scratch/out" 2> "$scratch/last.out"
    [ $? -eq 1 ] && grep -q -e "$pattern" "$scratch/last.out" && [ ! -s "$scratch/out" ]
    ok $? "$what"
    grep "error" "$scratch/last.out" | head -n 1 | diag
}
refused "a prompt and max_new_tokens past seq_len" "exceed the model's seq_len = 32" 1 "$L" sample.prompt="'The '" \
    sample.max_new_tokens=40
refused "3 ranks cannot split 4 heads" "3 ranks cannot split the model" 3 "$L" sample.prompt="'x'"
refused "a missing checkpoint" "cannot open" 1 "$scratch/none.h5" sample.prompt="'x'"
refused "an empty prompt" "the prompt is empty" 1 "$L"
printf '12 999 3\n' > "$scratch/bad.ids"
refused "a token id outside the vocabulary" "token 999 (id number 2) is not an id" 1 "$L" sample.prompt_tokens="'$scratch/bad.ids'"
done_testing
