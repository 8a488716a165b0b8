#!/bin/sh
# triad sample: greedy text from a trained llama checkpoint equals the
# greedy continuation of an independent PyTorch implementation
# (regression/llama_torch.py --greedy: full forwards, no cache), on one rank,
# tp 2, pp 2 and dp 2; GPT-2 the same on 1 and 2 ranks.  A prompt file
# (prompts of different lengths, decoded as one batch after a prefill of
# whole prompts): at temperature 0.9 the same text one prompt at a time
# (sample.batch_size = 1) as all at once, and the same on tp 2, pp 2, dp 2
# and tp 2 x pp 2 x dp 2, for the llama and for a mixture of experts;
# greedy, the batch equals each prompt sampled on its own.  train.device =
# 'cuda' on the CUDA emulator gives the CPU's text, and so do the generic
# and AVX2 SIMD paths.  The prefill and decode
# rates are printed apart from the text.  The ids drawn at temperature,
# top_k and top_p settings, and how often, are Hugging Face's sampling's
# (regression/sample_torch.py).  Sampling with a seed is
# deterministic and the seed matters; token-id prompts and output; bad
# requests refused with the reason; sample.stop_ids ends a document at
# more ids.  A padded vocabulary (64 ids, a
# tokenizer of 28, one with a gap): only ids the tokenizer decodes are drawn,
# every line the prompt's text and max_new_tokens more; a prompt id it
# cannot decode refused, named; a text model of 512 ids draws bytes alone.
. "$(dirname "$0")/lib.sh"

corpus="$top_srcdir/regression/cases/data/corpus.txt"
train="model.vocab_size=256 model.seq_len=32 data.kind='text' data.path='$corpus' train.steps=60 train.batch_size=8
train.lr=1d-2 train.warmup_steps=5 io.save_final=.true."
triad_run 1 "$DECKS/tiny.nml" $train model.arch="'llama'" model.n_kv_head=2 io.run_dir="'$scratch/llama'"
ok $? "a byte-level llama (GQA) trained 60 steps on text"
triad_run 1 "$DECKS/tiny.nml" $train io.run_dir="'$scratch/gpt2'"
ok $? "a byte-level GPT-2 trained the same"
triad_run 1 "$DECKS/tiny.nml" $train train.steps=30 model.arch="'llama'" model.n_kv_head=2 model.n_expert=4 \
    model.moe_ffn_hidden=24 model.n_shared_expert=1 train.moe_capacity=1.0 io.run_dir="'$scratch/moe'"
ok $? "a byte-level mixture of experts (4 experts, a shared one, capacity 1) trained 30 steps"
L=$scratch/llama/ckpt_60.h5 G=$scratch/gpt2/ckpt_60.h5 E=$scratch/moe/ckpt_30.h5
greedy="sample.prompt=The sample.max_new_tokens=24 sample.temperature=0"

# sample NAME NP ARGS...: stdout into $scratch/NAME.txt, stderr into $scratch/NAME.err
sample() {
    name=$1 np=$2
    shift 2
    $MPIEXEC -n "$np" "$TRIAD" sample "$@" > "$scratch/$name.txt" 2> "$scratch/$name.err"
}

if "$PYTHON3" -c "import torch" 2> /dev/null; then
    "$PYTHON3" "$top_srcdir/regression/llama_torch.py" --greedy "$L" The 24 > "$scratch/ref.txt" 2>&1
    for grid in "1" "2 parallel.tp=2" "2 parallel.pp=2" "2 parallel.dp=2"; do
        set -- $grid
        np=$1
        shift
        sample llama "$np" "$L" $greedy "$@"
        [ $? -eq 0 ] && cmp -s "$scratch/llama.txt" "$scratch/ref.txt"
        ok $? "llama, $np rank(s) $*: greedy text = PyTorch's greedy continuation ('$(tr -d '\n' < "$scratch/llama.txt")')"
    done
else
    skip "no PyTorch for $PYTHON3: the llama reference (tools/install-deps.sh installs python3-torch)"
    skip "(the same on tp 2)"
    skip "(the same on pp 2)"
    skip "(the same on dp 2)"
fi
for np in 1 2; do
    sample gpt2_$np $np "$G" $greedy
    ok $? "gpt2, $np rank(s): triad sample runs"
done
cmp -s "$scratch/gpt2_1.txt" "$scratch/gpt2_2.txt"
ok $? "gpt2: greedy text on 2 ranks (tp 2) = on 1 ('$(tr -d '\n' < "$scratch/gpt2_1.txt")')"

