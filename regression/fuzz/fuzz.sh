#!/bin/sh
# The fuzzing harness over every reader of outside files (docs/regression.md):
# the crashes found before replayed, then FUZZ_INPUTS (default 1000) mutated
# inputs per reader (a fifth of that for checkpoints, which take longer), under AddressSanitizer and UndefinedBehaviorSanitizer.
# Each input must give a result or a clear error.  A long run for a
# session's end:
#   FUZZ_INPUTS=100000 FUZZ_SEED=7 FUZZ_KEEP=1 regression/fuzz/fuzz.sh
# (FUZZ_KEEP: an input that crashes a reader is copied into
# regression/fuzz/crashes/<reader>/, to be kept as a regression input).
. "$(dirname "$0")/../lib.sh"

F="$top_builddir/regression/fuzz/fuzz_readers"
if [ ! -x "$F" ]; then
    echo "Bail out! $F is not built: run \`make check\` (or \`make regression/fuzz/fuzz_readers\`) first"
    exit 1
fi
here="$top_srcdir/regression/fuzz"
inputs=${FUZZ_INPUTS:-1000}
seed=${FUZZ_SEED:-1}
# No leak check: Open MPI's components, loaded and unloaded at run time,
# leave allocations that LeakSanitizer cannot attribute to a library.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for target in deck config config_moe safetensors safetensors_gpt2 index llmc shard ckpt tokenizer tokenizer_sp indexed schedule schedule_zb \
    mc_llmc mc_jsonl generation; do
    mkdir -p "$scratch/$target"
    replay=$(ls "$here/crashes/$target/"* 2> /dev/null)
    n=$inputs
    [ $target = ckpt ] && n=$((inputs / 5))
    # a hang's guard, not a time limit: 10 minutes and 100 ms an input (a
    # checkpoint input took 30-40 ms on a loaded 2-core Zen 4)
    limit=$((600 + n / 10))
    # shellcheck disable=SC2086
    timeout $limit "$F" -n "$n" -s "$seed" "$here/corpus" "$scratch/$target" "$target" $replay \
        > "$scratch/$target.out" 2>&1
    st=$?
    if [ $st -eq 124 ]; then # (the input in hand is kept: a hang is a defect like a crash)
        echo "$target still running after $limit s ($(wc -l < "$scratch/$target.out") lines of output): a hang, or a machine" \
            "too slow for $n inputs (replay the input kept below alone to tell)" > "$scratch/$target.out"
    fi
    ok $st "$target: $(grep -E "^$target " "$scratch/$target.out" | sed "s/^$target *//")"
    if [ $st -ne 0 ]; then
        tail -n 40 "$scratch/$target.out" | diag
        # a crash leaves its input as <target>.input; a bad message, as <target>.input.badN
        bad=$(ls "$scratch/$target/$target".input.bad* 2> /dev/null)
        [ -n "$bad" ] || bad="$scratch/$target/$target.input"
        for f in $bad; do
            [ -f "$f" ] || continue
            echo "the input: $f" | diag
            if [ -n "${FUZZ_KEEP:-}" ]; then
                mkdir -p "$here/crashes/$target"
                cp "$f" "$here/crashes/$target/seed$seed-$(basename "$f")-$(date +%s)"
                echo "kept in $here/crashes/$target/" | diag
            fi
        done
    fi
done
done_testing
