/* backend.cc -- the .cu files of cuda/ compiled as C++ for the emulator (emu_device.h):
 * one translation unit, built with -DTRIAD_CUDA_EMU. */
#include "context.cu"
#include "kernels.cu"
#include "llama.cu"
#include "matmul.cu"
#include "attention.cu"
#include "crossentropy.cu"
#include "lowp.cu"
