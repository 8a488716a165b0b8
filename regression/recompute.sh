#!/bin/sh
# Activation recomputation: selective (attention scores and softmax) and full
# (whole layers from their inputs, or the first 2 of each chunk, which saves
# one layer's activations net of the shared one-layer scratch) give results
# bitwise identical to storing everything, on one rank and with tp, sp and pp;
# the activation memory falls.
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
common="model.n_layer=4 model.seq_len=64 train.steps=10 train.micro_batch_size=2"
act() { allocated "$scratch/$1" activations; } # rank 0's, in bytes (metrics.h5: /memory/allocated)
for layout in "1" "4 parallel.tp=2 parallel.pp=2 parallel.sequence_parallel=.true."; do
    set -- $layout
    np=$1; shift
    triad_run "$np" "$deck" $common "$@" io.run_dir="'$scratch/none$np'"
    ok $? "$np rank(s): no recomputation"
    none=$(act "none$np")
    for rc in "selective" "full" "full train.recompute_layers=2"; do
        name=$(echo "$rc" | tr -c 'a-z0-9\n' '_')
        triad_run "$np" "$deck" $common "$@" train.recompute=$rc io.run_dir="'$scratch/$name$np'"
        st=$?
        mem=$(act "$name$np")
        [ $st -eq 0 ] && compare_runs "$scratch/$name$np" "$scratch/none$np" 0 loss grad_norm > /dev/null
        ok $? "$np rank(s), recompute = $rc: losses and grad norms bitwise identical over 10 steps"
        awk "BEGIN { exit !($mem < $none) }"
        ok $? "$np rank(s), recompute = $rc: activations $mem < $none bytes"
    done
done
done_testing
