#!/bin/sh
# The emulator keeps device memory out of the host's reach (emu_device.h),
# which is what lets cuda_train.sh on the emulator prove that the program
# touches its model only through the device table: a device pointer read
# on the host, or handed to MPI, stops the process with the emulator's
# message; a copy with the wrong kind is an error; proper copies work.
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
. "$top_srcdir/regression/lib.sh"
G="$top_builddir/regression/cuda_emu/guard"

"$G" copy > "$scratch/copy.out" 2>&1
ok $? "device memory written and read back through cudaMemcpy"
for mode in host-read mpi; do
    "$G" $mode > "$scratch/$mode.out" 2>&1
    st=$?
    [ $st -ne 0 ] && grep -q "EMU: host code touched device memory" "$scratch/$mode.out" &&
        ! grep -q "read device memory" "$scratch/$mode.out"
    ok $? "$mode: stopped (status $st) with the emulator's message"
done
"$G" wrong-kind > "$scratch/kind.out" 2>&1
[ $? -eq 4 ] && grep -q "EMU: cudaMemcpy kind 1, but the destination is host memory" "$scratch/kind.out"
ok $? "cudaMemcpy with a kind that does not match the pointers: an error"
done_testing
