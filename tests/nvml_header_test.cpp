// zeus-cpp declares the few NVML types, constants and entry points it uses itself
// (device/nvml/nvml_api.h), so that building needs no CUDA toolkit. This test compiles those
// declarations against NVIDIA's real nvml.h (PyPI's nvidia-nvml-dev, which
// scripts/install-torch.sh installs) and checks every constant, struct layout and entry-point
// signature they declare. Without that header it skips, saying how to get it.
#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>

#include "zeus/device/nvml/nvml_api.h"

#ifdef ZEUS_REAL_NVML_H
// nvml.h includes nothing and is plain C: inside a namespace its types cannot clash with ours.
namespace real {
#include ZEUS_REAL_NVML_H
}  // namespace real

namespace {

// Our spelling of a real NVML type, so that signatures can be compared.
template <class T>
struct Ours {
  using type = T;
};
template <>
struct Ours<real::nvmlReturn_t> {
  using type = ::nvmlReturn_t;
};
template <>
struct Ours<real::nvmlDevice_t> {
  using type = ::nvmlDevice_t;
};
template <>
struct Ours<real::nvmlDevice_t*> {
  using type = ::nvmlDevice_t*;
};
template <>
struct Ours<real::nvmlFieldValue_t*> {
  using type = ::nvmlFieldValue_t*;
};
template <>
struct Ours<real::nvmlPciInfo_t*> {
  using type = ::nvmlPciInfo_t*;
};
template <>
struct Ours<real::nvmlProcessInfo_t*> {
  using type = ::nvmlProcessInfo_t*;
};
template <>
struct Ours<real::nvmlEnableState_t> {
  using type = ::nvmlEnableState_t;
};
template <>
struct Ours<real::nvmlEnableState_t*> {
  using type = ::nvmlEnableState_t*;
};
template <class R, class... A>
struct Ours<R (*)(A...)> {
  using type = typename Ours<R>::type (*)(typename Ours<A>::type...);
};
template <auto F>
using OursOf = typename Ours<decltype(F)>::type;

// The entry points nvml_library.cpp resolves, each against the typedef it is called through.
static_assert(std::is_same_v<OursOf<&real::nvmlInit_v2>, nvmlInit_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlShutdown>, nvmlShutdown_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlErrorString>, nvmlErrorString_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlDeviceGetCount_v2>, nvmlDeviceGetCount_fn>);
static_assert(
    std::is_same_v<OursOf<&real::nvmlDeviceGetHandleByIndex_v2>, nvmlDeviceGetHandleByIndex_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlDeviceGetName>, nvmlDeviceGetString_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlDeviceGetUUID>, nvmlDeviceGetString_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlDeviceGetPowerUsage>, nvmlDeviceGetUInt_fn>);
static_assert(
    std::is_same_v<OursOf<&real::nvmlDeviceGetPowerManagementLimit>, nvmlDeviceGetUInt_fn>);
static_assert(
    std::is_same_v<OursOf<&real::nvmlDeviceGetPowerManagementDefaultLimit>, nvmlDeviceGetUInt_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlDeviceGetPowerManagementLimitConstraints>,
                             nvmlDeviceGetUIntPair_fn>);
static_assert(
    std::is_same_v<OursOf<&real::nvmlDeviceSetPowerManagementLimit>, nvmlDeviceSetUInt_fn>);
static_assert(
    std::is_same_v<OursOf<&real::nvmlDeviceGetTotalEnergyConsumption>, nvmlDeviceGetULongLong_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlDeviceGetFieldValues>, nvmlDeviceGetFieldValues_fn>);
static_assert(
    std::is_same_v<OursOf<&real::nvmlDeviceGetHandleByUUID>, nvmlDeviceGetHandleByUUID_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlDeviceGetDeviceHandleFromMigDeviceHandle>,
                             nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn>);
static_assert(
    std::is_same_v<OursOf<&real::nvmlDeviceGetPersistenceMode>, nvmlDeviceGetEnableState_fn>);
static_assert(
    std::is_same_v<OursOf<&real::nvmlDeviceSetPersistenceMode>, nvmlDeviceSetEnableState_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlDeviceGetPciInfo_v3>, nvmlDeviceGetPciInfo_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlDeviceGetComputeRunningProcesses_v3>,
                             nvmlDeviceGetProcesses_fn>);
static_assert(
    std::is_same_v<OursOf<&real::nvmlDeviceSetGpuLockedClocks>, nvmlDeviceSetUIntPair_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlDeviceResetGpuLockedClocks>, nvmlDeviceReset_fn>);
static_assert(
    std::is_same_v<OursOf<&real::nvmlDeviceSetMemoryLockedClocks>, nvmlDeviceSetUIntPair_fn>);
static_assert(std::is_same_v<OursOf<&real::nvmlDeviceResetMemoryLockedClocks>, nvmlDeviceReset_fn>);
static_assert(sizeof(real::nvmlEnableState_t) == sizeof(nvmlEnableState_t));

// Enums travel as int across the C ABI.
static_assert(sizeof(real::nvmlReturn_t) == sizeof(nvmlReturn_t));
static_assert(sizeof(real::nvmlValueType_t) == sizeof(int));

}  // namespace

