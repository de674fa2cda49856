// The few NVML C types and entry points zeus-cpp uses, declared here so that nothing needs the
// CUDA toolkit or nvml.h at build time. Layouts follow nvml.h; the fake NVML library in
// tests/fakes implements these same declarations.
#pragma once

#include <cstdint>

extern "C" {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;

inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
inline constexpr nvmlReturn_t NVML_ERROR_FUNCTION_NOT_FOUND = 13;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;

enum : int {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
};

// NVML_FI_DEV_POWER_INSTANT: instantaneous power in mW (newer drivers).
inline constexpr unsigned kNvmlFieldPowerInstant = 186;
// NVML_FI_DEV_PERF_POLICY_POWER / _THERMAL (also named NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP
// and the SW thermal slowdown's older name): time the clocks were held down by the power limit,
// or by temperature, since the driver loaded, in ns (unsigned long long).
inline constexpr unsigned kNvmlFieldThrottlePowerNs = 74;
inline constexpr unsigned kNvmlFieldThrottleThermalNs = 75;
// nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU; nvmlClockType_t NVML_CLOCK_SM, NVML_CLOCK_MEM.
inline constexpr int kNvmlTemperatureGpu = 0;
inline constexpr int kNvmlClockSm = 1;
inline constexpr int kNvmlClockMem = 2;
inline constexpr unsigned kNvmlDeviceUuidBufferSize = 96;
inline constexpr unsigned kNvmlDeviceNameBufferSize = 96;

union nvmlValue_t {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  int siVal;
};

struct nvmlFieldValue_t {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};
static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t must match nvml.h");

// nvmlEnableState_t: NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1.
using nvmlEnableState_t = int;

inline constexpr unsigned kNvmlPciBusIdBufferSize = 32;
inline constexpr unsigned kNvmlPciBusIdLegacyBufferSize = 16;

// nvmlPciInfo_t, as nvmlDeviceGetPciInfo_v3 fills it.
struct nvmlPciInfo_t {
  char busIdLegacy[kNvmlPciBusIdLegacyBufferSize];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[kNvmlPciBusIdBufferSize];
};
static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t must match nvml.h");

// nvmlProcessInfo_t (v2), as nvmlDeviceGetComputeRunningProcesses_v3 fills it.
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t must match nvml.h");

using nvmlInit_fn = nvmlReturn_t (*)();
using nvmlShutdown_fn = nvmlReturn_t (*)();
using nvmlErrorString_fn = const char* (*)(nvmlReturn_t);
using nvmlDeviceGetCount_fn = nvmlReturn_t (*)(unsigned int*);
using nvmlDeviceGetHandleByIndex_fn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using nvmlDeviceGetString_fn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using nvmlDeviceGetUInt_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using nvmlDeviceGetUIntPair_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);
using nvmlDeviceSetUInt_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int);
using nvmlDeviceGetULongLong_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using nvmlDeviceGetFieldValues_fn = nvmlReturn_t (*)(nvmlDevice_t, int, nvmlFieldValue_t*);
using nvmlDeviceGetHandleByUUID_fn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using nvmlDeviceGetEnableState_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlEnableState_t*);
using nvmlDeviceSetEnableState_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlEnableState_t);
using nvmlDeviceGetPciInfo_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using nvmlDeviceGetProcesses_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
using nvmlDeviceSetUIntPair_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, unsigned int);
using nvmlDeviceReset_fn = nvmlReturn_t (*)(nvmlDevice_t);
// nvmlDeviceGetTemperature(device, sensor, °C) and nvmlDeviceGetClockInfo(device, type, MHz).
using nvmlDeviceGetSensorUInt_fn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*);
using nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn = nvmlReturn_t (*)(nvmlDevice_t,
                                                                         nvmlDevice_t*);

}  // extern "C"
