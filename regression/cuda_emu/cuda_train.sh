#!/bin/sh
# regression/cuda_train.sh on the CUDA emulator (emu_device.h): the program
# with the CUDA table runs device = 'cuda' on the CPU, so the GPU checks run
# in every build -- the table's wiring of the model, optimizer, ZeRO-2,
# precision and staged MPI -- with device memory the host cannot touch.
# One emulated GPU per node: two ranks share it (train.share_gpus).  The
# peak rate comes from the deck: the emulator would take hours to time the
# program's 4096^3 probe (test_cuda_kernels times a small one).
here=$(cd "$(dirname "$0")" && pwd)
: "${top_builddir:=$(cd "$here/../.." && pwd)}"
TRIAD_EXE="$top_builddir/regression/cuda_emu/triad" TRIAD_EMU_DEVICES=1 CUDA_TRAIN_EXTRA="train.peak_gflops=100" \
    exec sh "$here/../cuda_train.sh"
