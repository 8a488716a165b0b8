#!/bin/sh
# What triad's subcommands write when writing fails or a signal comes: no
# silent status 0 over a partial output, nothing of another file lost, no
# partial output left looking complete.
#  1. eval.scores: a file there that is not a scores file of triad eval (the
#     checkpoint being judged, a task file) is refused and left byte for
#     byte; an earlier scores file is replaced; on a full disk (a small
#     tmpfs) the earlier file is kept, nothing of the new one left, the
#     reason named; in a missing folder, the reason named; /dev/stdout, a
#     FIFO and an empty file take them; an eval killed outright (SIGKILL)
#     leaves nothing that blocks the next.
#  2. stdout that takes nothing (/dev/full): triad sample (one prompt
#     streamed, and a file of prompts), triad eval, triad tokenize's
#     tokenize.print, triad plan and --version end with status 1 and say so.
#  3. A signal (SIGTERM to the process this test started): triad tokenize
#     stops at its next document with status 3, every shard it wrote and the
#     folders it made removed; triad eval stops at its next batch with
#     status 3 and no eval.scores; triad sample ends at once (SIGTERM's
#     default, status 143).
#  4. triad export into folders it makes on a full disk: the folders are
#     removed again with its files (mkdir -p's as well as the last).
# The tmpfs cases are skipped where one cannot be mounted.
. "$(dirname "$0")/lib.sh"

corpus="$top_srcdir/regression/cases/data/corpus.txt"
cat > "$scratch/bytes.nml" << EOF
&model
  n_layer = 2, n_head = 4, d_model = 32, seq_len = 64, vocab_size = 256
/
&train
  steps = 2, batch_size = 4, warmup_steps = 0
/
&data
  kind = 'text', path = '$corpus'
/
&io
  run_dir = '$scratch/run'
/
EOF
triad_run 1 "$scratch/bytes.nml"
ok $? "a byte-level checkpoint to judge"
ckpt="$scratch/run/ckpt_2.h5"
task='{"context": "The cat sat on the", "choices": [" mat.", " moon.", " sofa", " dog"], "label": 0}'
echo "$task" > "$scratch/task.jsonl"
for i in $(seq 400); do echo "$task"; done > "$scratch/big.jsonl"

# 1. eval.scores
cp "$ckpt" "$scratch/judged.h5"
sum=$(cksum < "$scratch/judged.h5")
"$TRIAD" eval "$scratch/judged.h5" eval.tasks="'$scratch/task.jsonl'" eval.scores="'$scratch/judged.h5'" \
    > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "eval.scores = '.*judged.h5' exists and is not a scores file of triad eval" "$scratch/out" &&
    [ "$(cksum < "$scratch/judged.h5")" = "$sum" ]
ok $? "eval.scores naming the checkpoint it judges: status 1, the checkpoint left byte for byte"
grep error "$scratch/out" | diag
cp "$scratch/task.jsonl" "$scratch/task_copy.jsonl"
"$TRIAD" eval "$ckpt" eval.tasks="'$scratch/task_copy.jsonl'" eval.scores="'$scratch/task_copy.jsonl'" \
    > "$scratch/out" 2>&1
[ $? -eq 1 ] && cmp -s "$scratch/task.jsonl" "$scratch/task_copy.jsonl"
ok $? "eval.scores naming its own task file: status 1, the task file left as it was"
"$TRIAD" eval "$ckpt" eval.tasks="'$scratch/task.jsonl'" eval.scores="'$scratch/s.tsv'" > "$scratch/out" 2>&1 &&
    "$TRIAD" eval "$ckpt" eval.tasks="'$scratch/big.jsonl'" eval.scores="'$scratch/s.tsv'" > "$scratch/out" 2>&1 &&
    [ "$(wc -l < "$scratch/s.tsv")" -eq 1601 ] && [ ! -e "$scratch/s.tsv.tmp" ]
ok $? "an earlier scores file is replaced by the next eval's (1 + 400 x 4 lines), no temporary left"
"$TRIAD" eval "$ckpt" eval.tasks="'$scratch/task.jsonl'" eval.scores=/dev/stdout > "$scratch/out" 2>&1 &&
    grep -q "^# task	example" "$scratch/out" && [ "$(grep -c "^task	0	" "$scratch/out")" -eq 4 ]
