#!/bin/sh
# Weights in and out against files made and read by an independent
# implementation of the formats (regression/hf_files.py, from their
# definitions): Hugging Face folders of LlamaForCausalLM (F32, BF16 and F16
# tensors, two shards with an index), GPT2LMHeadModel (Conv1D weights,
# "transformer." names), MixtralForCausalLM and Qwen2MoeForCausalLM (every
# expert of every layer, the shared expert and its gate, q, k and v
# biases; a dense first block, mlp_only_layers), and an llm.c GPT-2
# checkpoint (version 3, fp32, and version 5, bf16), read into every tensor bit for
# bit on one rank and on tp 2 x pp 2; `triad export` of a trained llama,
# GPT-2, Mixtral and Qwen2-MoE, read back by the independent reader and
# imported again bitwise; a config.json of another model (a dense deck for
# experts, another expert count), damaged safetensors files and refused
# exports (a sigmoid router, a tensor the folder would not carry, a weight
# beyond fp16's range with export.dtype = 'fp16') each give a clear error.
. "$(dirname "$0")/lib.sh"

hf_decks # $H, $KL, $KG, $KM, $KQ and $scratch/{llama,gpt2,mixtral,qwen2_moe}.nml (lib.sh)
grid="parallel.tp=2 parallel.pp=2 train.micro_batch_size=2"

# imported WHAT DECK SRC K NP [overrides]: train.steps = 0 from SRC, the step-0 checkpoint against SRC
n=0
imported() {
    what=$1 deck=$2 src=$3 k=$4 np=$5
    shift 5
    n=$((n + 1))
    triad_run "$np" "$scratch/$deck.nml" "$@" io.init_from="'$src'" io.run_dir="'$scratch/in$n'"
    st=$?
    out=$([ $st -eq 0 ] && $H check "$src" "$scratch/in$n/ckpt_0.h5" "$k" 2>&1)
    ok $? "$what: every tensor read bit for bit on $np rank(s)"
    echo "$out" | diag
    [ $st -eq 0 ] || diag < "$scratch/last.out"
}

$H make llama "$scratch/hf_llama" "$KL" --dtypes
imported "a LlamaForCausalLM folder (F32, BF16, F16 tensors)" llama "$scratch/hf_llama" "$KL" 1
imported "the same on tp 2 x pp 2 (each rank its shard)" llama "$scratch/hf_llama" "$KL" 4 $grid
imported "the same under ZeRO-3 on pp 2 x dp 2 (each rank its slice)" llama "$scratch/hf_llama" "$KL" 4 \
    parallel.pp=2 parallel.zero_stage=3
$H make llama "$scratch/hf_sharded" "$KL" --shards 2
imported "a LlamaForCausalLM folder in 2 shards with model.safetensors.index.json" llama "$scratch/hf_sharded" "$KL" 1
$H make gpt2 "$scratch/hf_gpt2" "$KG" --dtypes
imported "a GPT2LMHeadModel folder (Conv1D [in, out], 24 positions for seq_len 16)" gpt2 "$scratch/hf_gpt2" "$KG" 1
imported "the same on tp 2 x pp 2" gpt2 "$scratch/hf_gpt2" "$KG" 4 $grid
imported "the same under ZeRO-3 on tp 2 x dp 2 (each rank its slice of its shard)" gpt2 "$scratch/hf_gpt2" "$KG" 4 \
    parallel.tp=2 parallel.zero_stage=3
$H llmc "$scratch/gpt2.bin" "$KG"
imported "an llm.c GPT-2 checkpoint (magic 20240326, version 3, padded vocabulary)" gpt2 "$scratch/gpt2.bin" "$KG" 2 \
    parallel.tp=2
$H llmc "$scratch/gpt2_bf16.bin" "$KG" --bf16
imported "an llm.c GPT-2 checkpoint of version 5 (bf16, as train_gpt2.py --dtype bfloat16 writes it)" gpt2 \
    "$scratch/gpt2_bf16.bin" "$KG" 2 parallel.pp=2

$H make mixtral "$scratch/hf_mixtral" "$KM" --dtypes
imported "a MixtralForCausalLM folder (4 experts, F32, BF16, F16 tensors)" mixtral "$scratch/hf_mixtral" "$KM" 1
imported "the same on tp 2 x pp 2 (each rank its shard of every expert)" mixtral "$scratch/hf_mixtral" "$KM" 4 $grid
$H make qwen2_moe "$scratch/hf_qwen2_moe" "$KQ" --dtypes --shards 2
imported "a Qwen2MoeForCausalLM folder in 2 shards (experts, gated shared expert, q, k, v biases)" qwen2_moe \
    "$scratch/hf_qwen2_moe" "$KQ" 1
