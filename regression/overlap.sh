#!/bin/sh
# The data-parallel gradient reduction overlapped with the backward (buckets
# of non-blocking all-reduces) gives the same numbers as the reduction after
# the backward, with tp, sequence parallelism and pp too.
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
common="model.n_layer=4 train.steps=20 train.micro_batch_size=2 train.lr=3d-3 parallel.bucket_mb=0.01"
for layout in "2" "4" "4 parallel.tp=2 parallel.sequence_parallel=.true." "4 parallel.pp=2"; do
    set -- $layout
    np=$1; shift
    name=$(echo "$np $*" | tr -c 'a-z0-9\n' '_')
    triad_run "$np" "$deck" $common "$@" parallel.overlap_grad_reduce=.false. io.run_dir="'$scratch/after$name'"
    triad_run "$np" "$deck" $common "$@" io.run_dir="'$scratch/during$name'"
    st=$?
    [ $st -eq 0 ] && grep -q "overlapped dp reduction (rank 0): in flight during backward" "$scratch/last.out"
    ok $? "$np ranks $*: the reduction starts during the backward"
    compare_runs "$scratch/during$name" "$scratch/after$name" 0 loss grad_norm > /dev/null
    ok $? "$np ranks $*: losses and grad norms bitwise identical to reducing after the backward"
done
done_testing
