#!/bin/sh
# The regression suite's GPU cases (regression/cases/gpu_*, `needs: gpu`)
# on the emulator (emu_device.h): each against its reference and its CPU
# twin.  On a machine with a GPU, `regression/run 'gpu_*'` runs them on it.
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
: "${PYTHON3:=/usr/bin/python3}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OMP_WAIT_POLICY=PASSIVE
export top_srcdir top_builddir
REGRESSION_GPU=1 TRIAD_EMU_DEVICES=1 exec "$PYTHON3" "$top_srcdir/regression/run" \
    --triad "$top_builddir/regression/cuda_emu/triad" 'gpu_*'
