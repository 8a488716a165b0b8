#!/bin/sh
# sample_bench.sh -- `triad sample`'s rates side by side in one run
# (docs/sample.md): the llama small config (bench/llama_small.nml, L=4
# C=256 T=256, here with the byte vocabulary) after one step, 32 prompts of
# 96 to 127 bytes, 64 new tokens each, on one rank with OMP_NUM_THREADS
# threads (default 2):
#   batch 32   every prompt in one batch (the prefill in forwards of 256 rows)
#   batch 1    one prompt at a time (a forward of one prompt, decode steps of one row)
# and the same batch of 32 on 2 ranks, dp 2 and tp 2, one thread each.
# Printed: prefill and decode tokens/s of each (the median of REPS runs,
# default 3, the configurations alternating), then batched over one at a
# time (decode) and the prefill's rate over one-at-a-time decoding's (what
# feeding a prompt a token at a time would cost).
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
REPS=${REPS:-3}
THREADS=${OMP_NUM_THREADS:-2}
MPIRUN="mpirun --oversubscribe --bind-to none"
dir=$(mktemp -d "${TMPDIR:-/tmp}/sample_bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
$MPIRUN -n 1 -x OMP_NUM_THREADS="$THREADS" ./triad bench/llama_small.nml model.vocab_size=256 train.steps=1 \
    io.save_final=.true. io.run_dir="'$dir/run'" > "$dir/train.log" 2>&1 || { cat "$dir/train.log"; exit 1; }
awk 'BEGIN { for (i = 0; i < 32; i++) { n = 96 + (i * 13) % 32; s = "";
             for (j = 0; j < n; j++) s = s sprintf("%c", 97 + (i * 7 + j * 3) % 26); print s } }' > "$dir/prompts.txt"
ck="$dir/run/ckpt_1.h5"
args="sample.prompt_file=$dir/prompts.txt sample.max_new_tokens=64 sample.temperature=0.8 sample.top_k=40"

# one NAME NP THREADS ARGS...: the rates line of one run appended to $dir/NAME
one() {
    name=$1 np=$2 th=$3
    shift 3
    $MPIRUN -n "$np" -x OMP_NUM_THREADS="$th" ./triad sample "$ck" $args "$@" > /dev/null 2> "$dir/err" ||
        { cat "$dir/err"; exit 1; }
    grep "tokens/s" "$dir/err" >> "$dir/$name"
}
for r in $(seq "$REPS"); do
    one b32 1 "$THREADS"
    one b1 1 "$THREADS" sample.batch_size=1
    one dp2 2 1 parallel.dp=2
    one tp2 2 1 parallel.tp=2
done
echo "sample_bench: llama small (L=4 C=256 T=256, bytes), 32 prompts of 96-127 bytes, 64 new tokens each; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf '%-34s %16s %16s\n' configuration "prefill tok/s" "decode tok/s"
rate() { sed -n "s/.*($1) \([0-9.]*\) tokens\/s.*/\1/p"; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for c in "b32:batch 32, 1 rank x $THREADS threads" "b1:batch 1, 1 rank x $THREADS threads" \
    "dp2:batch 16 x dp 2, 1 thread each" "tp2:batch 32, tp 2, 1 thread each"; do
    name=${c%%:*}
    pre=$(sed 's/decode.*//' "$dir/$name" | sed -n 's/.*(\([0-9.]*\) tokens\/s).*/\1/p' | median)
    dec=$(sed -n 's/.*decode.*(\([0-9.]*\) tokens\/s)$/\1/p' "$dir/$name" | median)
    eval "pre_$name=$pre dec_$name=$dec"
    printf '%-34s %16s %16s\n' "${c#*:}" "$pre" "$dec"
done
awk -v a="$dec_b32" -v b="$dec_b1" -v p="$pre_b32" 'BEGIN {
    printf "decode, batch 32 over batch 1: %.1fx; prefill (batch 32) over decoding a token at a time (batch 1): %.1fx\n", a / b, p / b }'
