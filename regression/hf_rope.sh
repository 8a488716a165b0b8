#!/bin/sh
# Llama 3's rotary frequency remap (model.rope_scaling = 'llama3') in and
# out of Hugging Face folders made and read by the independent
# regression/hf_files.py: a LlamaForCausalLM folder whose config.json has
# Llama 3.1's rope_scaling block (rope_type 'llama3', or the older key
# "type") loads bit for bit with the deck that has its values; a deck with
# another factor, a deck without the remap, a folder without it for a
# deck with it, a block that lacks a key, and the types triad does not
# compute (yarn, linear) are each refused with the key named; trained,
# exported and read back, the folder carries the block, and imports again;
# a restart with another rope_factor is refused, the keys named.
. "$(dirname "$0")/lib.sh"

hf_decks # $H, $KL and $scratch/llama.nml (lib.sh)
block='"factor":8,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":16'
KR=$(echo "$KL" | sed 's/}$/,"rope_scaling":{"rope_type":"llama3",'"$block"'}}/')
rope="model.rope_scaling='llama3' model.rope_factor=8 model.rope_low_freq_factor=1 model.rope_high_freq_factor=4
model.rope_original_max_positions=16"

# folder NAME ROPE_SCALING_JSON: $scratch/NAME, $KL's llama with that rope_scaling
folder() {
    $H make llama "$scratch/$1" "$(echo "$KL" | sed 's/}$/,"rope_scaling":'"$2"'}/')"
}
# refused WHAT PATTERN SRC [overrides]: status 1 and the message (grep -F)
n=0
refused() {
    what=$1 pattern=$2 src=$3
    shift 3
    n=$((n + 1))
    triad_run 1 "$scratch/llama.nml" "$@" io.init_from="'$src'" io.run_dir="'$scratch/no$n'"
    st=$?
    [ $st -eq 1 ] && grep -q -F -e "$pattern" "$scratch/last.out"
    ok $? "$what"
    grep "error" "$scratch/last.out" | head -n 2 | diag
}

$H make llama "$scratch/hf_llama3" "$KR"
triad_run 1 "$scratch/llama.nml" $rope io.init_from="'$scratch/hf_llama3'" io.run_dir="'$scratch/in1'" &&
    $H check "$scratch/hf_llama3" "$scratch/in1/ckpt_0.h5" "$KR" > "$scratch/cmp" 2>&1
ok $? "a folder with rope_scaling {rope_type: llama3, factor 8, ...} loads with the deck's rope_scaling = 'llama3' and its keys"
diag < "$scratch/cmp"
folder hf_type '{"type":"llama3",'"$block"'}'
triad_run 1 "$scratch/llama.nml" $rope io.init_from="'$scratch/hf_type'" io.run_dir="'$scratch/in2'"
ok $? "... and with the older key \"type\": \"llama3\""
grep error "$scratch/last.out" | diag

refused "another rope_factor in the deck: the key and both values named" \
    "rope_factor = 4 in the deck, rope_scaling.factor = 8 in config.json; set the deck's &model as config.json's" \
    "$scratch/hf_llama3" $rope model.rope_factor=4
refused "another original context: named too" \
    "rope_original_max_positions = 8192 in the deck, rope_scaling.original_max_position_embeddings = 16 in config.json" \
    "$scratch/hf_llama3" $rope model.rope_original_max_positions=8192
refused "a deck without the remap: the keys to set" \
    "rope_scaling = 'none' in the deck, rope_type 'llama3' in config.json; set the deck's &model as config.json's: rope_scaling = 'llama3', rope_factor = 8, rope_low_freq_factor = 1, rope_high_freq_factor = 4, rope_original_max_positions = 16" \
    "$scratch/hf_llama3"
$H make llama "$scratch/hf_plain" "$KL"
refused "a folder without rope_scaling for a deck with it" \
    "rope_scaling = 'llama3' in the deck, no rope_scaling in config.json" "$scratch/hf_plain" $rope
