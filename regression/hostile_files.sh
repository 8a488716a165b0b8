#!/bin/sh
# Damaged weight files never crash triad and never pass silently: each way a
# Hugging Face folder, an llm.c checkpoint, a prompt file or a checkpoint
# given to `triad export` goes wrong is made here by the independent writer
# (regression/hf_files.py corrupt) or by hand, and must end in status 1 with
# a message that names the file, the tensor or key, what was expected and
# what was found; an export from a damaged checkpoint writes nothing.  So
# must a folder of another model than triad computes (config.json's
# activation, rotary fraction, GPT-2 epsilon and attention scale, a class
# that is no causal LM) or with tensors it would not read (a layer past
# num_hidden_layers); the buffers real files carry still load.
. "$(dirname "$0")/lib.sh"

hf_decks # $H, $KL, $KG and $scratch/{llama,gpt2}.nml (lib.sh)
sed 's/norm_eps = 1e-6/norm_eps = 1e-5/' "$scratch/llama.nml" > "$scratch/llama_eps5.nml"
$H make llama "$scratch/llama" "$KL"
$H make llama "$scratch/sharded" "$KL" --shards 2
$H make gpt2 "$scratch/gpt2" "$KG"
$H llmc "$scratch/gpt2.bin" "$KG"

# refused WHAT PATTERN DECK SRC [overrides]: status 1 and the message (grep -F)
n=0
refused() {
    what=$1 pattern=$2 deck=$3 src=$4
    shift 4
    n=$((n + 1))
    triad_run 1 "$scratch/$deck.nml" "$@" io.init_from="'$src'" io.run_dir="'$scratch/run$n'"
    st=$?
    [ $st -eq 1 ] && grep -q -F -e "$pattern" "$scratch/last.out" && ! grep -q -i "sanitizer\|segmentation\|signal" "$scratch/last.out"
    ok $? "$what"
    [ $st -eq 1 ] || echo "status $st" | diag
    grep "error" "$scratch/last.out" | head -n 2 | diag
}
# damaged KIND [SOURCE]: a copy of the folder SOURCE (default llama) damaged as KIND
damaged() {
    rm -rf "$scratch/$1"
    cp -r "$scratch/${2:-llama}" "$scratch/$1"
    $H corrupt "$1" "$scratch/$1" > "$scratch/corrupt.out"
}

# the safetensors container as the format defines it
damaged short_header
refused "a header length one byte short (every tensor shifted by a byte)" \
    "1 byte follows the last tensor's data" llama "$scratch/short_header"
damaged plus1
refused "the first tensor's offsets moved by one (a hole before it)" \
    "the first tensor begins at byte 1 of the data, not 0: a hole" llama "$scratch/plus1"
damaged overlap
refused "two tensors overlapping by 4 bytes" "of the data overlap tensor '" llama "$scratch/overlap"
damaged trailing
refused "16 bytes after the last tensor's data" "16 bytes follow the last tensor's data" llama "$scratch/trailing"
damaged duplicate
refused "a tensor named twice in the header (no first or last taken)" "named twice in the header" llama \
    "$scratch/duplicate"
damaged overflow
refused "a shape whose element count overflows 64 bits" "the shape's element count overflows 64 bits" llama \
    "$scratch/overflow"
damaged metadata
refused "__metadata__ with a number in it" "__metadata__[\"step\"] is not a string" llama "$scratch/metadata"
damaged utf8
refused "a header that is not UTF-8" "a byte 0xff that is not well-formed UTF-8" llama "$scratch/utf8"
damaged directory
refused "model.safetensors a directory" "model.safetensors: a directory, not a safetensors file" llama \
    "$scratch/directory"
damaged rank3
refused "a vector stored as [C, 1, 1]" "layernorm.weight' is [32, 1, 1]; this model needs [32]" llama \
    "$scratch/rank3"
damaged rank3 gpt2
refused "GPT-2's final norm as [C, 1, 1], named under its own (prefixed) name" \
    "tensor 'transformer.ln_f.weight' is [32, 1, 1]; this model needs [32]" gpt2 "$scratch/rank3"
damaged dtype
refused "a consistent I64 tensor where a weight belongs" "dtype I64: triad reads F32, F16 and BF16" llama \
    "$scratch/dtype"