imported "the same on tp 2 x pp 2" qwen2_moe "$scratch/hf_qwen2_moe" "$KQ" 4 $grid
# a dense first block (mlp_only_layers = [0], intermediate_size its width): model.moe_dense_layers
KQD=$(echo "$KQ" | sed 's/}$/,"Ld":1}/')
dense="model.moe_dense_layers=1 model.ffn_hidden=64"
$H make qwen2_moe "$scratch/hf_qwen2_dense" "$KQD"
imported "a Qwen2MoeForCausalLM folder with a dense first block (mlp_only_layers = [0])" qwen2_moe \
    "$scratch/hf_qwen2_dense" "$KQD" 1 $dense
imported "the same on tp 2 x pp 2 (the first stage's block dense)" qwen2_moe "$scratch/hf_qwen2_dense" "$KQD" 4 $grid \
    $dense
triad_run 4 "$scratch/qwen2_moe.nml" $grid $dense train.steps=6 io.init_from="'$scratch/hf_qwen2_dense'" \
    io.run_dir="'$scratch/t_dense'" &&
    "$TRIAD" export "$scratch/t_dense/ckpt_6.h5" "$scratch/ex_dense" > "$scratch/last.out" 2>&1 &&
    $H check "$scratch/ex_dense" "$scratch/t_dense/ckpt_6.h5" "$KQD" > "$scratch/cmp" 2>&1
ok $? "a dense first block: 6 steps on tp 2 x pp 2, exported (mlp_only_layers = [0]) and read back independently"
diag < "$scratch/cmp"
"$TRIAD" export "$scratch/t_dense/ckpt_6.h5" "$scratch/ex_unread" model.n_layer=3 > "$scratch/last.out" 2>&1
[ $? -eq 1 ] && grep -q "error: triad export: model.n_layer is not read by triad export" "$scratch/last.out" &&
    grep -q -F "hint: remove it; triad export takes export.*" "$scratch/last.out" && [ ! -e "$scratch/ex_unread" ]
ok $? "triad export with a key it does not read (model.n_layer): an error, no folder"
imported "the exported folder with a dense first block imported again" qwen2_moe "$scratch/ex_dense" "$KQD" 1 $dense

# continue training from the folder, then export, read back independently, import again
for fam in llama gpt2 mixtral qwen2_moe; do
    case $fam in llama) k=$KL ;; gpt2) k=$KG ;; mixtral) k=$KM ;; *) k=$KQ ;; esac
    triad_run 4 "$scratch/$fam.nml" $grid train.steps=6 io.init_from="'$scratch/hf_$fam'" io.run_dir="'$scratch/t_$fam'"
    ok $? "$fam: 6 steps on tp 2 x pp 2 from the Hugging Face folder"
    "$TRIAD" export "$scratch/t_$fam/ckpt_6.h5" "$scratch/ex_$fam" > "$scratch/last.out" 2>&1 &&
        $H check "$scratch/ex_$fam" "$scratch/t_$fam/ckpt_6.h5" "$k" > "$scratch/cmp" 2>&1
    ok $? "$fam: triad export of the tp 2 x pp 2 checkpoint reads back (independent reader) as the checkpoint's tensors"
    diag < "$scratch/cmp"
    imported "$fam: the exported folder imported again" "$fam" "$scratch/ex_$fam" "$k" 1
done
"$TRIAD" export "$scratch/t_llama/ckpt_6.h5" "$scratch/ex_bf16" export.dtype=bf16 > "$scratch/last.out" 2>&1 &&
    grep -q '"torch_dtype": "bfloat16"' "$scratch/ex_bf16/config.json" &&
    grep -q '"num_key_value_heads": 2' "$scratch/ex_bf16/config.json" &&
    "$PYTHON3" -c "import sys, json, struct; f = open(sys.argv[1], 'rb'); n = struct.unpack('<Q', f.read(8))[0];
h = json.loads(f.read(n)); sys.exit(any(v['dtype'] != 'BF16' for k, v in h.items() if k != '__metadata__'))" \
        "$scratch/ex_bf16/model.safetensors"
