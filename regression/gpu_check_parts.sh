#!/bin/sh
# gpu_check_parts.sh -- the parts of tools/gpu_check.sh that need no GPU,
# run here so that the script, which runs only on a lent GPU machine, is not
# first tried there: it parses (dash, else sh) with set -u; every spec of its
# precision loop expands under set -u (a spec of two words once ended the
# script); bench_report reads the rate triad's own MFU column is against
# from the run's peak line.
. "$(dirname "$0")/lib.sh"
gc="$top_srcdir/tools/gpu_check.sh"
sh_=$(command -v dash || echo sh) # (the strictest POSIX shell at hand: Debian's /bin/sh is dash)

$sh_ -n "$gc" 2> "$scratch/n.err"
ok $? "tools/gpu_check.sh parses ($sh_ -n)"
diag < "$scratch/n.err"

# the precision loop's specs, each expanded as the loop expands it
specs=$(sed -n 's/^for spec in \(".*"\); do$/\1/p' "$gc")
[ -n "$specs" ] && eval "set -- $specs" && for spec; do
    $sh_ -c 'set -u; set -- $1; p=$1; : "$2" ${3:-}' - "$spec" || exit 1
done && ! sed -n '/^for spec in /,/^done/p' "$gc" | grep -q '[^{]\$3'
ok $? "gpu_check.sh's precision loop: every spec ($specs) expands under set -u, no bare \$3"

triad_run 1 "$DECKS/tiny.nml" train.steps=8 io.run_dir="'$scratch/br'"
ok $? "a CPU run's log to report on"
sed -n '/^bench_report() {/,/^}/p' "$gc" > "$scratch/bench_report.sh"
rate=$(sed -n 's/^peak (rank 0): [a-z ]*\([0-9.]*\) GFLOP\/s.*/\1/p' "$scratch/last.out")
out=$(BB=8 BT=16 sh -c ". '$scratch/bench_report.sh'; bench_report '$scratch/last.out' 1000" 2>&1)
echo "$out" | diag
[ -n "$rate" ] && echo "$out" | grep -q "of the rate it names on its peak line, $(printf '%.0f' "$rate") GFLOP/s"
ok $? "bench_report names the rate of the peak line ($rate GFLOP/s), the one triad's MFU column is against"
done_testing