damaged nan
t=$(cat "$scratch/corrupt.out")
refused "a NaN weight: the file, the tensor and its first bad element" \
    "nan/model.safetensors: tensor '$t': element 37 (row 1, column 5) is NaN" llama \
    "$scratch/nan"
triad_run 1 "$scratch/llama.nml" io.init_from="'$scratch/nan'" io.allow_nonfinite_weights=.true. \
    io.run_dir="'$scratch/nan_allowed'"
ok $? "io.allow_nonfinite_weights = .true. loads the same folder"
damaged inf
refused "an infinite weight" "element 37 (row 1, column 5) is -Inf" llama "$scratch/inf"

# config.json: types as strict as the keys' meaning
damaged config_real_layers
refused "n_layer 2.000001 is not an integer" "\"num_hidden_layers\" is 2.000001; it must be an integer" llama \
    "$scratch/config_real_layers"
damaged config_string_theta
refused "rope_theta as a string is not taken for an absent key" \
    "\"rope_theta\" is a string \"500000\"; it must be a number" llama "$scratch/config_string_theta"
damaged config_string_tied
refused "tie_word_embeddings \"yes\" is not a boolean" "\"tie_word_embeddings\" is a string \"yes\"; it must be true or false" \
    llama "$scratch/config_string_tied"
damaged config_no_eps
refused "a default is said to be the default, not config.json's value" \
    "norm_eps = 1e-05 in the deck, but config.json has no rms_norm_eps (its default is 1e-06)" llama_eps5 \
    "$scratch/config_no_eps"
damaged config_nul
refused "a NUL byte in config.json is named, not cut off" "0x00 does not start a value" llama "$scratch/config_nul"

# config.json keys that describe a model triad does not compute (each loaded
# silently once): named with the file, the key and its value, and why
# variant NAME SOURCE KEY=JSON ...: a copy of folder SOURCE with config.json's keys set
variant() {
    name=$1 src=$2
    shift 2
    rm -rf "$scratch/$name"
    cp -r "$scratch/$src" "$scratch/$name"
    $H config "$scratch/$name" "$@"
}
variant act_gelu llama hidden_act='"gelu"'
refused "llama: hidden_act \"gelu\" (triad's MLP is SwiGLU)" \
    "act_gelu/config.json: hidden_act = \"gelu\": triad's llama MLP computes SiLU" llama "$scratch/act_gelu"
variant act_relu llama hidden_act='"relu"'
refused "llama: hidden_act \"relu\"" "hidden_act = \"relu\": triad's llama MLP computes SiLU (SwiGLU" llama \
    "$scratch/act_relu"
variant partial_rope llama partial_rotary_factor=0.5
refused "llama: partial_rotary_factor 0.5 (only part of each head rotated)" \
    "partial_rope/config.json: partial_rotary_factor = 0.5: the model rotates only that fraction" llama \
    "$scratch/partial_rope"
variant classifier llama architectures='["LlamaForSequenceClassification"]'
refused "llama: architectures LlamaForSequenceClassification (not a causal LM)" \
    "classifier/config.json: architectures[0] = \"LlamaForSequenceClassification\": triad trains causal language models" \
    llama "$scratch/classifier"
variant gpt2_relu gpt2 activation_function='"relu"'
refused "gpt2: activation_function \"relu\" (triad's GELU is the tanh approximation)" \
    "gpt2_relu/config.json: activation_function = \"relu\": triad's GPT-2 MLP computes the tanh approximation of GELU" \
    gpt2 "$scratch/gpt2_relu"
variant gpt2_gelu gpt2 activation_function='"gelu"'
refused "gpt2: activation_function \"gelu\" (the exact GELU, not the tanh approximation)" \
    "activation_function = \"gelu\": triad's GPT-2 MLP" gpt2 "$scratch/gpt2_gelu"
variant gpt2_eps gpt2 layer_norm_epsilon=1e-6
refused "gpt2: layer_norm_epsilon 1e-6 (triad's is 1e-5, fixed)" \
    "gpt2_eps/config.json: layer_norm_epsilon = 1e-06: triad's GPT-2 LayerNorm epsilon is 1e-5, fixed" gpt2 \
    "$scratch/gpt2_eps"
