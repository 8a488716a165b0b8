#!/bin/sh
# Consistency diagnostics: replicas and replicated tensors are checked every
# N steps; a perturbed parameter on one rank stops the run naming the tensor
# and the rank.
. "$(dirname "$0")/lib.sh"

triad_run 4 "$DECKS/tiny.nml" train.steps=6 parallel.tp=2 diag.check_every=2 io.run_dir="'$scratch/ok'"
ok $? "tp = 2 x dp = 2 with checks every 2 steps runs"
n=$(grep -c "consistency at step .*: 2 data-parallel replica(s) bitwise identical, replicated tensors agree across 2 tp" "$scratch/last.out")
[ "$n" -eq 3 ]
ok $? "checked at steps 2, 4 and 6 (found $n reports)"

triad_run 4 "$DECKS/tiny.nml" train.steps=6 diag.check_every=1 diag.corrupt_rank=2 io.run_dir="'$scratch/dp'"
st=$?
[ $st -eq 1 ] && grep -q "error: data-parallel replicas diverged at step 1: tensor ln1_w on world rank 2 (dp rank 2 of its group) differs from dp rank 0 (world rank 0)" "$scratch/last.out"
ok $? "dp = 4: a parameter perturbed on rank 2 is reported with the tensor and the rank, status 1"
[ $st -eq 1 ] || diag < "$scratch/last.out"
[ "$(grep -c 'error: data-parallel' "$scratch/last.out")" -eq 1 ] && grep -q "local grad norm" "$scratch/last.out" && grep -q "hint:" "$scratch/last.out"
ok $? "the message prints once, with the per-rank table (seeds, gradient norm, hash) and a hint"
# each rank's share of the last step's gradient norm: not zero (the update
# clears the gradients themselves as it reads them)
norms=$(sed -n '/local grad norm/,/hint:/p' "$scratch/last.out" | awk 'NF == 9 && $1 ~ /^[0-9]+$/ {print $8}')
[ "$(echo "$norms" | wc -w)" -eq 4 ] && ! echo "$norms" | grep -qv '^[1-9]\.[0-9]*e[-+][0-9]*$'
ok $? "the table's gradient norms are each rank's share of the step's gradient, not zero ($(echo $norms))"

triad_run 2 "$DECKS/tiny.nml" train.steps=6 parallel.tp=2 diag.check_every=1 diag.corrupt_rank=1 io.run_dir="'$scratch/tp'"
st=$?
[ $st -eq 1 ] && grep -q "replicated tensor ln1_w disagrees across tensor-parallel ranks at step 1: world rank 1 (tp rank 1)" "$scratch/last.out"
ok $? "tp = 2: a replicated LayerNorm weight perturbed on one tp rank is reported"

triad_run 2 "$DECKS/tiny.nml" train.steps=6 diag.corrupt_rank=1 io.run_dir="'$scratch/end'"
[ $? -eq 1 ] && grep -q "diverged at step 6" "$scratch/last.out"
ok $? "without periodic checks the end-of-run check still catches it"
done_testing