ok $? "eval.scores = /dev/stdout: the scores on stdout"
mkfifo "$scratch/fifo"
cat "$scratch/fifo" > "$scratch/from_fifo" &
reader=$!
"$TRIAD" eval "$ckpt" eval.tasks="'$scratch/task.jsonl'" eval.scores="'$scratch/fifo'" > "$scratch/out" 2>&1
st=$?
wait $reader
[ $st -eq 0 ] && [ "$(wc -l < "$scratch/from_fifo")" -eq 5 ]
ok $? "eval.scores a FIFO: the scores through it"
: > "$scratch/empty.tsv"
"$TRIAD" eval "$ckpt" eval.tasks="'$scratch/task.jsonl'" eval.scores="'$scratch/empty.tsv'" > "$scratch/out" 2>&1 &&
    [ "$(wc -l < "$scratch/empty.tsv")" -eq 5 ]
ok $? "eval.scores an empty file (mktemp's): taken"
"$TRIAD" eval "$ckpt" eval.tasks="'$scratch/task.jsonl'" eval.scores="'$scratch/none/s.tsv'" > "$scratch/out" 2>&1
[ $? -eq 1 ] && grep -q "cannot write eval.scores = '.*none/s.tsv': the folder .*none takes no files (it does not exist)" \
    "$scratch/out"
ok $? "eval.scores in a missing folder: status 1, the reason named"
mnt="$scratch/small"
mkdir -p "$mnt"
mounted=0
if mount -t tmpfs -o size=16k tmpfs "$mnt" 2> "$scratch/mount.err"; then
    mounted=1
    trap 'umount "$mnt" 2> /dev/null; rm -rf "$scratch"' EXIT
fi
if [ $mounted -eq 1 ]; then
    head -n 3 "$scratch/s.tsv" > "$mnt/scores.tsv"
    cp "$mnt/scores.tsv" "$scratch/earlier.tsv"
    "$TRIAD" eval "$ckpt" eval.tasks="'$scratch/big.jsonl'" eval.scores="'$mnt/scores.tsv'" > "$scratch/out" 2>&1
    [ $? -eq 1 ] && grep -q "writing eval.scores = '.*scores.tsv' failed (No space left on device)" "$scratch/out" &&
        cmp -s "$mnt/scores.tsv" "$scratch/earlier.tsv" && [ "$(ls "$mnt")" = scores.tsv ]
    ok $? "eval.scores on a full disk: status 1, the reason named, the earlier file kept, nothing of the new one left"
    grep error "$scratch/out" | diag
    umount "$mnt"
else
    skip "cannot mount a tmpfs to fill ($(head -n 1 "$scratch/mount.err"))"
fi

# 2. stdout that takes nothing
full() { # full WHAT ARGS...: triad ARGS > /dev/full: status 1 and the error
    what=$1
    shift
    "$TRIAD" "$@" > /dev/full 2> "$scratch/err"
    [ $? -eq 1 ] && grep -q "could not all be written to stdout (No space left on device\|could not all be written to stdout (a write failed" "$scratch/err"
    ok $? "$what > /dev/full: status 1, said"
    grep error "$scratch/err" | diag
}
full "triad sample, one prompt streamed" sample "$ckpt" sample.prompt="'The cat'" sample.max_new_tokens=20
for i in $(seq 300); do echo "The cat sat"; done > "$scratch/prompts.txt"
full "triad sample, 300 prompts" sample "$ckpt" sample.prompt_file="'$scratch/prompts.txt'" sample.max_new_tokens=20
full "triad eval" eval "$ckpt" eval.tasks="'$scratch/task.jsonl'"
full "triad plan" plan "$scratch/bytes.nml"
full "triad --version" --version
if [ -f "$LLAMA3_TOKENIZER" ]; then
    full "triad tokenize, tokenize.print = ids" tokenize tokenize.tokenizer="'$LLAMA3_TOKENIZER'" \
        tokenize.input="'$corpus'" tokenize.print=ids
else
    skip "Llama 3's tokenizer.json is not installed at $LLAMA3_TOKENIZER"
fi

# 3. signals: SIGTERM to the process started here, once it is under way
# (OUT has a line matching PATTERN); its status
term_when() {
    out=$1 pattern=$2
    shift 2
    "$TRIAD" "$@" > "$out" 2>&1 &
    pid=$!
    for i in $(seq 1 600); do grep -q "$pattern" "$out" 2> /dev/null && break; sleep 0.05; done
    kill -TERM $pid
    wait $pid
}
# term_in OUT DIR ARGS...: the same, once DIR holds a file (the first shard: the run is well under way)
term_in() {
    out=$1 dir=$2
    shift 2
    "$TRIAD" "$@" > "$out" 2>&1 &
    pid=$!
    for i in $(seq 1 600); do [ -n "$(ls "$dir" 2> /dev/null)" ] && break; sleep 0.05; done
    kill -TERM $pid
    wait $pid
}
if [ -f "$LLAMA3_TOKENIZER" ]; then
    "$PYTHON3" - "$scratch/docs.txt" << 'PY'
