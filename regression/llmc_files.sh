#!/bin/sh
# llm.c's files (karpathy/llm.c) at the edges its own readers draw, written
# here from llm.c's source (train_gpt2.py's write_model, write_tokenizer;
# dev/data/data_common.py's write_datafile, write_evalfile), never by
# triad's writers:
#  * tools/make_tokens.py writes no shard llm.c's dataloader refuses: no
#    shard of 0 tokens (dataloader.h asserts ntok > 0), no --shard-tokens
#    past the int32 count of the header (data_common.py asserts < 2^31)
#    and no traceback for one;
#  * each of llm.c's files handed to a key that reads another kind is named
#    as what it is, with the key that reads it (or that triad reads none of
#    its kind), never "not an HDF5 file, or truncated" or a JSON parse
#    error: a GPT-2 checkpoint given to io.restart or triad eval, an eval
#    file to io.init_from or data.path, train_llama3.py's checkpoint to
#    io.init_from, the tokenizer file to data.tokenizer or eval.tasks.
. "$(dirname "$0")/lib.sh"

MT="$PYTHON3 $top_srcdir/tools/make_tokens.py"

# an empty input is refused, and leaves no shard
printf '' > "$scratch/empty.txt"
$MT "$scratch/empty.txt" "$scratch/e/x" > "$scratch/out" 2>&1
st=$?
[ $st -eq 1 ] && grep -q "empty.txt holds no token: a shard of 0 tokens is refused by llm.c's reader" "$scratch/out" &&
    [ -z "$(ls "$scratch/e" 2> /dev/null)" ]
ok $? "make_tokens.py: an empty input is refused (status $st), no shard of 0 tokens written"
diag < "$scratch/out"
printf ' \n , \n' | $MT --ints - "$scratch/e/y" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "standard input holds no token" "$scratch/out" && [ -z "$(ls "$scratch/e" 2> /dev/null)" ]
ok $? "make_tokens.py --ints: a list of no integer is refused"

# --shard-tokens past the header's int32 count is refused before any input is read (it used to end, once a
# shard held more than 2^31 - 1 tokens, in a Python traceback from struct.pack with a .tmp file left behind)
echo 1 2 3 | $MT --ints --shard-tokens 2147483648 - "$scratch/b/x" > "$scratch/out" 2>&1
st=$?
[ $st -ne 0 ] && grep -q "shard-tokens must be at most 2147483647: a shard's header counts its tokens in an int32" \
    "$scratch/out" && [ -z "$(ls "$scratch/b" 2> /dev/null)" ]
ok $? "make_tokens.py: --shard-tokens 2147483648 is refused (status $st), nothing written"
echo 1 2 3 | $MT --ints --shard-tokens 2147483647 - "$scratch/b/x" > "$scratch/out" 2>&1 &&
    $MT --info "$scratch/b/x_*.bin" | grep -q "^1 shard(s), 3 tokens"
ok $? "... and 2147483647, the largest count, is taken"

# llm.c's files as its writers lay them out: train_gpt2.py's write_tokenizer (256 int32: 20240328, version
# 2, the ids, the end-of-text id; then each id's bytes after a uint8 length), data_common.py's write_evalfile
# (regression/mc_torch.py write), train_llama3.py's write_model header (20240803, version 3, ...), and
# train_gpt2.py's write_model (hf_files.py llmc)
hf_decks
$H llmc "$scratch/gpt2.bin" "$KG"
"$PYTHON3" - "$scratch" << 'PY'
import struct, sys
d = sys.argv[1]
out = struct.pack("<256i", 20240328, 2, 64, 63, *([0] * 252))
for i in range(63):
    out += bytes([1, 32 + i])
out += bytes([13]) + b"<|endoftext|>"
open(d + "/gpt2_tokenizer.bin", "wb").write(out)
open(d + "/hs.json", "w").write('[{"ctx": [1, 2], "endings": [[3], [4, 5], [6], [7]], "label": 1}]')
hdr = [20240803, 3, 16, 64, 2, 4, 2, 32, 1, 32, 1, 10000, 0, 4, 3, 1] + [0] * 240
open(d + "/llama3.bin", "wb").write(struct.pack("<256i", *hdr) + bytes(4096))
PY
"$PYTHON3" "$top_srcdir/regression/mc_torch.py" write "$scratch/hs.json" "$scratch/hellaswag_val.bin"
# named RUN_ARGS PATTERN WHAT: status 1, the message (grep -F), none of the old ones
named() {
    args=$1 pattern=$2 what=$3
    n=$((${n:-0} + 1))
    rd="io.run_dir=\"'$scratch/run$n'\""
    case $args in eval\ *) rd= ;; esac # (triad eval writes no run directory, and refuses io.run_dir)
    eval triad_run 1 $args $rd
    st=$?
    [ $st -eq 1 ] && grep -q -F -e "$pattern" "$scratch/last.out" &&
        ! grep -q "not an HDF5 file, or it is truncated\|not a JSON object" "$scratch/last.out"
    ok $? "$what"
    grep "error" "$scratch/last.out" | head -n 1 | diag
}
named "\"$scratch/gpt2.nml\" io.restart=\"'$scratch/gpt2.bin'\"" \
    "it is not a triad checkpoint but an llm.c GPT-2 checkpoint (magic 20240326, gpt2_124M.bin: io.init_from reads it)" \
    "io.restart = an llm.c GPT-2 checkpoint: named, with io.init_from"
named "eval \"$scratch/gpt2.bin\" eval.tasks=\"'$scratch/hellaswag_val.bin'\"" \
    "it is not a triad checkpoint but an llm.c GPT-2 checkpoint" "triad eval of an llm.c GPT-2 checkpoint: named"
named "\"$scratch/gpt2.nml\" io.init_from=\"'$scratch/hellaswag_val.bin'\"" \
    "it is not a triad checkpoint but an llm.c eval file (magic 20240522, hellaswag_val.bin: eval.tasks reads it)" \
    "io.init_from = an llm.c eval file: named, with eval.tasks"
named "\"$scratch/gpt2.nml\" io.init_from=\"'$scratch/llama3.bin'\"" \
    "an llm.c LLaMA 3 checkpoint (magic 20240803, train_llama3.py's), which triad does not read: io.init_from takes the model's Hugging Face folder" \
    "io.init_from = train_llama3.py's checkpoint: named as one triad does not read, with the Hugging Face folder"
named "\"$scratch/gpt2.nml\" data.tokenizer=\"'$scratch/gpt2_tokenizer.bin'\"" \
    "gpt2_tokenizer.bin is an llm.c tokenizer file (magic 20240328, gpt2_tokenizer.bin), which triad does not read: data.tokenizer takes a tokenizer.json" \
    "data.tokenizer = llm.c's tokenizer file: named, with what data.tokenizer takes"
named "\"$scratch/gpt2.nml\" train.steps=1 data.kind=\"'tokens'\" data.path=\"'$scratch/hellaswag_val.bin'\"" \
    "hint: this is an llm.c eval file (magic 20240522, hellaswag_val.bin: eval.tasks reads it)" \
    "data.path = an llm.c eval file: named, with eval.tasks"
named "\"$scratch/gpt2.nml\" io.init_from=\"'$scratch/gpt2.bin'\" train.mc_eval_every=1 train.steps=1 eval.tasks=\"'$scratch/gpt2_tokenizer.bin'\"" \
    "magic 20240328 is not llm.c's eval file's 20240522: it is an llm.c tokenizer file" \
    "eval.tasks = llm.c's tokenizer file: named"

done_testing
