// A job that opens AMD SMI itself instead of through the registry: the probe must name line 2.
#include "zeus/device/amdsmi/amdsmi_gpu_set.h"
