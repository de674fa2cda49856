// The one RAII loader of AMD SMI (libamd_smi): dlopen at run time from ROCm's directories, one
// symbol table, the library version checked against the structure layouts zeus-cpp knows,
// amdsmi_init(AMD GPUs) on construction and amdsmi_shut_down on destruction.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/device/amdsmi/amdsmi_api.h"
#include "zeus/device/dynamic_library.h"

namespace zeus::device::amdsmi {

// Where the library is looked for (each field as the environment gives it; unset: nullopt).
struct AmdsmiSearch {
  std::optional<std::string> override_path;  // ZEUS_AMDSMI_LIBRARY: the only candidate
  std::optional<std::string> lib_dir;        // AMDSMI_LIB_DIR
  std::optional<std::string> rocm_path;      // ROCM_PATH: authoritative over /opt when set
  std::filesystem::path opt_root = "/opt";   // where /opt/rocm and /opt/rocm-<version> live
  static AmdsmiSearch from_env();
};

// The paths dlopen tries, in order: each directory ($AMDSMI_LIB_DIR, then $ROCM_PATH/lib or else
// /opt/rocm/lib and the newest /opt/rocm-*/lib) with libamd_smi.so.26, .25, .24, then the same
// sonames through the loader's own paths. The override, when given, is the only candidate.
std::vector<std::string> library_candidates(const AmdsmiSearch& search);

// The library's ABI (its soname's number), which fixes the layouts of amdsmi_api.h.
enum class Abi { k24 = 24, k25 = 25, k26 = 26 };

struct AmdsmiLibraryOptions {
  // Library to load; empty: the search above.
  std::string path;
  std::optional<AmdsmiSearch> search;  // nullopt: from the environment
};

// Entry points resolved from the library. Required ones are never null; optional ones are null
// when this version lacks them, and their readings are lost, not the GPU.
struct AmdsmiApi {
  amdsmi_init_fn init = nullptr;
  amdsmi_shut_down_fn shut_down = nullptr;
  amdsmi_get_lib_version_fn get_lib_version = nullptr;
  amdsmi_get_socket_handles_fn get_socket_handles = nullptr;
  amdsmi_get_processor_handles_fn get_processor_handles = nullptr;
  amdsmi_get_power_info_fn get_power_info = nullptr;
  amdsmi_get_power_cap_info_fn get_power_cap_info = nullptr;
  amdsmi_set_power_cap_fn set_power_cap = nullptr;
  // Optional.
  amdsmi_status_code_to_string_fn status_code_to_string = nullptr;
  amdsmi_get_gpu_device_bdf_fn get_gpu_device_bdf = nullptr;
  amdsmi_get_gpu_device_uuid_fn get_gpu_device_uuid = nullptr;
  amdsmi_get_gpu_asic_info_fn get_gpu_asic_info = nullptr;
  amdsmi_get_energy_count_fn get_energy_count = nullptr;
  amdsmi_get_temp_metric_fn get_temp_metric = nullptr;
  amdsmi_get_clock_info_fn get_clock_info = nullptr;
  amdsmi_set_gpu_clk_limit_fn set_gpu_clk_limit = nullptr;
  amdsmi_set_gpu_perf_level_fn set_gpu_perf_level = nullptr;
  amdsmi_get_gpu_enumeration_info_fn get_gpu_enumeration_info = nullptr;
  amdsmi_get_gpu_kfd_info_fn get_gpu_kfd_info = nullptr;
  amdsmi_get_gpu_process_list_fn get_gpu_process_list = nullptr;
};

// A socket power reading in W, whichever ABI's structure it came from.
struct SocketPower {
  std::optional<uint32_t> current_w;
  std::optional<uint32_t> average_w;
};

// Loads AMD SMI and initializes it for AMD GPUs. Throws NotSupported (library missing: the paths
// tried and what to do) or DeviceError (a required symbol missing, a version whose layouts
// zeus-cpp does not know, amdsmi_init failing).
//
// Contract: call every entry point inside a `Call` (below): on the versions where concurrent
// calls are unsafe (ABI 24 and 25, and 26 before 26.2: segfaults and values crossed between
// GPUs, fixed in ROCm 7.2) it holds the one lock of the process (the library's state is the
// process's, however many of these objects share it).
class AmdsmiLibrary {
 public:
  explicit AmdsmiLibrary(AmdsmiLibraryOptions options = {});
  ~AmdsmiLibrary();
  AmdsmiLibrary(const AmdsmiLibrary&) = delete;
  AmdsmiLibrary& operator=(const AmdsmiLibrary&) = delete;

  const AmdsmiApi& api() const { return api_; }
  const std::string& path() const { return path_; }
  Abi abi() const { return abi_; }
  const std::string& version() const { return version_; }  // "26.0.1"
  bool serializes_calls() const { return serialize_; }
  const std::vector<std::string>& missing_optional() const { return missing_optional_; }
  std::string status_string(amdsmi_status_t status) const;

  // Holds the library's lock for its lifetime where the version needs one.
  class Call {
   public:
    explicit Call(const AmdsmiLibrary& lib);

   private:
    std::unique_lock<std::mutex> lock_;
  };

  // amdsmi_get_power_info, decoded for this ABI; a field at 0xFFFF or UINT32_MAX is absent.
  // Caller holds a Call.
  amdsmi_status_t power_info(amdsmi_processor_handle handle, SocketPower* out) const;

 private:
  void check_version();
  std::unique_ptr<DynamicLibrary> library_;
  std::string path_;
  Abi abi_ = Abi::k26;
  std::string version_;
  bool serialize_ = true;
  AmdsmiApi api_;
  std::vector<std::string> missing_optional_;
};

// The one checker for AMD SMI status codes: throws the typed error for `status` (PermissionError,
// NotSupported, DeviceLost, ConfigError, DeviceError) naming `function`, `where` (e.g. "AMD GPU 0
// (GPU-..., AMD Instinct MI300X)") and the library's text. Returns on AMDSMI_STATUS_SUCCESS.
void check_amdsmi(const AmdsmiLibrary& lib, amdsmi_status_t status, std::string_view function,
                  std::string_view where);

}  // namespace zeus::device::amdsmi
