#!/bin/sh
# ZeRO-1: the optimizer state sharded over the data-parallel ranks gives the
# per-step losses of plain data parallelism (1e-6 relative), with tp and pp
# too; its checkpoints restart with or without ZeRO; the state shrinks.
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
common="model.n_layer=4 train.steps=20 train.micro_batch_size=2 train.lr=3d-3 io.checkpoint_every=10"
state() { sed -n 's/.*memory \([0-9.]*\) MiB state.*/\1/p' "$scratch/last.out"; }
for layout in "2" "4" "4 parallel.tp=2" "4 parallel.pp=2"; do
    set -- $layout
    np=$1; shift
    name=$(echo "$np $*" | tr -c 'a-z0-9\n' '_')
    triad_run "$np" "$deck" $common "$@" io.run_dir="'$scratch/plain$name'"
    plain=$(state)
    triad_run "$np" "$deck" $common "$@" parallel.zero_stage=1 io.run_dir="'$scratch/zero$name'"
    st=$?
    zero=$(state)
    [ $st -eq 0 ] && compare_runs "$scratch/zero$name" "$scratch/plain$name" 1e-6 loss grad_norm > /dev/null
    ok $? "zero_stage = 1 on $np ranks $*: per-step loss and grad norm within 1e-6 of plain data parallelism"
    awk "BEGIN { exit !($zero < $plain) }"
    ok $? "zero_stage = 1 on $np ranks $*: state per rank $zero MiB < $plain MiB"
done

# the ZeRO checkpoint at step 10 restarts without ZeRO on one rank, and back
mkdir -p "$scratch/r1" && cp "$scratch/zero4_/ckpt_10.h5" "$scratch/zero4_/metrics.h5" "$scratch/r1/"
triad_run 1 "$deck" $common io.restart=auto io.run_dir="'$scratch/r1'"
st=$?
[ $st -eq 0 ] && compare_runs "$scratch/r1" "$scratch/plain4_" 1e-6 loss > /dev/null
ok $? "a ZeRO-1 checkpoint (dp = 4) continues on one rank without ZeRO: steps 11-20 within 1e-6"
mkdir -p "$scratch/r2" && cp "$scratch/plain2_/ckpt_10.h5" "$scratch/plain2_/metrics.h5" "$scratch/r2/"
triad_run 2 "$deck" $common parallel.zero_stage=1 io.restart=auto io.run_dir="'$scratch/r2'"
st=$?
[ $st -eq 0 ] && compare_runs "$scratch/r2" "$scratch/plain2_" 1e-6 loss > /dev/null
ok $? "a plain checkpoint continues under ZeRO-1 (dp = 2): steps 11-20 within 1e-6"
done_testing