# A batch: prompts of 1 to 15 bytes (37 in all), one of them twice (its own random numbers: the prompt's index keys them).
printf 'The\nAnd so it was\nx\nIt was the best\nThe\nof\n' > "$scratch/prompts.txt"
batch="sample.prompt_file=$scratch/prompts.txt sample.max_new_tokens=12 sample.temperature=0.9 sample.top_k=20"
for ck in llama moe; do
    case $ck in llama) C=$L ;; moe) C=$E ;; esac
    sample "$ck.all" 1 "$C" $batch
    st=$?
    [ $st -eq 0 ] && [ "$(wc -l < "$scratch/$ck.all.txt")" -ge 6 ] &&
        grep -q "^triad sample: 6 prompts on tp 1 x pp 1 x dp 1 (cpu), batches of up to 6: prefill 37 tokens in .* tokens/s), decode .* tokens/s)" \
            "$scratch/$ck.all.err" && ! grep -q "tokens/s" "$scratch/$ck.all.txt"
    ok $? "$ck: 6 prompts from a file in one batch; the prefill and decode rates on stderr, not in the text"
    grep "tokens/s" "$scratch/$ck.all.err" | diag
    sample "$ck.one" 1 "$C" $batch sample.batch_size=1
    [ $? -eq 0 ] && cmp -s "$scratch/$ck.one.txt" "$scratch/$ck.all.txt"
    ok $? "$ck, temperature 0.9: the 6 prompts one at a time (batch_size 1) = all in one batch, token for token"
    for grid in "2 parallel.tp=2" "2 parallel.pp=2" "2 parallel.dp=2" "3 parallel.dp=3 sample.batch_size=1" \
        "8 parallel.tp=2 parallel.pp=2 parallel.dp=2"; do
        set -- $grid
        np=$1
        shift
        sample "$ck.grid" "$np" "$C" $batch "$@"
        [ $? -eq 0 ] && cmp -s "$scratch/$ck.grid.txt" "$scratch/$ck.all.txt"
        ok $? "$ck, temperature 0.9: the same text on $np ranks, $*"
    done
done
for isa in generic avx2; do
    TRIAD_ISA=$isa sample isa 1 "$L" $batch
    st=$?
    if [ $st -ne 0 ] && grep -q "TRIAD_ISA" "$scratch/isa.err"; then
        skip "this processor does not run the $isa path"
        continue
    fi
    [ $st -eq 0 ] && cmp -s "$scratch/isa.txt" "$scratch/llama.all.txt"
    ok $? "TRIAD_ISA=$isa: the batch's text at temperature 0.9 is the default path's"
done
sample batch0 1 "$L" sample.prompt_file="$scratch/prompts.txt" sample.max_new_tokens=12 sample.temperature=0
st=$?
: > "$scratch/each.txt"
while IFS= read -r line; do
    "$TRIAD" sample "$L" sample.prompt="$line" sample.max_new_tokens=12 sample.temperature=0 >> "$scratch/each.txt" \
        2> /dev/null || st=1
done < "$scratch/prompts.txt"
[ $st -eq 0 ] && cmp -s "$scratch/batch0.txt" "$scratch/each.txt"
ok $? "greedy: the batch of 6 = each prompt sampled on its own, token for token"
! cmp -s "$scratch/batch0.txt" "$scratch/llama.all.txt"
ok $? "greedy and temperature 0.9 differ (the draws are used)"

EMU="$top_builddir/regression/cuda_emu/triad"
if [ -x "$EMU" ]; then
    TRIAD_EMU_DEVICES=1 $MPIEXEC -n 2 "$EMU" sample "$L" $batch parallel.pp=2 train.device=cuda \
        train.share_gpus=.true. > "$scratch/emu.txt" 2> "$scratch/emu.err"
    [ $? -eq 0 ] && cmp -s "$scratch/emu.txt" "$scratch/llama.all.txt" && grep -q "(cuda)" "$scratch/emu.err"
    ok $? "train.device = 'cuda' (the CUDA emulator), pp 2: the CPU's text"
    TRIAD_EMU_DEVICES=1 $MPIEXEC -n 1 "$EMU" sample "$E" $batch train.device=cuda \
        > "$scratch/emu.txt" 2> "$scratch/emu.err"
    [ $? -eq 0 ] && cmp -s "$scratch/emu.txt" "$scratch/moe.all.txt"
    ok $? "train.device = 'cuda' (the CUDA emulator), a mixture of experts: the CPU's text"
else
    skip "the CUDA emulator's triad is not built ($EMU: make check builds it)"
    skip "(the mixture of experts on it)"
fi

