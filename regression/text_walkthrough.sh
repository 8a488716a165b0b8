#!/bin/sh
# The README's walkthrough, small: Llama 3's real tokenizer (128,256 ids)
# tokenizes text with `triad tokenize` on 2 ranks (uint32 shards, a held-out
# split), a 4-layer llama of that vocabulary trains on tp 2 x pp 2 x dp 2
# with the held-out loss, is exported with its tokenizer, imported again
# bit for bit, and `triad sample` prints text.
. "$(dirname "$0")/lib.sh"

need_llama3_tokenizer
T=$LLAMA3_TOKENIZER
mkdir -p "$scratch/books"
cp /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 /usr/share/common-licenses/MPL-2.0 \
    "$scratch/books/"
$MPIEXEC -n 2 "$TRIAD" tokenize tokenize.tokenizer="$T" tokenize.input="'$scratch/books/*'" \
    tokenize.output="$scratch/data/books" tokenize.val_tokens=2000 > "$scratch/last.out" 2>&1 &&
    grep -q "tokenized 3 documents into .* tokens (uint32)" "$scratch/last.out"
ok $? "triad tokenize on 2 ranks: 3 documents, uint32 shards ($(grep -o 'into [0-9]* tokens' "$scratch/last.out"))"
cat > "$scratch/llama.nml" << EOF2
&model
  arch = 'llama', n_layer = 4, n_head = 4, n_kv_head = 2, d_model = 64, ffn_hidden = 128, seq_len = 64
  vocab_size = 128256, norm_eps = 1e-5, rope_theta = 500000
/
&parallel
  tp = 2, pp = 2, dp = 2
/
&train
  steps = 24, batch_size = 8, micro_batch_size = 2, lr = 3e-3, warmup_steps = 2, eval_every = 12, eval_batches = 2
  peak_gflops = 100.0
/
&data
  kind = 'tokens', path = '$scratch/data/books_train_*.bin', val_path = '$scratch/data/books_val_*.bin'
  tokenizer = '$T'
/
&io
  run_dir = '$scratch/run'
/
EOF2
triad_run 8 "$scratch/llama.nml"
st=$?
"$PYTHON3" - "$scratch/run/metrics.h5" << 'PY' > "$scratch/losses" 2>&1
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    loss, val = f["metrics/loss"][:], f["eval/loss"][:]
    print("loss %.3f -> %.3f, held-out %.3f -> %.3f" % (loss[0], loss[-1], val[0], val[-1]))
    sys.exit(0 if loss[-1] < loss[0] - 1 and val[-1] < val[0] else 1)
PY
[ $st -eq 0 ] && [ $? -eq 0 ]
ok $? "a llama of Llama 3's vocabulary trains on tp 2 x pp 2 x dp 2 from the shards: $(cat "$scratch/losses")"
"$TRIAD" export "$scratch/run/ckpt_24.h5" "$scratch/hf" > "$scratch/last.out" 2>&1 &&
    cmp -s "$T" "$scratch/hf/tokenizer.json" &&
    grep -q '"bos_token_id": 128000' "$scratch/hf/generation_config.json" &&
    grep -q '"eos_token_id": 128001' "$scratch/hf/generation_config.json"
ok $? "triad export: the folder holds the model's tokenizer.json and generation_config.json (BOS 128000, EOS 128001)"
sed -e "s|^  tokenizer = .*||" -e "s|run_dir = .*|run_dir = '$scratch/again'|" "$scratch/llama.nml" > "$scratch/again.nml"
triad_run 8 "$scratch/again.nml" train.steps=0 io.init_from="'$scratch/hf'" &&
    "$PYTHON3" "$top_srcdir/regression/hf_files.py" check "$scratch/hf" "$scratch/again/ckpt_0.h5" \
    '{"L":4,"C":64,"NH":4,"NKV":2,"F":128,"V":128256,"T":64,"eps":1e-5,"theta":500000,"tied":false}' \
    > "$scratch/cmp" 2>&1
ok $? "the exported folder imports again, every tensor bit for bit"
$MPIEXEC -n 2 "$TRIAD" sample "$scratch/again/ckpt_0.h5" sample.prompt="'This License'" sample.max_new_tokens=20 \
    sample.temperature=0 > "$scratch/text" 2> "$scratch/last.out"
st=$?
head -c 200 "$scratch/text" | diag
[ $st -eq 0 ] && head -c 12 "$scratch/text" | grep -q "^This License" && ! grep -q "^[0-9 ]*$" "$scratch/text"
ok $? "triad sample, with the tokenizer of the folder it came from, prints text after the prompt"
# the run kept its tokenizer: with the original gone, sample and export still have it
cmp -s "$T" "$scratch/run/tokenizer.json"
ok $? "the training run keeps a copy of its tokenizer.json beside its checkpoints"
mkdir -p "$scratch/moved"
cp "$scratch/run/ckpt_24.h5" "$scratch/moved/"
sed -i "s|^  tokenizer = .*|  tokenizer = '$scratch/gone/tokenizer.json'|" "$scratch/llama.nml"
cp "$scratch/run/tokenizer.json" "$scratch/moved/"
$MPIEXEC -n 1 "$TRIAD" sample "$scratch/moved/ckpt_24.h5" sample.prompt="'This License'" sample.max_new_tokens=4 \
    sample.temperature=0 > "$scratch/text" 2> "$scratch/last.out" && head -c 12 "$scratch/text" | grep -q "^This License"
ok $? "... and triad sample finds it beside the checkpoint"
triad_run 1 "$scratch/llama.nml" io.run_dir="'$scratch/broken'" train.steps=2 parallel.tp=1 \
    parallel.pp=1 parallel.dp=1
[ $? -eq 1 ] && grep -q "data.tokenizer = '$scratch/gone/tokenizer.json' is no tokenizer" "$scratch/last.out"
ok $? "a data.tokenizer that is not there stops a new run before step 1"
done_testing
