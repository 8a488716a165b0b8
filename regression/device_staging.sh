#!/bin/sh
# The device plumbing on the CPU: with diag.stage_through_host the model's
# memory is handled as a GPU's that MPI cannot read, so every upload,
# download and host-staged collective (blocking, point-to-point, the
# non-blocking ZeRO-2 reduce-scatter and ZeRO-3 gathers, ZeRO's collectives in pieces) runs as it would on a GPU without
# CUDA-aware MPI.  Every layout must give bitwise the losses and gradient
# norms of the plain CPU run; checkpoints written and read through the host
# copies restart bitwise.
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
common="model.n_layer=4 train.steps=12 train.micro_batch_size=2"
for layout in "8 parallel.tp=2 parallel.pp=2 parallel.sequence_parallel=.true." \
              "2 parallel.zero_stage=2" "4 parallel.tp=2 parallel.zero_stage=1 train.precision=bf16" \
              "2 parallel.pp=2 parallel.schedule=interleaved parallel.virtual_stages=2" \
              "4 parallel.tp=2 train.precision=fp16 diag.inject_overflow_step=5 diag.inject_rank=1" \
              "3 parallel.zero_stage=1 parallel.bucket_mb=0.002 train.batch_size=12" \
              "3 parallel.zero_stage=2 parallel.bucket_mb=0.002 train.batch_size=12" \
              "4 parallel.pp=2 parallel.zero_stage=3 parallel.bucket_mb=0.002 train.precision=bf16"; do
    set -- $layout
    np=$1; shift
    name=$(echo "$np $*" | tr -c 'a-z0-9\n' '_' | cut -c1-60)
    triad_run "$np" "$deck" $common "$@" io.run_dir="'$scratch/plain$name'"
    triad_run "$np" "$deck" $common "$@" diag.stage_through_host=.true. io.run_dir="'$scratch/staged$name'"
    st=$?
    [ $st -eq 0 ] && grep -q "MPI through host buffers" "$scratch/last.out" &&
        compare_runs "$scratch/staged$name" "$scratch/plain$name" 0 loss grad_norm > /dev/null
    ok $? "staged through the host on $np ranks $*: losses and grad norms bitwise equal to the plain run"
done

# checkpoints through the host copies: write at step 6, restart, bitwise
c2="$common io.checkpoint_every=6 parallel.tp=2 parallel.zero_stage=1 parallel.bucket_mb=0.002"
triad_run 4 "$deck" $c2 diag.stage_through_host=.true. io.run_dir="'$scratch/full'"
mkdir -p "$scratch/rs" && cp "$scratch/full/ckpt_6.h5" "$scratch/full/metrics.h5" "$scratch/rs/"
triad_run 4 "$deck" $c2 diag.stage_through_host=.true. io.restart=auto io.run_dir="'$scratch/rs'"
st=$?
[ $st -eq 0 ] && compare_runs "$scratch/rs" "$scratch/full" 0 loss grad_norm > /dev/null
ok $? "a checkpoint written through the host copies restarts (staged) bitwise at step 6"
triad_run 2 "$deck" $common io.init_from="'$scratch/full/ckpt_6.h5'" io.run_dir="'$scratch/i1'"
triad_run 2 "$deck" $common io.init_from="'$scratch/full/ckpt_6.h5'" diag.stage_through_host=.true. \
    io.run_dir="'$scratch/i2'"
compare_runs "$scratch/i2" "$scratch/i1" 0 loss > /dev/null
ok $? "init_from through the host copies equals the plain read"
done_testing
