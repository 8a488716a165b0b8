#!/bin/sh
# The CUDA backend end to end (device = 'cuda'): on a GPU, training runs
# match the CPU backend (per-step losses within the fp32 tolerance over 20
# steps, on 1 and 2 ranks: the second through MPI on device buffers, staged
# where the MPI is not CUDA-aware; at tp 2; with ZeRO-2 and ZeRO-3), two ranks are
# refused one GPU without train.share_gpus, background checkpoints from
# device memory, TF32 is on when asked and stays
# within its tolerance, bf16 on tensor cores within its, and the fp16 skip
# path works on the device.  Without the CUDA build or without a
# GPU the run must fail with a clear message, and the GPU checks are skipped.
. "$(dirname "$0")/lib.sh"

deck="$DECKS/tiny.nml"
# CUDA_TRAIN_EXTRA: more settings for every run (the emulator gives the peak
# rate, which it cannot time)
common="model.n_layer=4 train.steps=20 train.memory_gb=8 ${CUDA_TRAIN_EXTRA:-}"
triad_run 1 "$deck" $common train.device="'cuda'" io.run_dir="'$scratch/probe'"
st=$?
if grep -q "CUDA backend (device = .cuda.) is not available in this build" "$scratch/last.out"; then
    [ $st -ne 0 ]
    ok $? "device = 'cuda' in a build without CUDA: a clear error"
    skip "no CUDA backend in this build (./configure --with-cuda)"
    done_testing
fi
if grep -q "no CUDA device" "$scratch/last.out"; then
    [ $st -ne 0 ] && grep -q "hint: each rank needs a GPU of its own" "$scratch/last.out"
    ok $? "device = 'cuda' without a GPU: a clear error naming the rank and the reason"
    skip "no GPU on this machine: $(grep -o 'no CUDA device.*' "$scratch/last.out" | head -1)"
    done_testing
fi
ok $st "device = 'cuda': 20 steps on one GPU"

for np in 1 2; do
    triad_run "$np" "$deck" $common io.run_dir="'$scratch/cpu$np'"
    triad_run "$np" "$deck" $common train.device="'cuda'" train.share_gpus=.true. io.run_dir="'$scratch/gpu$np'"
    st=$?
    out=$([ $st -eq 0 ] && compare_runs "$scratch/gpu$np" "$scratch/cpu$np" 1e-4 loss &&
          compare_runs "$scratch/gpu$np" "$scratch/cpu$np" 1e-3 grad_norm)
    ok $? "$np rank(s): CUDA per-step losses within 1e-4, grad norms within 1e-3 of the CPU backend"
    echo "$out" | diag
done
triad_run 2 "$deck" $common train.steps=2 train.warmup_steps=0 train.device="'cuda'" io.run_dir="'$scratch/gshare'"
st=$?
if [ $st -ne 0 ]; then
    grep -q "is also used by node-local rank" "$scratch/last.out" && grep -q "hint: each rank needs a GPU of its own" "$scratch/last.out"
    ok $? "2 ranks on one GPU without train.share_gpus: refused, naming the rank that shares it"
else
    ok 0 "2 ranks without train.share_gpus: each has a GPU of its own"
fi
if [ -n "${TRIAD_EMU_DEVICES:-}" ]; then # (the emulator: a node whose GPUs are not visible)
    TRIAD_EMU_DEVICES=0 triad_run 2 "$deck" $common train.steps=2 train.warmup_steps=0 train.device="'cuda'" io.run_dir="'$scratch/gnone'"
    st=$?
    [ $st -eq 1 ] && grep -q "no CUDA device" "$scratch/last.out" &&
        grep -q "hint: each rank needs a GPU of its own: check that the node's GPUs are visible (nvidia-smi" "$scratch/last.out"
    ok $? "a node without a visible GPU: status 1 (got $st), no CUDA device, the hint names nvidia-smi and CUDA_VISIBLE_DEVICES"
    # a full device at each allocation of a bf16 run in turn (the backend's own, the model's, the 16-bit operand
    # copies of the first step): status 1, the call named, said as out of device memory with what to do
    bad="" sites=""
    for n in 1 2 3 4 5 6 7 8 9 10 11 12; do
        TRIAD_EMU_FAIL_MALLOC=$n triad_run 1 "$deck" $common train.steps=2 train.warmup_steps=0 train.device="'cuda'" \
            train.precision="'bf16'" io.run_dir="'$scratch/oom$n'"
        st=$?
        grep -q "CUDA error: cudaMalloc(.*): out of device memory: .triad plan DECK. shows what each rank needs" \
            "$scratch/last.out" && [ $st -eq 1 ] || bad="$bad $n(status $st)"
        sites="$sites $(grep -o 'error at [^ ]*' "$scratch/last.out" | head -1 | sed 's/.*\///')"
    done
    [ -z "$bad" ] && echo "$sites" | grep -q "context.cu:4" && echo "$sites" | grep -q "table.c" &&
        echo "$sites" | grep -q "context.cu:[5-9][0-9]"
    ok $? "cudaMalloc failing at each of the first 12 allocations: status 1, out of device memory and the plan's hint (at$sites)"
    [ -z "$bad" ] || echo "failed at:$bad" | diag
    TRIAD_EMU_FAIL_MALLOC_HOST=1 triad_run 1 "$deck" $common train.steps=2 train.warmup_steps=0 train.device="'cuda'" \
        io.async_checkpoint=.true. io.checkpoint_every=1 io.run_dir="'$scratch/pinned'"
    st=$?
    [ $st -eq 1 ] && grep -q "out of pinned host memory: .* free host memory .*, or set io.async_checkpoint = .false." "$scratch/last.out"
    ok $? "cudaMallocHost failing: status 1 (got $st), out of pinned host memory, with what to do"