variant gpt2_unscaled gpt2 scale_attn_weights=false
refused "gpt2: scale_attn_weights false" "gpt2_unscaled/config.json: scale_attn_weights = false" gpt2 \
    "$scratch/gpt2_unscaled"
variant gpt2_layer_scaled gpt2 scale_attn_by_inverse_layer_idx=true
refused "gpt2: scale_attn_by_inverse_layer_idx true" \
    "gpt2_layer_scaled/config.json: scale_attn_by_inverse_layer_idx = true" gpt2 "$scratch/gpt2_layer_scaled"
variant gpt2_classifier gpt2 architectures='["GPT2ForSequenceClassification"]'
refused "gpt2: architectures GPT2ForSequenceClassification" \
    "architectures[0] = \"GPT2ForSequenceClassification\": triad trains causal language models, and reads model_type 'gpt2' as GPT2LMHeadModel" \
    gpt2 "$scratch/gpt2_classifier"

# tensors the model does not read: named with the file (a deeper model than
# config.json says, a tensor of another architecture, a head the tied model
# would ignore); the buffers real files carry are no weights and load
$H make llama "$scratch/deep" "$(echo "$KL" | sed 's/"L":2/"L":3/')" --shards 2
$H config "$scratch/deep" num_hidden_layers=2
refused "a 3-layer folder (2 shards) whose config.json says 2 layers: layer 2 is not dropped silently" \
    "/deep/model-00002-of-00002.safetensors holds tensor 'model.layers.2." llama "$scratch/deep"
grep -q "which the model does not read: it is of layer 2, and config.json's num_hidden_layers = 2" "$scratch/last.out"
ok $? "... the message says which layer and which key"
variant qnorm llama
$H add "$scratch/qnorm" model.layers.0.self_attn.q_norm.weight '[8]'
refused "a tensor LlamaForCausalLM does not have (a q norm)" \
    "qnorm/model.safetensors holds tensor 'model.layers.0.self_attn.q_norm.weight', which the model does not read: LlamaForCausalLM has no such tensor" \
    llama "$scratch/qnorm"
$H make llama "$scratch/tied_head" "$(echo "$KL" | sed 's/"tied":false/"tied":true/')"
$H add "$scratch/tied_head" lm_head.weight '[64, 32]'
refused "a tied model's folder with an lm_head.weight (it would be ignored)" \
    "holds tensor 'lm_head.weight', which the model does not read: config.json ties the head to the embedding" llama \
    "$scratch/tied_head" model.tie_embeddings=.true.
$H make llama "$scratch/tied_copy" "$(echo "$KL" | sed 's/"tied":false/"tied":true/')"
$H copy "$scratch/tied_copy" model.embed_tokens.weight lm_head.weight
triad_run 1 "$scratch/llama.nml" model.tie_embeddings=.true. io.init_from="'$scratch/tied_copy'" \
    io.run_dir="'$scratch/tied_copy_run'"
ok $? "a tied model's folder whose lm_head.weight is the embedding's copy, byte for byte, loads"
variant real_llama llama hidden_act='"silu"' partial_rotary_factor=1.0 architectures='["LLaMAForCausalLM"]'
for l in 0 1; do $H add "$scratch/real_llama" model.layers.$l.self_attn.rotary_emb.inv_freq '[4]'; done
triad_run 1 "$scratch/llama.nml" io.init_from="'$scratch/real_llama'" io.run_dir="'$scratch/real_llama_run'"
ok $? "llama: rotary_emb.inv_freq buffers, hidden_act silu, partial_rotary_factor 1, architectures LLaMAForCausalLM load"
grep error "$scratch/last.out" | diag
variant real_gpt2 gpt2 activation_function='"gelu_pytorch_tanh"' layer_norm_epsilon=1e-5 scale_attn_weights=true \
    scale_attn_by_inverse_layer_idx=false
for l in 0 1; do $H add "$scratch/real_gpt2" transformer.h.$l.attn.masked_bias '[]'; done
triad_run 1 "$scratch/gpt2.nml" io.init_from="'$scratch/real_gpt2'" io.run_dir="'$scratch/real_gpt2_run'"
ok $? "gpt2: attn.bias and attn.masked_bias buffers, gelu_pytorch_tanh, layer_norm_epsilon 1e-5, scaled attention load"
grep error "$scratch/last.out" | diag

