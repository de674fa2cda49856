// The few AMD SMI C types and entry points zeus-cpp uses, declared here so that nothing needs ROCm
// at build time. Layouts follow AMD's amdsmi.h for each library ABI (the soname's number: 24 =
// ROCm 6.2-6.3, 25 = ROCm 6.4, 26 = ROCm 7.x), as AMD's own `amdsmi` Python package (7.0.2, ABI
// 26) and upstream zeusd's loader bind them; tests/fakes/fake_amdsmi.cpp implements these same
// declarations, and a test reads it through AMD's package to hold the layouts to AMD's.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

using amdsmi_status_t = uint32_t;
using amdsmi_socket_handle = void*;
using amdsmi_processor_handle = void*;

inline constexpr amdsmi_status_t AMDSMI_STATUS_SUCCESS = 0;
inline constexpr amdsmi_status_t AMDSMI_STATUS_INVAL = 1;
inline constexpr amdsmi_status_t AMDSMI_STATUS_NOT_SUPPORTED = 2;
inline constexpr amdsmi_status_t AMDSMI_STATUS_TIMEOUT = 8;
inline constexpr amdsmi_status_t AMDSMI_STATUS_NO_PERM = 10;
inline constexpr amdsmi_status_t AMDSMI_STATUS_OUT_OF_RESOURCES = 15;
inline constexpr amdsmi_status_t AMDSMI_STATUS_INIT_ERROR = 18;
inline constexpr amdsmi_status_t AMDSMI_STATUS_NOT_FOUND = 31;
inline constexpr amdsmi_status_t AMDSMI_STATUS_NOT_INIT = 32;
inline constexpr amdsmi_status_t AMDSMI_STATUS_DRIVER_NOT_LOADED = 34;
inline constexpr amdsmi_status_t AMDSMI_STATUS_INSUFFICIENT_SIZE = 41;
// The library is older than the GPU (e.g. ROCm 6.4's on an MI355X): its tables lack the part.
inline constexpr amdsmi_status_t AMDSMI_STATUS_UNEXPECTED_DATA = 43;
inline constexpr amdsmi_status_t AMDSMI_STATUS_NO_ENERGY_DRV = 45;
inline constexpr amdsmi_status_t AMDSMI_STATUS_UNKNOWN_ERROR = 0xFFFFFFFF;

inline constexpr uint64_t AMDSMI_INIT_AMD_GPUS = 1U << 1U;

inline constexpr uint32_t AMDSMI_CLK_TYPE_GFX = 0;
inline constexpr uint32_t AMDSMI_CLK_TYPE_MEM = 4;
inline constexpr uint32_t AMDSMI_CLK_LIMIT_MIN = 0;
inline constexpr uint32_t AMDSMI_CLK_LIMIT_MAX = 1;
inline constexpr uint32_t AMDSMI_DEV_PERF_LEVEL_AUTO = 0;
inline constexpr uint32_t AMDSMI_TEMPERATURE_TYPE_EDGE = 0;
inline constexpr uint32_t AMDSMI_TEMPERATURE_TYPE_HOTSPOT = 1;
inline constexpr uint32_t AMDSMI_TEMP_CURRENT = 0;

// A power field the part does not report: 0xFFFF (what the library writes) or UINT32_MAX (what
// the 7.2 header documents).
inline constexpr uint32_t kAmdsmiPowerNotAvailable16 = 0xFFFF;
inline constexpr uint32_t kAmdsmiPowerNotAvailable32 = 0xFFFFFFFF;

#pragma pack(push, 1)
// amdsmi_version_t on ABI 24 and 25 (a `year` first) and on ABI 26 (none).
struct amdsmi_version_abi25_t {
  uint32_t year;
  uint32_t major;
  uint32_t minor;
  uint32_t release;
  const char* build;
};
struct amdsmi_version_abi26_t {
  uint32_t major;
  uint32_t minor;
  uint32_t release;
  uint8_t padding[4];
  const char* build;
};

// amdsmi_power_info_t: socket power in W, voltages in mV; `power_limit` is really uW.
struct amdsmi_power_info_abi24_t {
  uint32_t current_socket_power;
  uint32_t average_socket_power;
  uint32_t gfx_voltage;
  uint32_t soc_voltage;
  uint32_t mem_voltage;
  uint32_t power_limit;
  uint32_t reserved[11];
};
struct amdsmi_power_info_abi25_t {
  uint64_t socket_power;
  uint32_t current_socket_power;
  uint32_t average_socket_power;
  uint32_t gfx_voltage;
  uint32_t soc_voltage;
  uint32_t mem_voltage;
  uint32_t power_limit;
  uint32_t reserved[2];
};
struct amdsmi_power_info_abi26_t {
  uint64_t socket_power;
  uint32_t current_socket_power;
  uint32_t average_socket_power;
  uint64_t gfx_voltage;
  uint64_t soc_voltage;
  uint64_t mem_voltage;
  uint32_t power_limit;
  uint8_t padding[4];
  uint64_t reserved[18];
};

// Every cap in uW (despite older docs saying W; ROCm/amdsmi PR #174).
struct amdsmi_power_cap_info_t {
  uint64_t power_cap;
  uint64_t default_power_cap;
  uint64_t dpm_cap;
  uint64_t min_power_cap;
  uint64_t max_power_cap;
  uint64_t reserved[3];
};

// Clocks in MHz.
struct amdsmi_clk_info_t {
  uint32_t clk;
  uint32_t min_clk;
  uint32_t max_clk;
  uint8_t clk_locked;
  uint8_t clk_deep_sleep;
  uint8_t padding[2];
  uint32_t reserved[4];
};

