#!/bin/sh
# llm.c's files (karpathy/llm.c) at the edges its own readers draw, written
# here from llm.c's source (train_gpt2.py's write_model, write_tokenizer;
# dev/data/data_common.py's write_datafile, write_evalfile), never by
# triad's writers:
#  * tools/make_tokens.py writes no shard llm.c's dataloader refuses: no
#    shard of 0 tokens (dataloader.h asserts ntok > 0), no --shard-tokens
#    past the int32 count of the header (data_common.py asserts < 2^31).
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

done_testing
