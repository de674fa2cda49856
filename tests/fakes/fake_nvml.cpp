// A fake libnvidia-ml.so.1 for tests: implements the NVML functions zeus-cpp calls, backed by a
// JSON state file named by $FAKE_NVML_STATE:
//   {"gpus": [{"name", "uuid", "power_mw", "energy_mj", "limit_mw", "min_limit_mw",
//              "max_limit_mw", "default_limit_mw", "instant_power", "energy_counter",
//              "mig_uuids": ["MIG-..."], "persistence_mode": false, "pci_bus": 1,
//              "processes": [pid, ...], "gpu_locked_clocks": [min, max] | null,
//              "mem_locked_clocks": [min, max] | null,
//              "temperature_c": 45, "sm_clock_mhz": 1410, "mem_clock_mhz": 1215,
//              "throttle_power_ns": 0, "throttle_thermal_ns": 0,
//              "faults": {"set_error": 0, "read_error": 0}}],
//    "permissive": false,
//    "faults": {"init_error": 0, "set_no_permission": false, "lost_after_calls": -1,
//               "lost_when_exists": ""},
//    "limit_history": [{"gpu": 0, "limit_mw": 150000, "pid": 123}],
//    "settings_history": [{"gpu": 0, "setting": "persistence_mode", "value": 1, "pid": 123}]}
// Like the driver, it is one machine for every process: each call re-reads the file when it
// changed (inode, size or mtime), and every successful set is written back under a lock file
// (read-modify-write, then rename), so what one process set is what every other reads, and a
// test can assert after the setter is gone which settings were made and restored.
// Like the real library, setters refuse a process whose euid is not 0 (NO_PERMISSION), unless
// the state says "permissive" (tests whose unprivileged processes set limits directly).
// Energy grows at power_mw from init.
// A container's view: $FAKE_NVML_VISIBLE_UUIDS (a comma list of UUIDs) makes this process's NVML
// list only those GPUs, numbered from 0 in the machine's order, as NVIDIA's container runtime
// shows a pod only the GPUs its device plugin gave it; every other process (zeusd) sees the
// whole machine. Unset: every GPU.
// Faults: init_error (nvmlInit returns it), set_no_permission (sets return NO_PERMISSION),
// lost_after_calls (device calls after that many return GPU_IS_LOST), lost_when_exists (device
// calls return GPU_IS_LOST once that file exists: a test loses the GPU when it chooses, without
// counting how many calls zeus-cpp makes); per GPU, set_error and read_error (an NVML return code
// that its setters, or its readers, return), and set_error_to ({"limit_mw", "error"}: only a
// power limit set to that value fails: a restore to the site's limit). Built twice: in full, and
// with FAKE_NVML_MINIMAL (only unversioned names, no energy counter, no field values, none of the
// daemon's calls) for the "missing optional symbol" paths. Nothing throws across the C ABI.
// Telemetry a GPU's entry lacks (temperature, clocks, throttle counters) reads NOT_SUPPORTED,
// as on a GPU without that sensor.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fake_state_file.h"
#include "zeus/device/nvml/nvml_api.h"

namespace {

struct FakeState : fake_state::StateFile {
  std::mutex mu;
  std::chrono::steady_clock::time_point init_time;
  std::atomic<long> device_calls{0};
  bool initialized = false;
  int init_count = 0;  // NVML counts nvmlInit calls; nvmlShutdown shuts down at zero
};

FakeState& fake() {
  static FakeState s;
  return s;
}

// The state's GPU indices this process sees, in order ($FAKE_NVML_VISIBLE_UUIDS; all without it).
std::vector<size_t> visible_gpus() {
  const auto& gpus = fake().state["gpus"];
  std::vector<size_t> out;
  const char* env = std::getenv("FAKE_NVML_VISIBLE_UUIDS");
  const std::string wanted = env != nullptr ? "," + std::string(env) + "," : "";
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (wanted.empty() ||
        wanted.find("," + gpus[i].value("uuid", std::string()) + ",") != std::string::npos) {
      out.push_back(i);
    }
  }
  return out;
}