// Only `market_name` (offset 0) is read; the whole structure is smaller than this on every ABI.
struct amdsmi_asic_info_prefix_t {
  char market_name[256];
  uint8_t rest[1792];
};

// HIP's numbering of the GPU (ROCm 6.4 and later).
struct amdsmi_enumeration_info_t {
  uint32_t drm_render;
  uint32_t drm_card;
  uint32_t hsa_id;
  uint32_t hip_id;
  char hip_uuid[256];
};

// KFD's node id: HIP's order on libraries without the enumeration call.
struct amdsmi_kfd_info_t {
  uint64_t kfd_id;
  uint32_t node_id;
  uint32_t current_partition_id;
  uint32_t reserved[12];
};
// One process on a GPU (ABI 26, as AMD's amdsmi 7.0.2 package binds it): only `pid` is read.
struct amdsmi_proc_info_abi26_t {
  char name[256];
  uint32_t pid;
  uint8_t padding[4];
  uint64_t mem;
  uint64_t engine_usage[2];  // gfx, enc (ns)
  uint32_t engine_reserved[12];
  uint64_t memory_usage[3];  // gtt, cpu, vram (bytes)
  uint32_t memory_reserved[10];
  char container_name[256];
  uint32_t cu_occupancy;
  uint32_t reserved[11];
};
#pragma pack(pop)

static_assert(sizeof(amdsmi_version_abi25_t) == 24 && offsetof(amdsmi_version_abi25_t, major) == 4);
static_assert(sizeof(amdsmi_version_abi26_t) == 24 && offsetof(amdsmi_version_abi26_t, major) == 0);
static_assert(sizeof(amdsmi_power_info_abi24_t) == 68);
static_assert(sizeof(amdsmi_power_info_abi25_t) == 40 &&
              offsetof(amdsmi_power_info_abi25_t, current_socket_power) == 8);
static_assert(sizeof(amdsmi_power_info_abi26_t) == 192 &&
              offsetof(amdsmi_power_info_abi26_t, current_socket_power) == 8);
static_assert(sizeof(amdsmi_power_cap_info_t) == 64);
static_assert(sizeof(amdsmi_clk_info_t) == 32);
static_assert(sizeof(amdsmi_enumeration_info_t) == 272);
static_assert(sizeof(amdsmi_kfd_info_t) == 64);
static_assert(sizeof(amdsmi_proc_info_abi26_t) == 704 &&
              offsetof(amdsmi_proc_info_abi26_t, pid) == 256);

using amdsmi_init_fn = amdsmi_status_t (*)(uint64_t flags);
using amdsmi_shut_down_fn = amdsmi_status_t (*)();
using amdsmi_get_lib_version_fn = amdsmi_status_t (*)(void* version);
using amdsmi_status_code_to_string_fn = amdsmi_status_t (*)(amdsmi_status_t, const char**);
using amdsmi_get_socket_handles_fn = amdsmi_status_t (*)(uint32_t* count,
                                                         amdsmi_socket_handle* sockets);
using amdsmi_get_processor_handles_fn = amdsmi_status_t (*)(amdsmi_socket_handle, uint32_t* count,
                                                            amdsmi_processor_handle* out);
using amdsmi_get_gpu_device_bdf_fn = amdsmi_status_t (*)(amdsmi_processor_handle, uint64_t* bdf);
using amdsmi_get_gpu_device_uuid_fn = amdsmi_status_t (*)(amdsmi_processor_handle, uint32_t* length,
                                                          char* uuid);
using amdsmi_get_gpu_asic_info_fn = amdsmi_status_t (*)(amdsmi_processor_handle, void* info);
using amdsmi_get_power_info_fn = amdsmi_status_t (*)(amdsmi_processor_handle, void* info);
using amdsmi_get_energy_count_fn = amdsmi_status_t (*)(amdsmi_processor_handle,
                                                       uint64_t* accumulator, float* resolution_uj,
                                                       uint64_t* timestamp_ns);
using amdsmi_get_power_cap_info_fn = amdsmi_status_t (*)(amdsmi_processor_handle, uint32_t sensor,
                                                         amdsmi_power_cap_info_t* info);
using amdsmi_set_power_cap_fn = amdsmi_status_t (*)(amdsmi_processor_handle, uint32_t sensor,
                                                    uint64_t cap_uw);
using amdsmi_get_temp_metric_fn = amdsmi_status_t (*)(amdsmi_processor_handle, uint32_t type,
                                                      uint32_t metric, int64_t* value);
using amdsmi_get_clock_info_fn = amdsmi_status_t (*)(amdsmi_processor_handle, uint32_t type,
                                                     amdsmi_clk_info_t* info);
using amdsmi_set_gpu_clk_limit_fn = amdsmi_status_t (*)(amdsmi_processor_handle, uint32_t type,
                                                        uint32_t limit, uint64_t mhz);
using amdsmi_set_gpu_perf_level_fn = amdsmi_status_t (*)(amdsmi_processor_handle, uint32_t level);
using amdsmi_get_gpu_enumeration_info_fn = amdsmi_status_t (*)(amdsmi_processor_handle,
                                                               amdsmi_enumeration_info_t* info);
using amdsmi_get_gpu_process_list_fn = amdsmi_status_t (*)(amdsmi_processor_handle, uint32_t* count,
                                                           void* list);
using amdsmi_get_gpu_kfd_info_fn = amdsmi_status_t (*)(amdsmi_processor_handle,
                                                       amdsmi_kfd_info_t* info);

}  // extern "C"