# the sharded index (the first two were crashes: a use after free)
for kind in index_number index_slash index_dup index_missing index_unmapped index_big; do damaged $kind sharded; done
refused "a weight_map value that is a number" "is not a string, not the name of a file in the folder" llama \
    "$scratch/index_number"
refused "a weight_map value with a '/'" "is '../model-0000" \
    llama "$scratch/index_slash"
refused "weight_map naming a tensor twice" "weight_map names tensor 'lm_head.weight' twice" llama "$scratch/index_dup"
refused "weight_map names a tensor its file lacks" "which has no such tensor" llama "$scratch/index_missing"
refused "a shard holds a tensor weight_map does not name" "which the index's weight_map does not name" llama \
    "$scratch/index_unmapped"
refused "an index over 64 MiB is an error, not taken as absent" \
    "bytes; triad reads a config.json or an index up to 64 MiB" llama "$scratch/index_big"

# llm.c files: the exact size, and the reason for a short header
cp "$scratch/gpt2.bin" "$scratch/long.bin"
printf 'tail' >> "$scratch/long.bin" # 4 bytes past the tensors
refused "bytes after an llm.c checkpoint's tensors" "longer than its tensors (trailing bytes" gpt2 "$scratch/long.bin"
head -c 100 "$scratch/gpt2.bin" > "$scratch/tiny.bin"
refused "an llm.c file shorter than its header (no stale errno)" "100 bytes, shorter than the 1024-byte header" gpt2 \
    "$scratch/tiny.bin"
! grep -q "File exists\|Success" "$scratch/last.out"
ok $? "... and the message carries no unrelated errno text"
# a header no llm.c writer makes (its padded vocabulary below its vocabulary, a size of 0) is the
# file's fault, not a deck that differs from it; llm.c's files of before the padded vocabulary (versions
# 1 and 2) are named as such
header() { # header SRC DST SLOT VALUE: a copy of SRC with int32 SLOT of its header set to VALUE
    "$PYTHON3" -c 'import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
struct.pack_into("<i", b, 4 * int(sys.argv[3]), int(sys.argv[4]))
open(sys.argv[2], "wb").write(b)' "$@"
}
V=$("$PYTHON3" -c 'import struct, sys; print(struct.unpack_from("<i", open(sys.argv[1], "rb").read(), 12)[0])' \
    "$scratch/gpt2.bin")
header "$scratch/gpt2.bin" "$scratch/vp.bin" 7 $((V - 1))
refused "an llm.c header whose padded vocabulary is below its vocabulary" \
    "its header is damaged: padded_vocab_size (int32 7 of the header) is $((V - 1)), smaller than vocab_size" gpt2 \
    "$scratch/vp.bin"
! grep -q "set the deck's &model as the file's" "$scratch/last.out"
ok $? "... and not said to differ from the deck"
header "$scratch/gpt2.bin" "$scratch/c0.bin" 6 0
refused "an llm.c header of 0 channels" "its header is damaged: channels (int32 6 of the header) is 0" gpt2 \
    "$scratch/c0.bin"
header "$scratch/gpt2.bin" "$scratch/v1.bin" 1 1
refused "an llm.c checkpoint of version 1" "versions 1 and 2 are llm.c's files from before the padded vocabulary" \
    gpt2 "$scratch/v1.bin"

# triad export verifies the checksums before it writes anything
triad_run 1 "$scratch/llama.nml" train.steps=2 io.run_dir="'$scratch/t'"
ok $? "a llama checkpoint to export"
cp "$scratch/t/ckpt_2.h5" "$scratch/flipped.h5"
"$PYTHON3" - "$scratch/flipped.h5" << 'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    at = f["/model/h.1/fc_w"].id.get_offset() + 4 * 100 + 2
with open(sys.argv[1], "r+b") as f:
    f.seek(at)
    b = f.read(1)
    f.seek(at)
    f.write(bytes([b[0] ^ 0x10]))
