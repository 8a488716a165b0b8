#!/bin/sh
# Data parallelism: dp = 2 and 4 reproduce dp = 1 with the same global batch.
. "$(dirname "$0")/lib.sh"

common="train.steps=25 train.batch_size=8 train.micro_batch_size=2"
triad_run 1 "$DECKS/tiny.nml" $common io.run_dir="'$scratch/dp1'"
ok $? "dp = 1 (4 micro-batches) runs"
for dp in 2 4; do
    triad_run $dp "$DECKS/tiny.nml" $common io.run_dir="'$scratch/dp$dp'" io.save_final=.true.
    st=$?
    ok $st "dp = $dp runs"
    [ $st -eq 0 ] || diag < "$scratch/last.out"
    grep -q "$dp data-parallel replica(s) bitwise identical" "$scratch/last.out"
    ok $? "dp = $dp: replicas end bitwise identical"
    compare_runs "$scratch/dp$dp" "$scratch/dp1" 1e-5 loss grad_norm | diag
    compare_runs "$scratch/dp$dp" "$scratch/dp1" 1e-5 loss grad_norm > /dev/null
    ok $? "dp = $dp: per-step loss and grad norm within 1e-5 relative of dp = 1 over 25 steps"
done
# dp = 3 with one sequence per micro-batch (batch 6): still the same global batch
triad_run 1 "$DECKS/tiny.nml" train.steps=10 train.batch_size=6 train.micro_batch_size=1 io.run_dir="'$scratch/b6'"
triad_run 3 "$DECKS/tiny.nml" train.steps=10 train.batch_size=6 train.micro_batch_size=1 io.run_dir="'$scratch/b6dp3'"
compare_runs "$scratch/b6dp3" "$scratch/b6" 1e-5 loss > /dev/null
ok $? "dp = 3 matches dp = 1 at batch 6"
done_testing
