// Must not compile: the simulator uses optimize/ and trace/, never a device.
#include "zeus/device/gpu_set.h"