ok $? "export.dtype = 'bf16': every tensor BF16, config.json says bfloat16 and the kv heads"
# one weight of 1e6, beyond fp16's range (65504): export.dtype = 'fp16' would write +Inf, which no reader
# takes; refused before anything is written (a folder already there keeps what it held), bf16 holds it
for fam in llama gpt2; do
    case $fam in llama) k=$KL w=model.layers.1.mlp.down_proj.weight at="3 5" ;;
                 *) k=$KG w=transformer.h.1.mlp.c_fc.weight at="3 5" ;; esac # (Conv1D [in, out]: fc_w row 5, column 3)
    $H make $fam "$scratch/big_$fam" "$k"
    # shellcheck disable=SC2086
    $H poke "$scratch/big_$fam" $w $at 1e6
    triad_run 1 "$scratch/$fam.nml" io.init_from="'$scratch/big_$fam'" io.run_dir="'$scratch/t_big_$fam'"
    ok $? "$fam: a folder with one weight of 1e6 imported (train.steps = 0: the checkpoint holds it)"
    mkdir -p "$scratch/ex16_$fam" && echo keep > "$scratch/ex16_$fam/notes.txt"
    "$TRIAD" export "$scratch/t_big_$fam/ckpt_0.h5" "$scratch/ex16_$fam" export.dtype=fp16 > "$scratch/last.out" 2>&1
    st=$?
    [ $st -eq 1 ] && [ "$(ls "$scratch/ex16_$fam")" = notes.txt ] &&
        grep -q "export with export.dtype = 'bf16' (fp32's range) or 'fp32': nothing written" "$scratch/last.out"
    ok $? "$fam: export.dtype = 'fp16' of it is refused (status $st), the folder as it was (nothing written, nothing lost)"
    grep error "$scratch/last.out" | diag
done
"$TRIAD" export "$scratch/t_big_llama/ckpt_0.h5" "$scratch/ex16_new" export.dtype=fp16 > /dev/null 2>&1
[ $? -eq 1 ] && [ ! -e "$scratch/ex16_new" ]
ok $? "... and into a new folder: refused, the folder it made removed again"
grep -q -F "cannot hold tensor 'h.1.mlp.c_fc.weight': its element (row 3, column 5) is 1e+06 (the checkpoint's /model/h.1/fc_w, row 5, column 3), beyond fp16's largest value 65504; written, it would be +Inf" \
    "$scratch/last.out"
ok $? "... the message names the tensor, its element as the file stores it (and as the checkpoint does) and the value"
"$TRIAD" export "$scratch/t_big_llama/ckpt_0.h5" "$scratch/ex_big_bf16" export.dtype=bf16 > "$scratch/last.out" 2>&1
ok $? "export.dtype = 'bf16' of the same checkpoint writes it (fp32's range)"
diag < "$scratch/last.out"
imported "the bf16 folder with the weight of 1e6 imported again" llama "$scratch/ex_big_bf16" "$KL" 1
"$TRIAD" export "$scratch/t_llama/ckpt_6.h5" "$scratch/ex_llama" > "$scratch/last.out" 2>&1
[ $? -eq 1 ] && grep -q "already holds a model" "$scratch/last.out"
ok $? "an export into a folder that holds a model is refused (nothing overwritten)"
"$TRIAD" export "$scratch/t_llama/ckpt_6.h5" "$scratch/new/hf/llama" > "$scratch/last.out" 2>&1 &&
    [ -f "$scratch/new/hf/llama/config.json" ] && [ -f "$scratch/new/hf/llama/model.safetensors" ]
ok $? "an export into a folder whose parents are missing makes them (mkdir -p)"
touch "$scratch/plain"
"$TRIAD" export "$scratch/t_llama/ckpt_6.h5" "$scratch/plain/llama" > "$scratch/last.out" 2>&1
[ $? -eq 1 ] && grep -q "$scratch/plain is a file, not a folder: export writes its files into the folder DIR" \
    "$scratch/last.out" && [ ! -s "$scratch/plain" ]
ok $? "an export below a plain file is refused, naming it (the file untouched)"

triad_run 1 "$scratch/mixtral.nml" model.moe_router="'sigmoid'" io.run_dir="'$scratch/t_sigmoid'" &&
    "$TRIAD" export "$scratch/t_sigmoid/ckpt_0.h5" "$scratch/ex_sigmoid" > "$scratch/last.out" 2>&1
[ $? -eq 1 ] && grep -q "no Hugging Face architecture expresses this mixture of experts: a sigmoid router" \
    "$scratch/last.out" && [ ! -e "$scratch/ex_sigmoid" ]
ok $? "the export of a sigmoid router's checkpoint is refused, naming it (nothing written)"
grep error "$scratch/last.out" | diag
cp "$scratch/t_mixtral/ckpt_6.h5" "$scratch/extra.h5"
"$PYTHON3" -c "import sys, h5py; h5py.File(sys.argv[1], 'a').create_dataset('model/h.1/expert.2/fc_b', data=[0.0] * 48)" \
    "$scratch/extra.h5" && "$TRIAD" export "$scratch/extra.h5" "$scratch/ex_extra" > "$scratch/last.out" 2>&1
[ $? -eq 1 ] && grep -q "holds /model/h.1/expert.2/fc_b, which its stored deck's model does not have" \
    "$scratch/last.out" && [ ! -e "$scratch/ex_extra" ]
ok $? "the export of a checkpoint with a tensor the folder would not carry is refused (nothing dropped silently)"
grep error "$scratch/last.out" | diag