TEST(NvmlHeader, ReturnCodesMatch) {
  EXPECT_EQ(NVML_SUCCESS, real::NVML_SUCCESS);
  EXPECT_EQ(NVML_ERROR_UNINITIALIZED, real::NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(NVML_ERROR_INVALID_ARGUMENT, real::NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(NVML_ERROR_NOT_SUPPORTED, real::NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(NVML_ERROR_NO_PERMISSION, real::NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(NVML_ERROR_NOT_FOUND, real::NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(NVML_ERROR_DRIVER_NOT_LOADED, real::NVML_ERROR_DRIVER_NOT_LOADED);
  EXPECT_EQ(NVML_ERROR_FUNCTION_NOT_FOUND, real::NVML_ERROR_FUNCTION_NOT_FOUND);
  EXPECT_EQ(NVML_ERROR_GPU_IS_LOST, real::NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(NVML_ERROR_UNKNOWN, real::NVML_ERROR_UNKNOWN);
}

TEST(NvmlHeader, ValueTypesFieldIdAndBufferSizesMatch) {
  EXPECT_EQ(NVML_VALUE_TYPE_DOUBLE, real::NVML_VALUE_TYPE_DOUBLE);
  EXPECT_EQ(NVML_VALUE_TYPE_UNSIGNED_INT, real::NVML_VALUE_TYPE_UNSIGNED_INT);
  EXPECT_EQ(NVML_VALUE_TYPE_UNSIGNED_LONG, real::NVML_VALUE_TYPE_UNSIGNED_LONG);
  EXPECT_EQ(NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, real::NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
  EXPECT_EQ(NVML_VALUE_TYPE_SIGNED_LONG_LONG, real::NVML_VALUE_TYPE_SIGNED_LONG_LONG);
  EXPECT_EQ(NVML_VALUE_TYPE_SIGNED_INT, real::NVML_VALUE_TYPE_SIGNED_INT);
  EXPECT_EQ(kNvmlFieldPowerInstant, static_cast<unsigned>(NVML_FI_DEV_POWER_INSTANT));
  // The _V2 sizes: large enough for every GPU's UUID and name.
  EXPECT_EQ(kNvmlDeviceUuidBufferSize, static_cast<unsigned>(NVML_DEVICE_UUID_V2_BUFFER_SIZE));
  EXPECT_EQ(kNvmlDeviceNameBufferSize, static_cast<unsigned>(NVML_DEVICE_NAME_V2_BUFFER_SIZE));
}

TEST(NvmlHeader, StructLayoutsMatch) {
  EXPECT_EQ(sizeof(nvmlValue_t), sizeof(real::nvmlValue_t));
  EXPECT_EQ(alignof(nvmlValue_t), alignof(real::nvmlValue_t));
  EXPECT_EQ(sizeof(nvmlFieldValue_t), sizeof(real::nvmlFieldValue_t));
  EXPECT_EQ(alignof(nvmlFieldValue_t), alignof(real::nvmlFieldValue_t));
#define ZEUS_EXPECT_SAME_OFFSET(field) \
  EXPECT_EQ(offsetof(nvmlFieldValue_t, field), offsetof(real::nvmlFieldValue_t, field)) << #field
  ZEUS_EXPECT_SAME_OFFSET(fieldId);
  ZEUS_EXPECT_SAME_OFFSET(scopeId);
  ZEUS_EXPECT_SAME_OFFSET(timestamp);
  ZEUS_EXPECT_SAME_OFFSET(latencyUsec);
  ZEUS_EXPECT_SAME_OFFSET(valueType);
  ZEUS_EXPECT_SAME_OFFSET(nvmlReturn);
  ZEUS_EXPECT_SAME_OFFSET(value);
#undef ZEUS_EXPECT_SAME_OFFSET
}

TEST(NvmlHeader, DaemonStructLayoutsAndCodesMatch) {
  EXPECT_EQ(NVML_ERROR_INSUFFICIENT_SIZE, real::NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(kNvmlPciBusIdBufferSize, static_cast<unsigned>(NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE));
  EXPECT_EQ(kNvmlPciBusIdLegacyBufferSize,
            static_cast<unsigned>(NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE));
  EXPECT_EQ(sizeof(nvmlPciInfo_t), sizeof(real::nvmlPciInfo_t));
  EXPECT_EQ(offsetof(nvmlPciInfo_t, domain), offsetof(real::nvmlPciInfo_t, domain));
  EXPECT_EQ(offsetof(nvmlPciInfo_t, bus), offsetof(real::nvmlPciInfo_t, bus));
  EXPECT_EQ(offsetof(nvmlPciInfo_t, device), offsetof(real::nvmlPciInfo_t, device));
  EXPECT_EQ(offsetof(nvmlPciInfo_t, busId), offsetof(real::nvmlPciInfo_t, busId));
  EXPECT_EQ(sizeof(nvmlProcessInfo_t), sizeof(real::nvmlProcessInfo_t));
  EXPECT_EQ(offsetof(nvmlProcessInfo_t, usedGpuMemory),
            offsetof(real::nvmlProcessInfo_t, usedGpuMemory));
  EXPECT_EQ(offsetof(nvmlProcessInfo_t, gpuInstanceId),
            offsetof(real::nvmlProcessInfo_t, gpuInstanceId));
  EXPECT_EQ(static_cast<int>(real::NVML_FEATURE_ENABLED), 1);
}

#else

TEST(NvmlHeader, ReturnCodesMatch) {
  GTEST_SKIP() << "NVIDIA's nvml.h was not found at configure time: scripts/install-torch.sh "
                  "installs it (PyPI nvidia-nvml-dev), or pass -DZEUS_NVML_HEADER=/path/nvml.h";
}

#endif