s="sample.prompt=The sample.max_new_tokens=24 sample.temperature=0.9 sample.top_k=20 sample.top_p=0.95"
"$TRIAD" sample "$L" $s sample.seed=7 > "$scratch/s7a.txt" 2>/dev/null
"$TRIAD" sample "$L" $s sample.seed=7 > "$scratch/s7b.txt" 2>/dev/null
"$TRIAD" sample "$L" $s sample.seed=8 > "$scratch/s8.txt" 2>/dev/null
cmp -s "$scratch/s7a.txt" "$scratch/s7b.txt" && ! cmp -s "$scratch/s7a.txt" "$scratch/s8.txt"
ok $? "temperature 0.9, top_k 20, top_p 0.95: the same seed gives the same text, another seed another"
# Which ids a draw gives, and how often, against Hugging Face's sampling (regression/sample_torch.py: the
# reference's next-token distribution after 'The' through temperature, then top_k, then top_p renormalised over
# what top_k kept): 4000 draws of one token each (the prompt 4000 times in a file: a random number each),
# every one an id the reference allows, each id's count within 5 standard deviations of its expectation.
if "$PYTHON3" -c "import torch" 2> /dev/null; then
    yes The | head -n 4000 > "$scratch/the4000.txt"
    runs="" st=0
    for set in 1.0:5:0.6 1.0:0:1.0 0.7:0:0.8 1.3:8:1.0 1.0:300:0.9 1.0:0:0.0 1.0:3:1e-9 2.0:12:0.8; do
        t=$(echo "$set" | cut -d: -f1) k=$(echo "$set" | cut -d: -f2) p=$(echo "$set" | cut -d: -f3)
        "$TRIAD" sample "$L" sample.prompt_file="$scratch/the4000.txt" sample.max_new_tokens=1 sample.temperature="$t" \
            sample.top_k="$k" sample.top_p="$p" sample.seed=11 > "$scratch/draws.$set" 2> /dev/null || st=1
        runs="$runs $set:$scratch/draws.$set"
    done
    [ $st -eq 0 ] && "$PYTHON3" "$top_srcdir/regression/sample_torch.py" "$L" The $runs > "$scratch/draws.out" 2>&1
    ok $? "4000 draws at each of 8 settings (top_k 5 then top_p 0.6, top_k past the vocabulary, top_p 0 and 1e-9, ...): every id one Hugging Face's sampling allows, each as often"
    diag < "$scratch/draws.out"
else
    skip "no PyTorch for $PYTHON3: the sampling reference"
fi
printf '84 104 101\n' > "$scratch/prompt.ids"
"$TRIAD" sample "$L" sample.prompt_tokens="'$scratch/prompt.ids'" sample.max_new_tokens=24 sample.temperature=0 \
    > "$scratch/ids.txt" 2>/dev/null
cmp -s "$scratch/ids.txt" "$scratch/llama.txt" || cmp -s "$scratch/ids.txt" "$scratch/ref.txt"
ok $? "a prompt of token ids (the bytes of 'The') gives the same text"

# refused WHAT PATTERN NP ARGS...
refused() {
    what=$1 pattern=$2 np=$3
    shift 3
    $MPIEXEC -n "$np" "$TRIAD" sample "$@" > "$scratch/out" 2> "$scratch/last.out"
    st=$?
    [ $st -eq 1 ] && grep -q -e "$pattern" "$scratch/last.out" && [ ! -s "$scratch/out" ]
    good=$?
    ok $good "$what"
    [ $good -eq 0 ] || { echo "status $st, standard output $(wc -c < "$scratch/out") bytes:"; head -c 300 "$scratch/out"
        tail -n 5 "$scratch/last.out"; } | diag
    grep "error" "$scratch/last.out" | head -n 1 | diag
}
# sample.stop_ids: more ids that end a document (Hugging Face's list of eos_token_id, Llama 3 Instruct's
# <|eot_id|> beside <|end_of_text|>): the greedy text stops before the first of them, on 2 ranks (pp 2) too
sample stop0 1 "$L" $greedy
third=$("$PYTHON3" -c "import sys; print(open(sys.argv[1], 'rb').read()[5])" "$scratch/stop0.txt")
for grid in "1" "2 parallel.pp=2"; do
    set -- $grid
    np=$1
    shift
    sample stop "$np" "$L" $greedy sample.stop_ids="'0 , $third'" "$@"
    st=$?
    sample stop2 "$np" "$L" $greedy sample.stop_ids="'$third,32'" "$@"
    [ $st -eq 0 ] && [ $? -eq 0 ] && "$PYTHON3" -c "import sys
full, a, b = (open(f, 'rb').read() for f in sys.argv[1:4])
t = int(sys.argv[4])
new = full[3:-1]
cut = lambda ids: full[:3] + new[:min([new.index(i) for i in ids if i in new] + [len(new)])] + b'\n'
sys.exit(not (a == cut([t]) and b == cut([t, 32]) and len(a) < len(full)))" "$scratch/stop0.txt" "$scratch/stop.txt" \
        "$scratch/stop2.txt" "$third"
    ok $? "sample.stop_ids = '0 , $third' and '$third,32', $np rank(s) $*: the greedy text ends before the first of them ('$(tr -d '\n' < "$scratch/stop.txt")', '$(tr -d '\n' < "$scratch/stop2.txt")')"