PY
"$TRIAD" export "$scratch/flipped.h5" "$scratch/ex_flipped" > "$scratch/last.out" 2>&1
[ $? -eq 1 ] && grep -q "checksum mismatch in /model/h.1/fc_w" "$scratch/last.out" && [ ! -e "$scratch/ex_flipped" ]
ok $? "export of a checkpoint with a flipped byte in /model: status 1, the dataset named, no folder made"
grep error "$scratch/last.out" | diag
"$TRIAD" export "$scratch/t/ckpt_2.h5" "$scratch/ex_good" > "$scratch/last.out" 2>&1
ok $? "the undamaged checkpoint exports"
# a checkpoint whose stored deck (and its checksum) is another model's: the
# tensors' shapes disagree with it, wider and narrower
triad_run 1 "$scratch/llama.nml" train.steps=2 model.d_model=16 model.ffn_hidden=32 io.run_dir="'$scratch/t16'"
ok $? "a narrower llama checkpoint (d_model 16)"
"$PYTHON3" - "$scratch/t/ckpt_2.h5" "$scratch/t16/ckpt_2.h5" "$scratch/graft" << 'PY'
import shutil, sys, h5py
wide, narrow, out = sys.argv[1:]
for src, deck, name in ((wide, narrow, "wide"), (narrow, wide, "narrow")):
    shutil.copy(src, out + "_" + name + ".h5")
    with h5py.File(deck, "r") as d, h5py.File(out + "_" + name + ".h5", "r+") as f:
        for k in ("deck", "deck_checksum"):
            v = d.attrs[k]
            del f.attrs[k]
            f.attrs[k] = v
PY
"$TRIAD" export "$scratch/graft_wide.h5" "$scratch/ex_graft_wide" > "$scratch/last.out" 2>&1
[ $? -eq 1 ] && grep -q "dataset /model/wte has shape \[64, 32\], the checkpoint's deck says \[64, 16\]" \
    "$scratch/last.out" && [ ! -e "$scratch/ex_graft_wide" ]
ok $? "export of 32-wide tensors under a 16-wide deck: status 1, the shapes named, no folder made"
grep error "$scratch/last.out" | diag
"$TRIAD" export "$scratch/graft_narrow.h5" "$scratch/ex_graft_narrow" > "$scratch/last.out" 2>&1
[ $? -eq 1 ] && grep -q "dataset /model/wte has shape \[64, 16\], the checkpoint's deck says \[64, 32\]" \
    "$scratch/last.out" && [ ! -e "$scratch/ex_graft_narrow" ]
ok $? "... and 16-wide ones under a 32-wide deck"
grep error "$scratch/last.out" | diag

# a run's metrics.h5 given where a checkpoint goes: called a metrics file, not a damaged checkpoint
for cmd in export sample eval init_from; do
    case $cmd in
    export) "$TRIAD" export "$scratch/t/metrics.h5" "$scratch/ex_metrics" > "$scratch/last.out" 2>&1 ;;
    sample) "$TRIAD" sample "$scratch/t/metrics.h5" sample.prompt_tokens="'1 2'" > "$scratch/last.out" 2>&1 ;;
    eval) "$TRIAD" eval "$scratch/t/metrics.h5" data.val_path="'$scratch/none.bin'" > "$scratch/last.out" 2>&1 ;;
    init_from) triad_run 1 "$scratch/llama.nml" train.steps=1 io.init_from="'$scratch/t/metrics.h5'" \
        io.run_dir="'$scratch/from_metrics'" ;;
    esac
    [ $? -eq 1 ] && grep -q "metrics.h5 is a run's metrics file (metrics.h5: /metrics, /timers, ...), not a checkpoint" \
        "$scratch/last.out" && [ ! -e "$scratch/ex_metrics" ]
    ok $? "$cmd of a run's metrics.h5: status 1, called a metrics file, not a checkpoint"
done
grep error "$scratch/last.out" | diag
# a prompt file's length is its own, whatever the model keeps
$PYTHON3 -c "print(' '.join(['3'] * 100000))" > "$scratch/long.ids"
"$TRIAD" sample "$scratch/t/ckpt_2.h5" sample.prompt_tokens="'$scratch/long.ids'" > "$scratch/last.out" 2>&1
[ $? -eq 1 ] && grep -q "long.ids holds 100000 ids, more than the model's seq_len = 16" "$scratch/last.out"
ok $? "a 100000-id prompt file is called 100000 ids"
grep error "$scratch/last.out" | diag
done_testing