fi
triad_run 2 "$deck" $common parallel.tp=2 train.device="'cuda'" train.share_gpus=.true. io.run_dir="'$scratch/gtp'"
st=$?
[ $st -eq 0 ] && compare_runs "$scratch/gtp" "$scratch/cpu1" 1e-4 loss > /dev/null
ok $? "tp = 2 on the GPU: per-step losses within 1e-4 of the CPU"
triad_run 2 "$deck" $common parallel.zero_stage=2 train.micro_batch_size=2 train.device="'cuda'" \
    train.share_gpus=.true. io.run_dir="'$scratch/gz2'"
st=$?
[ $st -eq 0 ] && compare_runs "$scratch/gz2" "$scratch/cpu2" 1e-4 loss > /dev/null
ok $? "ZeRO-2 on 2 GPUs (gradient slices on the device): per-step losses within 1e-4 of the CPU"
triad_run 2 "$deck" $common parallel.zero_stage=3 train.micro_batch_size=2 train.device="'cuda'" \
    train.share_gpus=.true. io.run_dir="'$scratch/gz3'"
st=$?
[ $st -eq 0 ] && compare_runs "$scratch/gz3" "$scratch/cpu2" 1e-4 loss > /dev/null
ok $? "ZeRO-3 on 2 GPUs (parameter slices and layer gathers on the device): per-step losses within 1e-4 of the CPU"
triad_run 2 "$deck" $common parallel.zero_stage=1 parallel.bucket_mb=0.002 train.micro_batch_size=2 \
    train.device="'cuda'" train.share_gpus=.true. io.run_dir="'$scratch/gz1'"
st=$?
[ $st -eq 0 ] && compare_runs "$scratch/gz1" "$scratch/cpu2" 1e-4 loss > /dev/null
ok $? "ZeRO-1 on 2 GPUs, its collectives in pieces through a device staging buffer: losses within 1e-4 of the CPU"
# background checkpoints from device memory: the snapshot copied off the GPU
# (into pinned memory) holds what a synchronous checkpoint writes
for how in sync async; do
    triad_run 2 "$deck" $common parallel.zero_stage=1 train.micro_batch_size=2 train.device="'cuda'" \
        train.share_gpus=.true. io.checkpoint_every=5 io.keep_checkpoints=4 \
        io.async_checkpoint=$([ $how = async ] && echo .true. || echo .false.) io.run_dir="'$scratch/gck$how'"
    eval st_$how=$?
done
[ "$st_sync" -eq 0 ] && [ "$st_async" -eq 0 ] && grep -q "ckpt_15.h5 written in the background" "$scratch/last.out" &&
    h5diff "$scratch/gckasync/ckpt_15.h5" "$scratch/gcksync/ckpt_15.h5" /model /model > /dev/null 2>&1 &&
    h5diff "$scratch/gckasync/ckpt_15.h5" "$scratch/gcksync/ckpt_15.h5" /optim /optim > /dev/null 2>&1
ok $? "io.async_checkpoint on 2 GPUs with ZeRO-1: the background-written ckpt_15.h5 holds the synchronous one's tensors"
triad_run 1 "$deck" $common train.tf32=.true. train.device="'cuda'" io.run_dir="'$scratch/gtf32'"
st=$?
out=$([ $st -eq 0 ] && grep -q "matmul: cuBLAS on .*, TF32 tensor cores" "$scratch/last.out" &&
      compare_runs "$scratch/gtf32" "$scratch/cpu1" 5e-3 loss)