done
refused "a stop id outside the vocabulary, named" "sample.stop_ids = '12 x3': 'x3' is not an id of this model's vocabulary (0 .. 255)" 1 \
    "$L" sample.prompt=The sample.stop_ids="'12 x3'"
refused "a prompt and max_new_tokens past seq_len" "exceed the model's seq_len = 32" 1 "$L" sample.prompt="'The '" \
    sample.max_new_tokens=40
refused "a key sample does not read (the model is the checkpoint's) is an error, not ignored" \
    "model.n_layer is not read by triad sample: the model and the rest of the deck are the checkpoint's" 1 "$L" \
    sample.prompt="'x'" sample.max_new_tokens=8 model.n_layer=3
refused "... so is a &parallel key other than the grid's (sample runs 1F1B without ZeRO)" \
    "parallel.zero_stage is not read by triad sample" 1 "$L" sample.prompt="'x'" sample.max_new_tokens=8 \
    parallel.zero_stage=3
refused "3 ranks cannot split 4 heads by tp = 3 asked for" "n_head = 4 is not divisible by tp = 3" 3 "$L" \
    sample.prompt="'x'" sample.max_new_tokens=8 parallel.tp=3
sample three 3 "$L" sample.prompt="'The'" sample.max_new_tokens=8
[ $? -eq 0 ] && grep -q "on tp 1 x pp 1 x dp 3" "$scratch/three.err" && [ -s "$scratch/three.txt" ]
ok $? "with no grid given, 3 ranks and 4 heads sample as tp 1 x dp 3 (tp over every rank does not divide the heads)"
refused "a grid that is not the launched ranks" "tp \* dp \* pp = 2 \* 2 \* 1 = 4, but 2 ranks were launched" 2 "$L" \
    sample.prompt="'x'" sample.max_new_tokens=8 parallel.tp=2 parallel.dp=2
refused "context parallelism" "parallel.cp = 2: triad sample splits a model over tp, pp and dp only" 2 "$L" \
    sample.prompt="'x'" sample.max_new_tokens=8 parallel.cp=2
refused "a missing checkpoint" "cannot open $scratch/none.h5: no such file" 1 "$scratch/none.h5" sample.prompt="'x'"
mkdir -p "$scratch/rot" && cp "$L" "$scratch/rot/ckpt_50.h5" && cp "$L" "$scratch/rot/ckpt_60.h5"
refused "a checkpoint its run no longer keeps: the directory's checkpoints named (io.keep_checkpoints)" \
    "cannot open $scratch/rot/ckpt_10.h5: no such file; $scratch/rot holds 2 checkpoints, ckpt_50.h5 to ckpt_60.h5" 1 \
    "$scratch/rot/ckpt_10.h5" sample.prompt="'x'"
head -c 1000 "$L" > "$scratch/trunc.h5"
refused "a truncated checkpoint: said, with its size" \
    "cannot open $scratch/trunc.h5: an HDF5 file (1000 bytes) that HDF5 could not open: truncated or damaged" 1 \
    "$scratch/trunc.h5" sample.prompt="'x'"
printf 'not a checkpoint' > "$scratch/text.h5"
refused "a file that is no HDF5 file: said" \
    "cannot open $scratch/text.h5: it is not an HDF5 file (16 bytes, without HDF5's signature)" 1 \
    "$scratch/text.h5" sample.prompt="'x'"
refused "a run directory for a checkpoint: its checkpoints named" \
    "cannot open $scratch/rot: it is a folder, not a checkpoint; $scratch/rot holds 2 checkpoints, ckpt_50.h5 to ckpt_60.h5" \
    1 "$scratch/rot" sample.prompt="'x'"
if "$PYTHON3" -c "import h5py" 2> /dev/null; then
    # a checkpoint another process holds open for writing (HDF5's lock): not called damaged or no HDF5 file
    "$PYTHON3" -c "import h5py, subprocess, sys
f = h5py.File(sys.argv[1], 'r+')
r = subprocess.run(sys.argv[2:], capture_output=True, text=True)
sys.stdout.write(r.stderr)
sys.exit(r.returncode)" "$scratch/rot/ckpt_60.h5" $MPIEXEC -n 1 "$TRIAD" sample "$scratch/rot/ckpt_60.h5" sample.prompt="'x'" \
        > "$scratch/lock.out" 2>&1
    [ $? -eq 1 ] && grep -q "another program holds it open with HDF5's file lock .*nothing is wrong with the file" \
        "$scratch/lock.out" && grep -q "hint: wait for that program, or find it with fuser" "$scratch/lock.out"
    ok $? "a checkpoint h5py holds open for writing: said to be locked, not damaged (flock, as metrics.h5's reader)"
    grep error "$scratch/lock.out" | diag
else
    skip "no h5py for $PYTHON3"
