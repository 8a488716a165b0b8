#!/bin/sh
# llm.c's files (karpathy/llm.c) at the edges its own readers draw, written
# here from llm.c's source (train_gpt2.py's write_model, write_tokenizer;
# dev/data/data_common.py's write_datafile, write_evalfile), never by
# triad's writers:
#  * tools/make_tokens.py writes no shard llm.c's dataloader refuses: no
#    shard of 0 tokens (dataloader.h asserts ntok > 0), no --shard-tokens
#    past the int32 count of the header (data_common.py asserts < 2^31)
#    and no traceback for one.
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

done_testing