// Resolves a handle to its GPU index, counting the call for the GPU-lost fault.
nvmlReturn_t enter(nvmlDevice_t device, size_t* index) {
  FakeState& f = fake();
  if (!f.initialized) {
    return NVML_ERROR_UNINITIALIZED;
  }
  f.refresh();
  const auto i = reinterpret_cast<uintptr_t>(device);
  if (i == 0 || i > f.state["gpus"].size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const long lost_after = f.state["faults"].value("lost_after_calls", -1L);
  const long calls = ++f.device_calls;
  if (lost_after >= 0 && calls > lost_after) {
    return NVML_ERROR_GPU_IS_LOST;
  }
  const std::string lost_flag = f.state["faults"].value("lost_when_exists", "");
  if (!lost_flag.empty() && ::access(lost_flag.c_str(), F_OK) == 0) {
    return NVML_ERROR_GPU_IS_LOST;
  }
  *index = i - 1;
  return NVML_SUCCESS;
}

template <typename F>
nvmlReturn_t guarded(F body) {
  try {
    return body();
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

nvmlReturn_t copy_string(const std::string& value, char* buf, unsigned int len) {
  if (buf == nullptr || value.size() + 1 > len) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  std::memcpy(buf, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

// Runs body(index) under the lock for a valid device that is not lost; nothing throws out.
template <typename F>
nvmlReturn_t with_gpu(nvmlDevice_t device, F body) {
  return guarded([&]() -> nvmlReturn_t {
    std::lock_guard lock(fake().mu);
    size_t i = 0;
    if (const nvmlReturn_t rc = enter(device, &i); rc != NVML_SUCCESS) {
      return rc;
    }
    return body(i);
  });
}

// A reader: body(index) unless the GPU's read_error fault is set.
template <typename F>
nvmlReturn_t read_gpu(nvmlDevice_t device, F body) {
  return with_gpu(device, [&](size_t i) -> nvmlReturn_t {
    const int err = fake().state["gpus"][i].value("/faults/read_error"_json_pointer, 0);
    return err != 0 ? err : body(i);
  });
}

// A setter: checks privileges and faults, then applies `mutate(gpu_json)` to the file on disk
// (read-modify-write under a lock, so several processes' sets all land) and to this process's
// copy. `check(gpu_json)` may refuse the value first (INVALID_ARGUMENT, say).
template <typename Check, typename Mutate>
nvmlReturn_t set_gpu(nvmlDevice_t device, Check check, Mutate mutate) {
  return with_gpu(device, [&](size_t i) -> nvmlReturn_t {
    FakeState& f = fake();
    if (f.state["faults"].value("set_no_permission", false)) {
      return NVML_ERROR_NO_PERMISSION;
    }
    if (::geteuid() != 0 && !f.state.value("permissive", false)) {
      return NVML_ERROR_NO_PERMISSION;  // as the driver: setting needs root
    }
    if (const int err = f.state["gpus"][i].value("/faults/set_error"_json_pointer, 0); err != 0) {
      return err;
    }
    if (const nvmlReturn_t rc = check(f.state["gpus"][i]); rc != NVML_SUCCESS) {
      return rc;
    }
    if (!f.update([&](nlohmann::json& on_disk) { mutate(on_disk, i); })) {
      return NVML_ERROR_UNKNOWN;
    }
    return NVML_SUCCESS;
  });
}

[[maybe_unused]] void record_setting(nlohmann::json& state, size_t gpu, const char* setting,
                                     const nlohmann::json& value) {
  state["settings_history"].push_back(
      {{"gpu", gpu}, {"setting", setting}, {"value", value}, {"pid", ::getpid()}});
}

template <typename T>
nvmlReturn_t get_field(nvmlDevice_t device, const char* key, T* out) {
  return read_gpu(device, [&](size_t i) {
    if (out == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    *out = fake().state["gpus"][i].at(key).template get<T>();
    return NVML_SUCCESS;
  });
}

// A telemetry reading the GPU may lack: NOT_SUPPORTED when its entry has no `key`.
template <typename T>
nvmlReturn_t get_optional_field(nvmlDevice_t device, const char* key, T* out) {
  return read_gpu(device, [&](size_t i) {
    const auto& gpu = fake().state["gpus"][i];
    if (out == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (!gpu.contains(key)) {
      return NVML_ERROR_NOT_SUPPORTED;
    }
    *out = gpu.at(key).template get<T>();
    return NVML_SUCCESS;
  });
}

nvmlReturn_t get_string_field(nvmlDevice_t device, const char* key, char* buf, unsigned int len) {
  std::string value;
  if (const nvmlReturn_t rc = get_field(device, key, &value); rc != NVML_SUCCESS) {
    return rc;
  }
  return copy_string(value, buf, len);
}

}  // namespace

extern "C" {

#define FAKE_EXPORT __attribute__((visibility("default")))

#ifdef FAKE_NVML_MINIMAL
#define FAKE_VERSIONED(name) name
#else
#define FAKE_VERSIONED(name) name##_v2
#endif

FAKE_EXPORT nvmlReturn_t FAKE_VERSIONED(nvmlInit)() {
  return guarded([] {
    FakeState& f = fake();
    std::lock_guard lock(f.mu);
    if (f.initialized) {
      ++f.init_count;  // as NVML: a second init in one process shares the first
      return NVML_SUCCESS;
    }
    const char* path = std::getenv("FAKE_NVML_STATE");
    if (path == nullptr) {
      return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    f.path = path;
    f.inode = 0;
    f.refresh();
    if (const int err = f.state["faults"].value("init_error", 0); err != 0) {
      return err;
    }
    f.init_time = std::chrono::steady_clock::now();
    f.device_calls = 0;
    f.initialized = true;
    f.init_count = 1;
    return NVML_SUCCESS;
  });
}

#ifndef FAKE_NVML_MINIMAL
// What pynvml (upstream Zeus's NVML binding) calls where zeus-cpp calls nvmlInit_v2, so that
// upstream runs on this fake too (bench/python_optimizer).
FAKE_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) {
  return nvmlInit_v2();
}

// NVML_DEVICE_ARCH_AMPERE (7): the fake GPUs are A40s. Upstream reads it to choose how to read
// power.
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int* arch) {
  unsigned int ignored = 0;
  const nvmlReturn_t rc = get_field(device, "power_mw", &ignored);  // validates the handle
  if (rc == NVML_SUCCESS) {
    *arch = 7;
  }
  return rc;
}
#endif

FAKE_EXPORT nvmlReturn_t nvmlShutdown() {
  std::lock_guard lock(fake().mu);
  if (!fake().initialized) {
    return NVML_ERROR_UNINITIALIZED;
  }
  fake().initialized = --fake().init_count > 0;
  return NVML_SUCCESS;
}

FAKE_EXPORT const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

FAKE_EXPORT nvmlReturn_t FAKE_VERSIONED(nvmlDeviceGetCount)(unsigned int* count) {
  return guarded([&] {
    std::lock_guard lock(fake().mu);
    if (!fake().initialized) {
      return NVML_ERROR_UNINITIALIZED;
    }
    fake().refresh();
    *count = static_cast<unsigned int>(visible_gpus().size());
    return NVML_SUCCESS;
  });
}

FAKE_EXPORT nvmlReturn_t FAKE_VERSIONED(nvmlDeviceGetHandleByIndex)(unsigned int index,
                                                                    nvmlDevice_t* device) {
  return guarded([&] {
    std::lock_guard lock(fake().mu);
    if (!fake().initialized) {
      return NVML_ERROR_UNINITIALIZED;
    }
    const std::vector<size_t> visible = visible_gpus();
    if (index >= visible.size() || device == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    *device = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(visible[index]) + 1);
    return NVML_SUCCESS;
  });
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int len) {
  return get_string_field(device, "name", name, len);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int len) {
  return get_string_field(device, "uuid", uuid, len);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* mw) {
  return get_field(device, "power_mw", mw);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int* mw) {
  return get_field(device, "limit_mw", mw);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                                  unsigned int* mw) {
  return get_field(device, "default_limit_mw", mw);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
                                                                      unsigned int* min_mw,
                                                                      unsigned int* max_mw) {
  if (const nvmlReturn_t rc = get_field(device, "min_limit_mw", min_mw); rc != NVML_SUCCESS) {
    return rc;
  }
  return get_field(device, "max_limit_mw", max_mw);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int mw) {
  return set_gpu(
      device,
      [&](const nlohmann::json& gpu) {
        // faults.set_error_to: {"limit_mw": X, "error": C}: a set to exactly X fails with C (a
        // restore to the site's limit, while every other set lands).
        const auto to = gpu.value("/faults/set_error_to"_json_pointer, nlohmann::json());
        if (to.is_object() && to.value("limit_mw", 0U) == mw) {
          return static_cast<nvmlReturn_t>(to.value("error", 999));
        }
        return mw < gpu.at("min_limit_mw").get<unsigned>() ||
                       mw > gpu.at("max_limit_mw").get<unsigned>()
                   ? NVML_ERROR_INVALID_ARGUMENT
                   : NVML_SUCCESS;
      },
      [&](nlohmann::json& state, size_t i) {
        state["gpus"][i]["limit_mw"] = mw;
        if (state.value("record_history", true)) {  // off: a benchmark's thousands of sets
          state["limit_history"].push_back({{"gpu", i}, {"limit_mw", mw}, {"pid", ::getpid()}});
        }
      });
}

#ifndef FAKE_NVML_MINIMAL
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                             unsigned long long* energy_mj) {
  return read_gpu(device, [&](size_t i) {
    FakeState& f = fake();
    const auto& gpu = f.state["gpus"][i];
    if (!gpu.value("energy_counter", true)) {
      return NVML_ERROR_NOT_SUPPORTED;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - f.init_time).count();
    *energy_mj = gpu.value("energy_mj", 0ULL) +
                 static_cast<unsigned long long>(gpu.at("power_mw").get<double>() * seconds);
    return NVML_SUCCESS;
  });
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count,
                                                  nvmlFieldValue_t* values) {
  return read_gpu(device, [&](size_t i) {
    FakeState& f = fake();
    const auto& gpu = f.state["gpus"][i];
    for (int k = 0; k < count; ++k) {
      nvmlFieldValue_t& v = values[k];
      const char* counter = v.fieldId == kNvmlFieldThrottlePowerNs     ? "throttle_power_ns"
                            : v.fieldId == kNvmlFieldThrottleThermalNs ? "throttle_thermal_ns"
                                                                       : nullptr;
      if (counter != nullptr) {
        v.nvmlReturn = gpu.contains(counter) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
        v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        v.value.ullVal = gpu.value(counter, 0ULL);
        continue;
      }
      if (v.fieldId != kNvmlFieldPowerInstant || !gpu.value("instant_power", true)) {
        v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        continue;
      }
      v.nvmlReturn = NVML_SUCCESS;
      v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
      // The instant field reads 1 W above the averaged one, so tests can tell which was used.
      v.value.uiVal = gpu.at("power_mw").get<unsigned>() + 1000;
    }
    return NVML_SUCCESS;
  });
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor,
                                                  unsigned int* celsius) {
  return sensor == kNvmlTemperatureGpu ? get_optional_field(device, "temperature_c", celsius)
                                       : NVML_ERROR_INVALID_ARGUMENT;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int* mhz) {
  switch (type) {
    case kNvmlClockSm:
      return get_optional_field(device, "sm_clock_mhz", mhz);
    case kNvmlClockMem:
      return get_optional_field(device, "mem_clock_mhz", mhz);
    default:
      return NVML_ERROR_NOT_SUPPORTED;
  }
}

// MIG instances: handle = (gpu + 1) | (instance + 1) << 16, valid only for these two calls.
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  return guarded([&] {
    std::lock_guard lock(fake().mu);
    if (!fake().initialized) {
      return NVML_ERROR_UNINITIALIZED;
    }
    if (uuid == nullptr || device == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    const auto& gpus = fake().state["gpus"];
    for (const size_t i : visible_gpus()) {
      if (gpus[i].at("uuid").get<std::string>() == uuid) {
        *device = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(i) + 1);
        return NVML_SUCCESS;
      }
      const auto migs = gpus[i].value("mig_uuids", nlohmann::json::array());
      for (size_t k = 0; k < migs.size(); ++k) {
        if (migs[k].get<std::string>() == uuid) {
          *device = reinterpret_cast<nvmlDevice_t>((static_cast<uintptr_t>(i) + 1) |
                                                   ((static_cast<uintptr_t>(k) + 1) << 16));
          return NVML_SUCCESS;
        }
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig,
                                                                      nvmlDevice_t* device) {
  const auto h = reinterpret_cast<uintptr_t>(mig);
  if ((h >> 16) == 0 || device == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;  // not a MIG handle
  }
  *device = reinterpret_cast<nvmlDevice_t>(h & 0xffff);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
                                                      nvmlEnableState_t* mode) {
  return read_gpu(device, [&](size_t i) {
    if (mode == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    *mode = fake().state["gpus"][i].value("persistence_mode", false) ? 1 : 0;
    return NVML_SUCCESS;
  });
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceSetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t mode) {
  return set_gpu(
      device,
      [&](const nlohmann::json&) {
        return mode == 0 || mode == 1 ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
      },
      [&](nlohmann::json& state, size_t i) {
        state["gpus"][i]["persistence_mode"] = mode == 1;
        record_setting(state, i, "persistence_mode", mode);
      });
}

// Bus i + 1 on domain 0 unless the state names one ("pci_bus").
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return read_gpu(device, [&](size_t i) {
    if (pci == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    *pci = nvmlPciInfo_t{};
    pci->domain = 0;
    pci->bus = fake().state["gpus"][i].value("pci_bus", static_cast<unsigned>(i + 1));
    pci->device = 0;
    pci->pciDeviceId = 0x223510de;
    std::snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", pci->domain, pci->bus,
                  pci->device);
    std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", pci->domain,
                  pci->bus, pci->device);
    return NVML_SUCCESS;
  });
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                 unsigned int* count,
                                                                 nvmlProcessInfo_t* infos) {
  return read_gpu(device, [&](size_t i) {
    if (count == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    const auto pids = fake().state["gpus"][i].value("processes", nlohmann::json::array());
    const auto n = static_cast<unsigned>(pids.size());
    if (infos == nullptr || *count < n) {
      *count = n;
      return n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned k = 0; k < n; ++k) {
      infos[k] = nvmlProcessInfo_t{pids[k].get<unsigned>(), 1ULL << 30, 0xFFFFFFFFu, 0xFFFFFFFFu};
    }
    *count = n;
    return NVML_SUCCESS;
  });
}

namespace {
nvmlReturn_t set_clocks(nvmlDevice_t device, const char* key, std::optional<unsigned> min_mhz,
                        std::optional<unsigned> max_mhz) {
  return set_gpu(
      device,
      [&](const nlohmann::json&) {
        return min_mhz && *min_mhz > *max_mhz ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS;
      },
      [&](nlohmann::json& state, size_t i) {
        const nlohmann::json value =
            min_mhz ? nlohmann::json::array({*min_mhz, *max_mhz}) : nlohmann::json(nullptr);
        state["gpus"][i][key] = value;
        record_setting(state, i, key, value);
      });
}
}  // namespace

FAKE_EXPORT nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned int min_mhz,
                                                      unsigned int max_mhz) {
  return set_clocks(device, "gpu_locked_clocks", min_mhz, max_mhz);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device) {
  return set_clocks(device, "gpu_locked_clocks", std::nullopt, std::nullopt);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device, unsigned int min_mhz,
                                                         unsigned int max_mhz) {
  return set_clocks(device, "mem_locked_clocks", min_mhz, max_mhz);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device) {
  return set_clocks(device, "mem_locked_clocks", std::nullopt, std::nullopt);
}
#endif

}  // extern "C"
