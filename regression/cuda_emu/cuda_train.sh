#!/bin/sh
# regression/cuda_train.sh on the CUDA emulator (emu_device.h): the program
# with the CUDA table runs device = 'cuda' on the CPU, so the GPU checks run
# in every build -- the table's wiring of the model, optimizer, ZeRO-2,
# precision and staged MPI -- with device memory the host cannot touch.
# One emulated GPU per node: two ranks share it (train.share_gpus).
here=$(cd "$(dirname "$0")" && pwd)
: "${top_builddir:=$(cd "$here/../.." && pwd)}"
TRIAD_EXE="$top_builddir/regression/cuda_emu/triad" TRIAD_EMU_DEVICES=1 exec sh "$here/../cuda_train.sh"