fi
refused "an empty prompt" "the prompt is empty" 1 "$L"
: > "$scratch/empty.ids"
refused "an empty file of prompt ids, named (not 'set sample.prompt_tokens', which was set)" \
    "sample.prompt_tokens = '$scratch/empty.ids' holds no ids" 1 "$L" sample.prompt_tokens="'$scratch/empty.ids'"
refused "a prompt and a prompt file at once" "set one of sample.prompt, sample.prompt_tokens and sample.prompt_file" 1 \
    "$L" sample.prompt="'x'" sample.prompt_file="$scratch/prompts.txt"
refused "a missing prompt file" "cannot open sample.prompt_file = '$scratch/none.txt'" 1 "$L" \
    sample.prompt_file="$scratch/none.txt"
: > "$scratch/empty.txt"
refused "an empty prompt file" "sample.prompt_file = '$scratch/empty.txt' holds no prompts" 1 "$L" \
    sample.prompt_file="$scratch/empty.txt"
printf 'The\n\nAnd\n' > "$scratch/gap.txt"
refused "an empty line in the prompt file" "prompt 2 (line 2 of $scratch/gap.txt) is empty" 1 "$L" \
    sample.prompt_file="$scratch/gap.txt" sample.max_new_tokens=8
printf 'The\nthis prompt is longer than the model can hold\n' > "$scratch/long.txt"
refused "a prompt of the file longer than seq_len" \
    "prompt 2 (line 2 of $scratch/long.txt) (45 tokens) and max_new_tokens = 4 exceed the model's seq_len = 32" 2 "$L" \
    sample.prompt_file="$scratch/long.txt" sample.max_new_tokens=4 parallel.dp=2
printf '12 999 3\n' > "$scratch/bad.ids"
refused "a token id outside the vocabulary" "token 999 (id number 2) is not an id" 1 "$L" sample.prompt_tokens="'$scratch/bad.ids'"
# A padded vocabulary (GPT-2's 50,304 ids for its tokenizer's 50,257): tiny.nml's model of 64 ids with
# tokenizers of 28 (a to z and space, no decoder: the tokens joined by spaces): pad.json ids 0 .. 26 and
# <|endoftext|> 27, gap.json the 27 letters at 0 .. 4 and 6 .. 27 (no token 5, no end-of-text: nothing stops
# early).  Only ids the tokenizer decodes are drawn (said once on stderr); every prompt's line is its text and
# max_new_tokens more tokens of the tokenizer; an id it cannot decode is refused, naming it.
triad_run 1 "$DECKS/tiny.nml" train.steps=3 io.save_final=.true. io.run_dir="'$scratch/pad'"
ok $? "a model of 64 ids (tiny.nml) trained 3 steps"
P=$scratch/pad/ckpt_3.h5
"$PYTHON3" - "$scratch" <<'PY'
import json, sys
def tokenizer(name, vocab, added):
    json.dump({"version": "1.0", "truncation": None, "padding": None, "normalizer": None, "pre_tokenizer": None,
               "post_processor": None, "decoder": None,
               "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                                 "normalized": False, "special": True} for i, c in added],
               "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False, "vocab": vocab,
                         "merges": []}}, open(sys.argv[1] + "/" + name, "w"))
letters = "abcdefghijklmnopqrstuvwxyz "
tokenizer("pad.json", {c: i for i, c in enumerate(letters)}, [(27, "<|endoftext|>")])
tokenizer("gap.json", {c: i + (i >= 5) for i, c in enumerate(letters)}, [])
PY
# texts FILE PROMPTS NEW: each line of FILE is its prompt's letters and NEW more (at least 1 with NEW = 0), spaced
texts() {
    "$PYTHON3" -c 'import sys
out = open(sys.argv[1], encoding="utf-8").read().split("\n")
prompts, new = open(sys.argv[2]).read().split("\n")[:-1], int(sys.argv[3])
assert out[-1] == "" and len(out) - 1 == len(prompts), "%d lines for %d prompts" % (len(out) - 1, len(prompts))
for line, p in zip(out, prompts):
    tok, sep = line[0::2], line[1::2]
    assert set(sep) <= {" "} and set(tok) <= set("abcdefghijklmnopqrstuvwxyz "), "not the tokens: %r" % line
    assert tok.startswith(p) and (len(tok) == len(p) + new or (new == 0 and len(tok) > len(p))), \
        "%r: not the prompt %r and %s more" % (line, p, new or "some")' "$@"
}
printf 'the cab\nabc\nsat on\n' > "$scratch/pad.prompts"
printf 'the cab\n' > "$scratch/pad1.prompts"
printf '27 19 7 4 26 2 0 1\n' > "$scratch/pad.ids"
sample pad 1 "$P" sample.tokenizer="'$scratch/pad.json'" sample.prompt_tokens="'$scratch/pad.ids'" \
    sample.max_new_tokens=8 sample.seed=3
