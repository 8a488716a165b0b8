/* cuda_runtime.h (emulator): the runtime API of cuda_runtime_api.h. */
#include "cuda_runtime_api.h"
