#!/bin/sh
# The planner's device memory against what the CUDA table allocates: the
# emulator (emu_device.h) records the peak of the bytes each process asked
# cudaMalloc for; `triad plan` must name that number exactly for every
# stage ("stage S device memory": parameters, gradients, optimizer,
# activations and the workspace -- the backend's scratch and, in bf16/fp16,
# the 16-bit operand copies, which grow during the first step); and the
# run's own measure of the device memory in use (cudaMemGetInfo, sampled
# after each step: /memory/peak_device) must find that peak too.
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$top_srcdir/regression/lib.sh"
TRIAD="$top_builddir/regression/cuda_emu/triad"
deck="$DECKS/tiny.nml"
common="train.steps=2 train.warmup_steps=0 train.peak_gflops=100 train.device='cuda' train.share_gpus=.true. train.memory_gb=8"

# layout NAME NP OVERRIDES...
layout() {
    name=$1; np=$2; shift 2
    "$TRIAD" plan "$deck" world="$np" $common "$@" > "$scratch/$name.plan" 2>&1
    want=$(sed -n 's/^  stage [0-9]* device memory: \([0-9]*\) bytes.*/\1/p' "$scratch/$name.plan" | sort -n | uniq)
    rm -f "$scratch/$name.rep"
    TRIAD_EMU_REPORT="$scratch/$name.rep" triad_run "$np" "$deck" $common "$@" io.run_dir="'$scratch/$name'"
    st=$?
    got=$(sed -n 's/^device peak \([0-9]*\) bytes/\1/p' "$scratch/$name.rep" 2> /dev/null | sort -n | uniq)
    [ $st -eq 0 ] && [ -n "$want" ] && [ "$(echo $want)" = "$(echo $got)" ]
    ok $? "$name: planned device bytes per stage ($(echo $want)) = the peak each rank allocated ($(echo $got))"
    seen=$("$PYTHON3" -c 'import sys, h5py; print(" ".join(sorted(set(str(v) for v in h5py.File(sys.argv[1])["memory/peak_device"][:]), key=int)))' \
               "$scratch/$name/metrics.h5" 2> /dev/null)
    [ -n "$got" ] && [ "$seen" = "$(echo $got)" ] && grep -q "^  rank   0: peak .*   device  *[0-9.]*   planned " "$scratch/last.out"
    ok $? "$name: the run's measured device peak per rank (/memory/peak_device: ${seen:-none}) is that peak, printed at the end"
}

layout fp32 1
layout bf16 1 train.precision="'bf16'"
layout fp16_tp2_sp 2 train.precision="'fp16'" parallel.tp=2 parallel.sequence_parallel=.true.
layout bf16_pp2 2 train.precision="'bf16'" parallel.pp=2 train.micro_batch_size=2
layout bf16_zero2_dp2 2 train.precision="'bf16'" parallel.zero_stage=2 train.micro_batch_size=2
layout fp32_zero1_selective 2 parallel.zero_stage=1 train.recompute="'selective'"
layout bf16_llama_cp2 2 train.precision="'bf16'" parallel.cp=2 model.arch="'llama'" model.n_kv_head=2
done_testing