# the stored deck is the checkpoint's description of its model: one damaged (another n_layer, or empty) makes the file
# corrupted, not a file of another model; a file from before its checksum (none beside it) still reads
for how in layers empty; do
    cp "$scratch/t_llama/ckpt_6.h5" "$scratch/deck_$how.h5"
    "$PYTHON3" - "$scratch/deck_$how.h5" $how << 'PY'
import re, sys, h5py, numpy as np
with h5py.File(sys.argv[1], "a") as f:
    d = f.attrs["deck"]
    f.attrs["deck"] = np.bytes_(re.sub(rb"(n_layer *= *)(\d+)", lambda m: m.group(1) + b"7", d) if sys.argv[2] == "layers" else b"")
PY
    "$TRIAD" export "$scratch/deck_$how.h5" "$scratch/ex_deck_$how" > "$scratch/last.out" 2>&1
    [ $? -eq 1 ] && grep -q "deck_$how.h5: the file is corrupted: its stored deck is empty, or not the text its checksum was made of" \
        "$scratch/last.out" && [ ! -e "$scratch/ex_deck_$how" ]
    ok $? "a checkpoint whose stored deck is damaged ($how) is refused as corrupted (nothing written)"
    grep error "$scratch/last.out" | diag
done
cp "$scratch/t_llama/ckpt_6.h5" "$scratch/deck_old.h5"
"$PYTHON3" -c "import sys, h5py; del h5py.File(sys.argv[1], 'a').attrs['deck_checksum']" "$scratch/deck_old.h5" &&
    "$TRIAD" export "$scratch/deck_old.h5" "$scratch/ex_deck_old" > "$scratch/last.out" 2>&1 &&
    cmp -s "$scratch/ex_deck_old/model.safetensors" "$scratch/ex_llama/model.safetensors"
ok $? "a checkpoint from before the deck's checksum exports as before"

# errors: each a clear message and status 1
# refused WHAT PATTERN DECK SRC [overrides]
refused() {
    what=$1 pattern=$2 deck=$3 src=$4
    shift 4
    triad_run 1 "$scratch/$deck.nml" "$@" io.init_from="'$src'" io.run_dir="'$scratch/bad$n'"
    st=$?
    n=$((n + 1))
    [ $st -eq 1 ] && grep -q -e "$pattern" "$scratch/last.out"
    ok $? "$what"
    grep "error" "$scratch/last.out" | head -n 2 | diag
}
refused "config.json of another model: each differing key with both values" \
    "n_layer = 3 in the deck, num_hidden_layers = 2 in config.json; d_model = 64 in the deck, hidden_size = 32" \
    llama "$scratch/hf_llama" model.n_layer=3 model.d_model=64 model.ffn_hidden=64
refused "a llama folder for a gpt2 deck" "model_type 'llama', but the deck's arch = 'gpt2'" gpt2 "$scratch/hf_llama"
refused "a Mixtral folder for a dense deck: the keys to set" \
    "a mixture of experts, but the deck's &model is dense (n_expert = 0): set n_expert = 4, n_expert_active = 2, moe_ffn_hidden = 24" \
    llama "$scratch/hf_mixtral" model.norm_eps=1e-5 model.rope_theta=1e6
refused "a Mixtral folder of another expert count" "n_expert = 8 in the deck, num_local_experts = 4 in config.json" \
    mixtral "$scratch/hf_mixtral" model.n_expert=8
refused "a Mixtral folder for a deck with a shared expert" "set n_shared_expert = 0 (Mixtral has no shared expert)" \
    mixtral "$scratch/hf_mixtral" model.n_shared_expert=1
refused "a Qwen2-MoE folder with a dense first block for a deck without" \
    "mlp_only_layers makes the first 1 block(s) dense, but the deck has moe_dense_layers = 0: set moe_dense_layers = 1" \
    qwen2_moe "$scratch/hf_qwen2_dense"
refused "a Mixtral folder for a deck with leading dense blocks" "set moe_dense_layers = 0 (Mixtral has experts in every block)" \
    mixtral "$scratch/hf_mixtral" model.moe_dense_layers=1
for kind in header offsets dtype shape; do
    cp -r "$scratch/hf_llama" "$scratch/bad_$kind"
    $H corrupt $kind "$scratch/bad_$kind"
done
refused "a header length past the end of the file" "does not fit the file" llama "$scratch/bad_header"
refused "data offsets past the end of the data" "reach past the end of the data" llama "$scratch/bad_offsets"
refused "a dtype triad does not read" "dtype I64: triad reads F32, F16 and BF16" llama "$scratch/bad_dtype"
refused "a tensor of the wrong shape" "; this model needs \[" llama "$scratch/bad_shape"
head -c 3000 "$scratch/gpt2.bin" > "$scratch/short.bin"
refused "a truncated llm.c checkpoint" "the file is truncated" gpt2 "$scratch/short.bin"
done_testing
