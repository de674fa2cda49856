// A job file that opens NVML's backend by name: the probe must refuse it.
#include "zeus/device/nvml/nvml_gpu_set.h"  // NOLINT: a layering probe's fixture