folder hf_yarn '{"rope_type":"yarn","factor":4,"original_max_position_embeddings":16}'
refused "rope_type 'yarn': the type named and what triad computes" \
    "rope_scaling's rope_type is 'yarn'; triad's rotary embedding is unscaled (rope_scaling null, or rope_type 'default') or Llama 3's remap" \
    "$scratch/hf_yarn" $rope
folder hf_linear '{"type":"linear","factor":2}'
refused "type 'linear' (the older key)" "rope_scaling's rope_type is 'linear'" "$scratch/hf_linear"
folder hf_short '{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4}'
refused "a llama3 block without original_max_position_embeddings" \
    "rope_scaling of rope_type 'llama3' has no \"original_max_position_embeddings\"" "$scratch/hf_short" $rope
folder hf_string '{"rope_type":"llama3","factor":"8","low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":16}'
refused "a factor that is a string" "(rope_scaling): \"factor\" is a string \"8\"; it must be a number" \
    "$scratch/hf_string" $rope
folder hf_list '["llama3"]'
refused "rope_scaling that is not an object" "rope_scaling is not an object" "$scratch/hf_list"

# trained on tp 2 x pp 2, exported, read back independently, imported again
triad_run 4 "$scratch/llama.nml" $rope parallel.tp=2 parallel.pp=2 train.micro_batch_size=2 train.steps=4 \
    io.init_from="'$scratch/hf_llama3'" io.run_dir="'$scratch/t'" &&
    "$TRIAD" export "$scratch/t/ckpt_4.h5" "$scratch/ex" > "$scratch/last.out" 2>&1 &&
    $H check "$scratch/ex" "$scratch/t/ckpt_4.h5" "$KR" > "$scratch/cmp" 2>&1
ok $? "4 steps on tp 2 x pp 2, exported: config.json's rope_scaling is the source's block, every tensor read back"
diag < "$scratch/cmp"
triad_run 1 "$scratch/llama.nml" $rope io.init_from="'$scratch/ex'" io.run_dir="'$scratch/in3'" &&
    $H check "$scratch/ex" "$scratch/in3/ckpt_0.h5" "$KR" > "$scratch/cmp" 2>&1
ok $? "the exported folder imports again with the same deck, bit for bit"
diag < "$scratch/cmp"
triad_run 1 "$scratch/llama.nml" train.steps=1 io.run_dir="'$scratch/tp'" &&
    "$TRIAD" export "$scratch/tp/ckpt_1.h5" "$scratch/ex_plain" > "$scratch/last.out" 2>&1 &&
    $H check "$scratch/ex_plain" "$scratch/tp/ckpt_1.h5" "$KL" > "$scratch/cmp" 2>&1
ok $? "a deck without the remap exports rope_scaling null (read back independently)"
diag < "$scratch/cmp"

# a restart continues the same model: another rope_factor is refused
triad_run 1 "$scratch/llama.nml" $rope train.steps=2 io.run_dir="'$scratch/t'" io.restart=auto model.rope_factor=4
[ $? -eq 1 ] && grep -q -F "rope_factor = 4 here, 8 in the checkpoint" "$scratch/last.out"
ok $? "restart with another rope_factor: refused, the key named"
grep error "$scratch/last.out" | head -n 2 | diag
triad_run 1 "$scratch/llama.nml" train.steps=2 io.run_dir="'$scratch/t'" io.restart=auto
[ $? -eq 1 ] && grep -q -F "rope_scaling = 'none' here, 'llama3' in the checkpoint" "$scratch/last.out"
ok $? "restart without the remap: refused"
grep error "$scratch/last.out" | head -n 2 | diag
triad_run 1 "$scratch/llama.nml" $rope train.steps=6 io.run_dir="'$scratch/t'" io.restart=auto
ok $? "restart with the same keys continues"
grep error "$scratch/last.out" | head -n 2 | diag
done_testing
