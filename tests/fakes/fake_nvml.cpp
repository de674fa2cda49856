// A fake libnvidia-ml.so.1 for tests: implements the NVML functions zeus-cpp calls, backed by a
// JSON state file named by $FAKE_NVML_STATE:
//   {"gpus": [{"name", "uuid", "power_mw", "energy_mj", "limit_mw", "min_limit_mw",
//              "max_limit_mw", "default_limit_mw", "instant_power", "energy_counter",
//              "mig_uuids": ["MIG-..."]}],
//    "faults": {"init_error": 0, "set_no_permission": false, "lost_after_calls": -1,
//               "lost_when_exists": ""},
//    "limit_history": [{"gpu": 0, "limit_mw": 150000, "pid": 123}]}
// The state is read at the first nvmlInit (later ones only count, as NVML's do, until as many
// nvmlShutdown calls). Every successful limit set is written back (current limit and
// an appended history entry) under a lock file, so a test can assert, after the process that
// set limits is gone, which limits were set and restored. Energy grows at power_mw from init.
// Faults: init_error (nvmlInit returns it), set_no_permission (sets return NO_PERMISSION),
// lost_after_calls (device calls after that many return GPU_IS_LOST), lost_when_exists (device
// calls return GPU_IS_LOST once that file exists: a test loses the GPU when it chooses, without
// counting how many calls zeus-cpp makes). Built twice: in full, and
// with FAKE_NVML_MINIMAL (only unversioned names, no energy counter, no field values) for the
// "missing optional symbol" paths. Nothing throws across the C ABI.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "zeus/device/nvml/nvml_api.h"

namespace {

struct FakeState {
  std::mutex mu;
  nlohmann::json state;
  std::string path;
  std::chrono::steady_clock::time_point init_time;
  std::atomic<long> device_calls{0};
  bool initialized = false;
  int init_count = 0;  // NVML counts nvmlInit calls; nvmlShutdown shuts down at zero
};

FakeState& fake() {
  static FakeState s;
  return s;
}

nlohmann::json read_state(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// Resolves a handle to its GPU index, counting the call for the GPU-lost fault.
nvmlReturn_t enter(nvmlDevice_t device, size_t* index) {
  FakeState& f = fake();
  if (!f.initialized) {
    return NVML_ERROR_UNINITIALIZED;
  }
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

template <typename T>
nvmlReturn_t get_field(nvmlDevice_t device, const char* key, T* out) {
  return with_gpu(device, [&](size_t i) {
    if (out == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    *out = fake().state["gpus"][i].at(key).template get<T>();
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
    f.state = read_state(f.path);
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
    *count = static_cast<unsigned int>(fake().state["gpus"].size());
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
    if (index >= fake().state["gpus"].size() || device == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    *device = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(index) + 1);
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
  return with_gpu(device, [&](size_t i) {
    FakeState& f = fake();
    if (f.state["faults"].value("set_no_permission", false)) {
      return NVML_ERROR_NO_PERMISSION;
    }
    const auto& gpu = f.state["gpus"][i];
    if (mw < gpu.at("min_limit_mw").get<unsigned>() ||
        mw > gpu.at("max_limit_mw").get<unsigned>()) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    // Read-modify-write the file under a lock, so several processes' sets all land.
    const std::string lock_path = f.path + ".lock";
    const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX) != 0) {
      return NVML_ERROR_UNKNOWN;
    }
    nlohmann::json on_disk = read_state(f.path);
    on_disk["gpus"][i]["limit_mw"] = mw;
    on_disk["limit_history"].push_back({{"gpu", i}, {"limit_mw", mw}, {"pid", ::getpid()}});
    const std::string tmp = f.path + ".tmp";
    {
      std::ofstream out(tmp);
      out << on_disk.dump(2);
    }
    const bool ok = std::rename(tmp.c_str(), f.path.c_str()) == 0;
    ::close(lock_fd);  // releases the lock
    if (!ok) {
      return NVML_ERROR_UNKNOWN;
    }
    f.state["gpus"][i]["limit_mw"] = mw;
    return NVML_SUCCESS;
  });
}

#ifndef FAKE_NVML_MINIMAL
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                             unsigned long long* energy_mj) {
  return with_gpu(device, [&](size_t i) {
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
  return with_gpu(device, [&](size_t i) {
    FakeState& f = fake();
    const auto& gpu = f.state["gpus"][i];
    for (int k = 0; k < count; ++k) {
      nvmlFieldValue_t& v = values[k];
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
    for (size_t i = 0; i < gpus.size(); ++i) {
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
#endif

}  // extern "C"
