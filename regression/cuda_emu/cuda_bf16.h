/* cuda_bf16.h (emulator): the bf16 type and conversions are in emu_device.h. */
#include "emu_device.h"
