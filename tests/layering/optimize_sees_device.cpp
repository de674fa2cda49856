// Must not compile: optimize/ is the pure decision logic and may not see the device layer.
#include "zeus/device/gpu_set.h"