[ $? -eq 0 ] && texts "$scratch/pad.txt" "$scratch/pad1.prompts" 0 2> "$scratch/check" &&
    grep -q "^triad sample: the model's vocabulary has 64 ids, its tokenizer 28: the 36 padded ids 28 .. 63 are never drawn$" \
        "$scratch/pad.err"
ok $? "a padded vocabulary (64 ids, a tokenizer of 28), one prompt of ids streamed: its text, then ids of the tokenizer alone ('$(tr -d '\n' < "$scratch/pad.txt")')"
{ tail -n 1 "$scratch/check"; grep "never drawn" "$scratch/pad.err"; } | diag
for t in 0.9 0; do
    sample gap 1 "$P" sample.tokenizer="'$scratch/gap.json'" sample.prompt_file="'$scratch/pad.prompts'" \
        sample.max_new_tokens=8 sample.seed=3 sample.temperature=$t
    [ $? -eq 0 ] && texts "$scratch/gap.txt" "$scratch/pad.prompts" 8 2> "$scratch/check" &&
        grep -q "^triad sample: the tokenizer has no token for 1 id below 28 (the first: 5): never drawn$" "$scratch/gap.err"
    ok $? "a tokenizer with a gap among its ids, 3 prompts from a file, temperature $t: each line the prompt, then 8 tokens of the tokenizer ('$(tr '\n' '|' < "$scratch/gap.txt")')"
    tail -n 1 "$scratch/check" | diag
done
sample gap2 2 "$P" sample.tokenizer="'$scratch/gap.json'" sample.prompt_file="'$scratch/pad.prompts'" \
    sample.max_new_tokens=8 sample.seed=3 sample.temperature=0 parallel.pp=2
[ $? -eq 0 ] && cmp -s "$scratch/gap2.txt" "$scratch/gap.txt"
ok $? "... and the same text on pp 2 (the last stage, rank 1, draws among the same ids)"
# generation_config.json beside the tokenizer (Hugging Face's model folders: eos_token_id, an id or a list, ends a
# generation): the greedy text stops before its ids, named by sample.tokenizer's folder or kept in the checkpoint
# of a run whose data.tokenizer is the folder; triad export writes the kept file back as it was
mkdir -p "$scratch/gen"
cp "$scratch/pad.json" "$scratch/gen/tokenizer.json"
sample gen0 1 "$P" sample.tokenizer="'$scratch/gen'" sample.prompt_tokens="'$scratch/pad.ids'" sample.max_new_tokens=8 \
    sample.temperature=0
