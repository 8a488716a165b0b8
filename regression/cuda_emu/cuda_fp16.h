/* cuda_fp16.h (emulator): the fp16 type and conversions are in emu_device.h. */
#include "emu_device.h"