st=$?
# ... and not the fp32 products (those agree within ~1e-6)
[ $st -eq 0 ] && echo "$out" | awk '/worst relative deviation/ {found = 1; d = $7 + 0} END {exit !(found && d > 1e-6)}'
ok $? "train.tf32: per-step losses within 5e-3 of the fp32 CPU run, and not equal to fp32's (TF32 is on)"
echo "$out" | diag
triad_run 1 "$deck" $common train.precision="'bf16'" train.device="'cuda'" io.run_dir="'$scratch/gbf16'"
st=$?
out=$([ $st -eq 0 ] && grep -q "matmul: cuBLAS on .*, bf16 tensor cores" "$scratch/last.out" &&
      compare_runs "$scratch/gbf16" "$scratch/cpu1" 1e-2 loss)
ok $? "bf16 on the GPU (tensor cores): per-step losses within 1e-2 of fp32"
echo "$out" | diag
# zero bubble on the device: B and W through the CUDA table's backwards (NULL for the part not asked),
# the split backward's buffers in device memory; the same bits as one GPU, in fp32 and in bf16 (tensor cores)
for p in fp32 bf16; do
    triad_run 1 "$deck" $common train.steps=4 train.precision="'$p'" train.micro_batch_size=2 train.device="'cuda'" \
        io.run_dir="'$scratch/g1$p'" &&
        triad_run 2 "$deck" $common train.steps=4 train.precision="'$p'" parallel.pp=2 parallel.schedule="'zbv'" \
            parallel.virtual_stages=2 train.micro_batch_size=2 train.device="'cuda'" train.share_gpus=.true. \
            io.run_dir="'$scratch/gzbv$p'"
    st=$?
    out=$([ $st -eq 0 ] && compare_runs "$scratch/gzbv$p" "$scratch/g1$p" 0 loss grad_norm)
    ok $? "zbv ($p) on 2 GPUs: every step's loss and grad norm equal one GPU's, bit for bit"
    echo "$out" | diag
done
triad_run 2 "$deck" $common train.precision="'fp16'" train.loss_scale_hysteresis=1 diag.inject_overflow_step=5 \
    diag.inject_rank=1 train.device="'cuda'" train.share_gpus=.true. io.run_dir="'$scratch/gfp16'"
st=$?
[ $st -eq 0 ] && grep -q "step 5: gradients not finite (first on world rank 1)" "$scratch/last.out" &&
    grep -q "step 5: loss scale 65536 -> 32768" "$scratch/last.out"
ok $? "fp16 on the GPU: an injected overflow skips step 5 on both ranks and the scale backs off"
# a mixture of experts (docs/moe.md): the router's choices on the host, the
# rows gathered and combined on the device, ep 2's all-to-alls through MPI
moe="model.arch='llama' model.n_kv_head=2 model.n_expert=4 model.moe_ffn_hidden=24 model.n_shared_expert=1"
for ep in 1 2; do
    triad_run 2 "$deck" $common $moe parallel.ep=$ep train.steps=6 io.run_dir="'$scratch/moecpu$ep'"
    triad_run 2 "$deck" $common $moe parallel.ep=$ep train.steps=6 train.device="'cuda'" train.share_gpus=.true. \
        io.run_dir="'$scratch/moegpu$ep'"
    st=$?
    out=$([ $st -eq 0 ] && compare_runs "$scratch/moegpu$ep" "$scratch/moecpu$ep" 1e-4 loss moe_aux_loss)
    ok $? "a mixture of experts on 2 GPUs, ep $ep: per-step losses and load-balancing losses within 1e-4 of the CPU"
    echo "$out" | diag
done
dense="model.moe_dense_layers=1 model.ffn_hidden=40"
triad_run 2 "$deck" $common $moe $dense parallel.ep=2 train.steps=6 io.run_dir="'$scratch/moedcpu'"
triad_run 2 "$deck" $common $moe $dense parallel.ep=2 train.steps=6 train.device="'cuda'" train.share_gpus=.true. \
    io.run_dir="'$scratch/moedgpu'"
st=$?
out=$([ $st -eq 0 ] && compare_runs "$scratch/moedgpu" "$scratch/moedcpu" 1e-4 loss moe_aux_loss)
ok $? "a mixture with a leading dense block on 2 GPUs, ep 2: per-step losses and load-balancing losses within 1e-4 of the CPU"
echo "$out" | diag
done_testing