third=$("$PYTHON3" -c "import sys
new = open(sys.argv[1]).read()[:-1][0::2][7:]     # the new tokens: the first that is not the first new one
print('abcdefghijklmnopqrstuvwxyz '.index([t for t in new if t != new[0]][0]))" "$scratch/gen0.txt")
printf '{"bos_token_id": 27, "eos_token_id": [63, %s], "do_sample": true}\n' "$third" > "$scratch/gen/generation_config.json"
# cut FILE: FILE is gen0's text up to the first new token of id $third
cut_at() {
    "$PYTHON3" -c "import sys
full, got, t = open(sys.argv[1]).read(), open(sys.argv[2]).read(), 'abcdefghijklmnopqrstuvwxyz '[int(sys.argv[3])]
tok = full[:-1][0::2]
new = tok[7:]
want = ' '.join(tok[:7] + new[:new.index(t)]) + '\n'
sys.exit(not (got == want and len(got) < len(full)))" "$scratch/gen0.txt" "$1" "$third"
}
sample gen1 1 "$P" sample.tokenizer="'$scratch/gen'" sample.prompt_tokens="'$scratch/pad.ids'" sample.max_new_tokens=8 \
    sample.temperature=0
[ $? -eq 0 ] && cut_at "$scratch/gen1.txt"
ok $? "sample.tokenizer's folder holds generation_config.json: the greedy text ends before eos_token_id [63, $third] ('$(tr -d '\n' < "$scratch/gen0.txt")' to '$(tr -d '\n' < "$scratch/gen1.txt")')"
triad_run 1 "$DECKS/tiny.nml" train.steps=3 io.save_final=.true. data.tokenizer="'$scratch/gen'" \
    io.run_dir="'$scratch/genrun'"
st=$?
sample gen2 2 "$scratch/genrun/ckpt_3.h5" sample.prompt_tokens="'$scratch/pad.ids'" sample.max_new_tokens=8 \
    sample.temperature=0 parallel.pp=2
[ $st -eq 0 ] && [ $? -eq 0 ] && cut_at "$scratch/gen2.txt" &&
    "$TRIAD" export "$scratch/genrun/ckpt_3.h5" "$scratch/genx" > "$scratch/genx.out" 2>&1 &&
    cmp -s "$scratch/genx/generation_config.json" "$scratch/gen/generation_config.json"
ok $? "... kept in the checkpoint of a run whose data.tokenizer is the folder: the same text on pp 2, and triad export writes the file back unchanged"
printf '{"eos_token_id": [63, 64]}\n' > "$scratch/gen/generation_config.json"
refused "an eos_token_id outside the vocabulary, the file named" \
    "gen: generation_config.json's eos_token_id holds 64, not an id of the model's vocabulary (0 .. 63)" 1 "$P" \
    sample.tokenizer="'$scratch/gen'" sample.prompt_tokens="'$scratch/pad.ids'"
# generation_config.json's sampling defaults (temperature, top_k, top_p: what vLLM takes from a model's file)
# stand in for the sample.* keys not given on the command line, on every rank (pp 2: the last stage draws)
gen="sample.tokenizer='$scratch/gen' sample.prompt_tokens='$scratch/pad.ids' sample.max_new_tokens=8 sample.seed=5"
printf '{"eos_token_id": 63}\n' > "$scratch/gen/generation_config.json"
sample genx0 1 "$P" $gen sample.temperature=0.7 sample.top_k=5 sample.top_p=0.8
sample genx1 1 "$P" $gen
printf '{"eos_token_id": 63, "temperature": 0.7, "top_k": 5, "top_p": 0.8, "do_sample": false}\n' \
    > "$scratch/gen/generation_config.json"
sample genx2 1 "$P" $gen
st2=$?
sample genx3 2 "$P" $gen parallel.pp=2
st3=$?
[ $st2 -eq 0 ] && [ $st3 -eq 0 ] && cmp -s "$scratch/genx2.txt" "$scratch/genx0.txt" &&
    cmp -s "$scratch/genx3.txt" "$scratch/genx0.txt" && ! cmp -s "$scratch/genx1.txt" "$scratch/genx0.txt" &&
    grep -q "^triad sample: temperature 0.7, top_k 5, top_p 0.8 from generation_config.json ($scratch/gen); sample.temperature, sample.top_k and sample.top_p given on the command line win$" "$scratch/genx2.err" &&
    ! grep -q "from generation_config" "$scratch/genx0.err" "$scratch/genx1.err"
ok $? "generation_config.json's temperature 0.7, top_k 5, top_p 0.8: the text of the three given as options, on pp 2 too, said on stderr ('$(tr -d '\n' < "$scratch/genx2.txt")'; the defaults: '$(tr -d '\n' < "$scratch/genx1.txt")')"
sample genx4 1 "$P" $gen "sample. temperature=1" sample.TOP_K=0 " sample.top_p = 1"
[ $? -eq 0 ] && cmp -s "$scratch/genx4.txt" "$scratch/genx1.txt" && ! grep -q "from generation_config" "$scratch/genx4.err"
ok $? "... each given on the command line (any case, blanks around the key and its dot) wins over the file's"
sample genx5 1 "$P" $gen sample.top_k=0
[ $? -eq 0 ] && grep -q "^triad sample: temperature 0.7, top_p 0.8 from generation_config.json" "$scratch/genx5.err"
ok $? "... top_k given alone: the file's temperature and top_p still taken, and said"
printf '{"top_k": 1}\n' > "$scratch/gen/generation_config.json"
sample genx6 1 "$P" $gen
sample genx7 1 "$P" $gen sample.temperature=0
[ $? -eq 0 ] && cmp -s "$scratch/genx6.txt" "$scratch/genx7.txt"
ok $? "generation_config.json's top_k 1: the greedy text"
for bad in '"top_p": 1.5|top_p is 1.5, not a number from 0 to 1' '"top_k": 2.5|top_k is 2.5, not a whole number' \
           '"temperature": "hot"|temperature is a value that is no number'; do
    printf '{%s}\n' "${bad%%|*}" > "$scratch/gen/generation_config.json"
    refused "generation_config.json's ${bad%%|*}: refused, the file and the key named" \
        "gen: generation_config.json's ${bad#*|}" 1 "$P" $gen
done
rm "$scratch/gen/generation_config.json"
sample noid 1 "$P" sample.tokenizer=none sample.prompt_tokens="'$scratch/pad.ids'" sample.max_new_tokens=8
[ $? -eq 0 ] && ! grep -q "never drawn" "$scratch/noid.err" && [ "$(wc -w < "$scratch/noid.txt")" -eq 16 ]
ok $? "without a tokenizer (ids out) every id of the 64 may be drawn ($(cat "$scratch/noid.txt"))"
printf '27 19 40 7\n' > "$scratch/pad40.ids"
refused "a prompt id past the tokenizer's (its text could not be decoded)" \
    "pad40.ids: token 40 (id number 3) is not an id of the tokenizer (0 .. 27)" 1 "$P" \
    sample.tokenizer="'$scratch/pad.json'" sample.prompt_tokens="'$scratch/pad40.ids'" sample.max_new_tokens=4
printf '0 5 6\n' > "$scratch/gap5.ids"
refused "a prompt id in the tokenizer's gap" "gap5.ids: token 5 (id number 2) is not an id of the tokenizer" 1 "$P" \
    sample.tokenizer="'$scratch/gap.json'" sample.prompt_tokens="'$scratch/gap5.ids'" sample.max_new_tokens=4
printf '1 99999999999999999999 2\n' > "$scratch/huge.ids"
refused "a prompt id too large for any integer, named as written" \
    "huge.ids: token 99999999999999999999 (id number 2) is not an id of this model's vocabulary (0 .. 63)" 1 "$P" \
    sample.tokenizer=none sample.prompt_tokens="'$scratch/huge.ids'" sample.max_new_tokens=4
printf '1 %s 2\n' "$(printf '9%.0s' $(seq 1 70))" > "$scratch/long.ids"
refused "a 70-digit id is one word, not two ids" "long.ids: token 9\{63\}\.\.\. (id number 2) is not an id" 1 "$P" \
    sample.tokenizer=none sample.prompt_tokens="'$scratch/long.ids'" sample.max_new_tokens=4
printf '1 %s5 2\n' "$(printf '0%.0s' $(seq 1 70))" > "$scratch/zeros.ids"
sample zeros 1 "$P" sample.tokenizer=none sample.prompt_tokens="'$scratch/zeros.ids'" sample.max_new_tokens=2
[ $? -eq 0 ] && [ "$(cut -d' ' -f1-3 "$scratch/zeros.txt")" = "1 5 2" ]
ok $? "a 71-character word of leading zeros is the id it spells ($(cat "$scratch/zeros.txt"))"
printf '1 %sx 2\n' "$(printf '7%.0s' $(seq 1 70))" > "$scratch/longword.ids"
refused "a 71-character word whose last character is no digit is not an integer" \
    "longword.ids: '7\{63\}\.\.\.' (id number 2) is not an integer" 1 "$P" \
    sample.tokenizer=none sample.prompt_tokens="'$scratch/longword.ids'" sample.max_new_tokens=4
# a checkpoint of 2 ranks whose deck names training-only settings (recompute of one layer, a testing aid on rank 1):
# sampled and evaluated on 1 rank, those settings set aside (they were refused, and sample takes no override of them)
triad_run 2 "$DECKS/tiny.nml" $train train.steps=6 train.recompute="'full'" train.recompute_layers=1 \
    diag.slow_rank=1 diag.slow_seconds=0 io.run_dir="'$scratch/aids'"
sample aids 1 "$scratch/aids/ckpt_6.h5" sample.prompt=The sample.max_new_tokens=4 sample.temperature=0
st=$?
grep error "$scratch/aids.err" | diag
$MPIEXEC -n 1 "$TRIAD" eval "$scratch/aids/ckpt_6.h5" data.val_path="'$corpus'" > "$scratch/aids_eval.out" 2>&1
st2=$?
grep error "$scratch/aids_eval.out" | diag
[ $st -eq 0 ] && [ $st2 -eq 0 ] && grep -q "^held-out" "$scratch/aids_eval.out"
ok $? "a checkpoint of recompute_layers = 1 and diag.slow_rank = 1 (2 ranks) samples and evaluates on 1 rank (status $st, $st2)"
# a byte-level model whose vocabulary is padded (data.kind = 'text', vocab_size = 512, as README's deck): its text
# is its bytes, the ids above 255 never drawn, a prompt id above 255 refused
triad_run 1 "$DECKS/tiny.nml" $train model.vocab_size=512 train.steps=6 io.run_dir="'$scratch/pad512'"
sample pad512 1 "$scratch/pad512/ckpt_6.h5" sample.prompt=The sample.max_new_tokens=16 sample.temperature=1.5 \
    sample.seed=5
[ $? -eq 0 ] && grep -q "^triad sample: this model's text is its bytes: the 256 padded ids 256 .. 511 are never drawn" \
    "$scratch/pad512.err" && [ "$(head -c 3 "$scratch/pad512.txt")" = The ]
ok $? "a text model of 512 ids samples text from a text prompt, its 256 padded ids never drawn"
grep error "$scratch/pad512.err" | diag
printf '84 300 101\n' > "$scratch/b300.ids"
refused "a prompt id above 255 of a padded text model" "b300.ids: token 300 (id number 2) is no byte" 1 \
    "$scratch/pad512/ckpt_6.h5" sample.prompt_tokens="'$scratch/b300.ids'" sample.max_new_tokens=4
printf '1 2 3x 4\n' > "$scratch/word.ids"
refused "a word that is not an integer, named" "word.ids: '3x' (id number 3) is not an integer" 1 "$P" \
    sample.tokenizer=none sample.prompt_tokens="'$scratch/word.ids'" sample.max_new_tokens=4
done_testing