import random, sys
random.seed(1)
w = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod".split()
with open(sys.argv[1], "w") as f:
    for i in range(400000):
        f.write(" ".join(random.choice(w) for _ in range(20)) + "\n===\n")
PY
    term_in "$scratch/tok.out" "$scratch/made/deeper" tokenize tokenize.tokenizer="'$LLAMA3_TOKENIZER'" \
        tokenize.input="'$scratch/docs.txt'" tokenize.separator="'==='" tokenize.shard_tokens=10000 \
        tokenize.output="'$scratch/made/deeper/a'"
    st=$?
    [ $st -eq 3 ] && grep -q "stopped by signal 15 after .* documents: the shards written so far are removed" \
        "$scratch/tok.out" && [ ! -e "$scratch/made" ]
    ok $? "triad tokenize stopped by SIGTERM: status 3 (got $st), no shard left, the folders it made removed"
    grep error "$scratch/tok.out" | diag
    # a prefix through '..': the folder it made (new) removed, the one that was there (kept) kept
    mkdir -p "$scratch/kept"
    printf '%s\n' '{"text": "one"}' '{"text": ' > "$scratch/broken.jsonl"
    "$TRIAD" tokenize tokenize.tokenizer="'$LLAMA3_TOKENIZER'" tokenize.input="'$scratch/broken.jsonl'" \
        tokenize.format=jsonl tokenize.output="'$scratch/new/../kept/a'" > "$scratch/out" 2>&1
    [ $? -eq 1 ] && [ -d "$scratch/kept" ] && [ ! -e "$scratch/new" ]
    ok $? "an error with tokenize.output = 'new/../kept/a': 'new' (made) removed, 'kept' (there before) kept"
else
    skip "Llama 3's tokenizer.json is not installed at $LLAMA3_TOKENIZER"
fi
for i in $(seq 20000); do echo "$task"; done > "$scratch/huge.jsonl"
term_when "$scratch/eval.out" "read task" eval "$ckpt" eval.tasks="'$scratch/huge.jsonl'" \
    eval.scores="'$scratch/stopped.tsv'"
st=$?
[ $st -eq 3 ] && grep -q "triad eval: stopped by signal 15 before the end" "$scratch/eval.out" &&
    [ -z "$(ls "$scratch" | grep stopped.tsv)" ]
ok $? "triad eval stopped by SIGTERM: status 3 (got $st), no eval.scores and no temporary left"
# an eval killed outright (SIGKILL, Slurm's after its grace period) leaves nothing that blocks the next
"$TRIAD" eval "$ckpt" eval.tasks="'$scratch/huge.jsonl'" eval.scores="'$scratch/killed.tsv'" > "$scratch/eval.out" 2>&1 &
pid=$!
for i in $(seq 1 600); do grep -q "read task" "$scratch/eval.out" 2> /dev/null && break; sleep 0.05; done
kill -KILL $pid
wait $pid
"$TRIAD" eval "$ckpt" eval.tasks="'$scratch/task.jsonl'" eval.scores="'$scratch/killed.tsv'" > "$scratch/out" 2>&1 &&
    [ "$(wc -l < "$scratch/killed.tsv")" -eq 5 ] && [ -z "$(ls "$scratch" | grep 'killed.tsv.')" ]
ok $? "after an eval killed by SIGKILL the next one writes the same eval.scores, no temporary left by either"
for i in $(seq 100000); do echo "The cat sat"; done > "$scratch/many.txt"
term_when "$scratch/sample.out" "." sample "$ckpt" sample.prompt_file="'$scratch/many.txt'" sample.max_new_tokens=40
st=$?
[ $st -eq 143 ]
ok $? "triad sample ended by SIGTERM at once (status 143, got $st)"

# 4. export on a full disk into folders it makes
if [ $mounted -eq 1 ] && mount -t tmpfs -o size=64k tmpfs "$mnt" 2> /dev/null; then
    "$TRIAD" export "$ckpt" "$mnt/a/b/c" > "$scratch/out" 2>&1
    [ $? -eq 1 ] && grep -q "No space left on device" "$scratch/out" && [ -z "$(ls "$mnt")" ]
    ok $? "triad export on a full disk: status 1, nothing left, neither its files nor the folders a/b/c it made"
    grep error "$scratch/out" | diag
    umount "$mnt"
else
    skip "cannot mount a tmpfs to fill"
fi
done_testing
