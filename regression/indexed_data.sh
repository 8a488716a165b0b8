#!/bin/sh
# Megatron-LM's indexed datasets (data.kind = 'indexed'), written by an
# independent implementation of the format (regression/megatron_files.py):
# every integer dtype reads; the same tokens as llm.c shards train to the same
# losses bit for bit, a vocabulary over 65,536 included (i32 ids of Llama 3's
# tokenizer when it is installed, else ids made up); and a damaged or
# mismatched dataset is refused before step 1, naming the file and what is
# wrong.
. "$(dirname "$0")/lib.sh"

M="$PYTHON3 $top_srcdir/regression/megatron_files.py"
cat > "$scratch/deck.nml" << EOF2
&model
  arch = 'llama', n_layer = 2, n_head = 2, n_kv_head = 1, d_model = 32, ffn_hidden = 64, seq_len = 32
  vocab_size = 128256
/
&train
  steps = 6, batch_size = 4, micro_batch_size = 2, lr = 3e-3, warmup_steps = 1, peak_gflops = 100.0
/
EOF2
# the ids: real Llama 3 ids of a text if the tokenizer is there, else ids past 65,536 made up
T=$LLAMA3_TOKENIZER
cp /usr/share/common-licenses/GPL-3 "$scratch/gpl.txt"
if [ -f "$T" ]; then
    "$TRIAD" tokenize tokenize.tokenizer="$T" tokenize.input="'$scratch/gpl.txt'" tokenize.print=ids > "$scratch/ids"
    what="Llama 3's ids of the GPL"
    "$TRIAD" tokenize tokenize.tokenizer="$T" tokenize.input="'$scratch/gpl.txt'" tokenize.output="$scratch/sh/g" \
        > /dev/null 2>&1
else
    "$PYTHON3" -c "import random; r = random.Random(1); print(' '.join(str(r.randrange(128256)) for _ in range(3000)))" \
        > "$scratch/ids"
    what="3000 ids below 128256"
    "$PYTHON3" - "$scratch/ids" "$scratch/sh" << 'PY'
import os, struct, sys
ids = [128000] + [int(x) for x in open(sys.argv[1]).read().split()]
os.makedirs(sys.argv[2], exist_ok=True)
open(sys.argv[2] + "/g_train_000000.bin", "wb").write(struct.pack("<256i", 20240801, 7, len(ids), *[0] * 253) +
                                                      struct.pack("<%dI" % len(ids), *ids))
PY
fi
$M write "$scratch/ds" i32 "$scratch/ids" 128000
triad_run 1 "$scratch/deck.nml" data.kind="'tokens'" data.path="'$scratch/sh/g_*.bin'" io.run_dir="'$scratch/a'"
ok $? "llm.c uint32 shards of $what train"
triad_run 1 "$scratch/deck.nml" data.kind="'indexed'" data.path="'$scratch/ds'" io.run_dir="'$scratch/b'"
ok $? "the same ids as an i32 indexed dataset train"
grep -q "indexed: 1 dataset" "$scratch/last.out"
ok $? "... described as an indexed dataset"
compare_runs "$scratch/a" "$scratch/b" 0 > "$scratch/cmp" 2>&1
ok $? "... to the same losses, bit for bit: $(tail -n 1 "$scratch/cmp")"
triad_run 1 "$scratch/deck.nml" data.kind="'indexed'" data.path="'$scratch/ds.idx'" io.run_dir="'$scratch/c'" \
    data.val_path="'$scratch/ds.bin'" train.eval_every=3
ok $? "PREFIX.idx or PREFIX.bin name the dataset too; val_path takes an indexed dataset"

# every integer dtype (small ids)
"$PYTHON3" -c "
for d in range(20): print(' '.join(str((7 * d + 3 * k) % 100) for k in range(40)))" > "$scratch/small"
for dt in u8 i8 i16 i32 i64 u16; do
    $M write "$scratch/s_$dt" $dt "$scratch/small"
    triad_run 1 "$scratch/deck.nml" model.vocab_size=100 data.kind="'indexed'" data.path="'$scratch/s_$dt'" \
        io.run_dir="'$scratch/r_$dt'" train.steps=2
    ok $? "dtype $dt reads"
done
st=0
for dt in i8 i16 i32 i64 u16; do compare_runs "$scratch/r_u8" "$scratch/r_$dt" 0 > /dev/null 2>&1 || st=1; done
ok $st "... the same tokens in every dtype, the same losses"

# refused before step 1
refused() { # refused WHAT KIND PATTERN
    rm -f "$scratch/x.idx" "$scratch/x.bin"
    $M write "$scratch/x" i32 "$scratch/small"
    $M damage "$2" "$scratch/x"
    triad_run 1 "$scratch/deck.nml" model.vocab_size=100 data.kind="'indexed'" data.path="'$scratch/x'" \
        io.run_dir="'$scratch/bad_$2'"
    st=$?
    [ $st -eq 1 ] && grep -q -F -e "$3" "$scratch/last.out" && ! grep -q "^step " "$scratch/last.out"
    ok $? "$1"
    grep "error" "$scratch/last.out" | head -n 1 | diag
}
refused "a wrong magic" magic "x.idx' does not begin with MMIDIDX"
refused "another version" version "x.idx' is version 2 of the format"
refused "a float dtype" dtype "x.idx' has dtype code 7 (f32)"
refused "offsets that do not follow the lengths" offsets "x.idx' sequence 1 has length 40 at byte 156"
refused "a document index that does not end at the sequences" docs "document index 20 is 23"
refused "a truncated .bin" short_bin "x.bin' is 3196 bytes; its index"
refused "a .bin of another dataset (longer)" long_bin "x.bin' is 3208 bytes; its index"
refused "a negative id" negative "is -5, not in 0 .. vocab_size - 1 = 99"
$M write "$scratch/big" i32 "$scratch/ids" 128000
triad_run 1 "$scratch/deck.nml" model.vocab_size=50000 data.kind="'indexed'" data.path="'$scratch/big'" \
    io.run_dir="'$scratch/bad_v'"
[ $? -eq 1 ] && grep -q "not in 0 .. vocab_size - 1 = 49999" "$scratch/last.out" && grep -q "raise vocab_size" "$scratch/last.out"
ok $? "an id past vocab_size: the id, and the vocab_size needed"
triad_run 1 "$scratch/deck.nml" data.kind="'indexed'" data.path="'$scratch/nothing'" io.run_dir="'$scratch/bad_n'"
[ $? -eq 1 ] && grep -q "no file matches data.path" "$scratch/last.out"
ok $? "a prefix without files"
done_testing
