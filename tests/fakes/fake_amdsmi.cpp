// A fake libamd_smi.so for tests: the AMD SMI functions zeus-cpp and upstream Zeus call, in AMD's
// structure layouts (ABI 26 unless the state's version says 24 or 25), backed by a JSON state
// file named by $FAKE_AMDSMI_STATE, shared by every process as the NVML fake's is
// (fake_state_file.h):
//   {"lib_version": {"major": 26, "minor": 1, "release": 0} | {"year": 25, "major": 0, ...},
//    "gpus": [{"name", "uuid", "bdf": "0000:0c:00.0", "hip_id": 0, "kfd_node_id": 2,
//              "power_w": 300, "average_w": 290, "power_available": true,
//              "current_available": true, "energy_counter": true, "energy_uj": 0,
//              "energy_resolution_uj": 15.3, "energy_rate": 1.0,
//              "cap_uw", "min_cap_uw", "max_cap_uw", "default_cap_uw",
//              "temperature_c": 45, "gfx_clk": {"cur", "min", "max", "hw_min", "hw_max"},
//              "mem_clk": {...}, "unexpected_data": false, "processes": [pid, ...],
//              "faults": {"set_error": 0, "read_error": 0}}],
//    "permissive": false, "record_history": true,
//    "faults": {"init_error": 0, "lost_when_exists": "", "no_enumeration_info": false},
//    "limit_history": [{"gpu": 0, "cap_uw": 500000000, "pid": 123}],
//    "settings_history": [...]}
// One socket per GPU, as on Instinct parts. Energy grows at energy_rate x power_w from amdsmi_init
// (a rate far from 1 is the counter that runs at the wrong rate); power_available false is an
// MI250 odd die (0xFFFF powers, no counter); unexpected_data makes power reads answer
// UNEXPECTED_DATA (a library older than the GPU). Setters refuse a non-root euid (NO_PERM)
// unless "permissive". Every other function AMD's `amdsmi` 7.0.2 Python package binds is
// exported by fake_amdsmi_stubs.cpp (generated) and answers NOT_SUPPORTED. Nothing throws across
// the C ABI.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "fake_state_file.h"
#include "zeus/device/amdsmi/amdsmi_api.h"

namespace {

struct FakeState : fake_state::StateFile {
  std::mutex mu;
  std::chrono::steady_clock::time_point init_time;
  bool initialized = false;
  int init_count = 0;  // as the library: amdsmi_shut_down ends it at the last one
};

FakeState& fake() {
  static FakeState s;
  return s;
}

constexpr uintptr_t kSocketBase = 0x5000;

template <typename F>
amdsmi_status_t guarded(F body) {
  try {
    return body();
  } catch (...) {
    return AMDSMI_STATUS_UNKNOWN_ERROR;
  }
}

// Runs body(index) under the lock for a valid processor handle that is not lost.
template <typename F>
amdsmi_status_t with_gpu(amdsmi_processor_handle handle, F body) {
  return guarded([&]() -> amdsmi_status_t {
    FakeState& f = fake();
    std::lock_guard lock(f.mu);
    if (!f.initialized) {
      return AMDSMI_STATUS_NOT_INIT;
    }
    f.refresh();
    const auto i = reinterpret_cast<uintptr_t>(handle);
    if (i == 0 || i > f.state["gpus"].size()) {
      return AMDSMI_STATUS_INVAL;
    }
    const std::string lost_flag = f.state["faults"].value("lost_when_exists", "");
    if (!lost_flag.empty() && ::access(lost_flag.c_str(), F_OK) == 0) {
      return AMDSMI_STATUS_NOT_FOUND;
    }
    return body(static_cast<size_t>(i - 1));
  });
}

template <typename F>
amdsmi_status_t read_gpu(amdsmi_processor_handle handle, F body) {
  return with_gpu(handle, [&](size_t i) -> amdsmi_status_t {
    const auto err = fake().state["gpus"][i].value("/faults/read_error"_json_pointer, 0U);
    return err != 0 ? err : body(fake().state["gpus"][i]);
  });
}

// A setter: privileges and faults first, then mutate(state, index) on the shared file.
template <typename Check, typename Mutate>
amdsmi_status_t set_gpu(amdsmi_processor_handle handle, Check check, Mutate mutate) {
  return with_gpu(handle, [&](size_t i) -> amdsmi_status_t {
    FakeState& f = fake();
    if (::geteuid() != 0 && !f.state.value("permissive", false)) {
      return AMDSMI_STATUS_NO_PERM;  // as the driver: setting needs root
    }
    if (const auto err = f.state["gpus"][i].value("/faults/set_error"_json_pointer, 0U); err != 0) {
      return err;
    }
    if (const amdsmi_status_t rc = check(f.state["gpus"][i]); rc != AMDSMI_STATUS_SUCCESS) {
      return rc;
    }
    return f.update([&](nlohmann::json& on_disk) { mutate(on_disk, i); })
               ? AMDSMI_STATUS_SUCCESS
               : AMDSMI_STATUS_UNKNOWN_ERROR;
  });
}

// The ABI the fake plays: the reported version's.
int fake_abi() {
  const auto& v = fake().state.value("lib_version", nlohmann::json::object());
  if (v.contains("year")) {
    return v["year"].get<int>() == 24 ? 24 : 25;
  }
  return 26;
}

uint32_t power_field(const nlohmann::json& gpu, const char* key, bool available) {
  if (!available || !gpu.value("power_available", true)) {
    return kAmdsmiPowerNotAvailable16;
  }
  return gpu.value(key, gpu.value("power_w", 0U));
}

double seconds_since_init() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - fake().init_time).count();
}

}  // namespace

extern "C" {

#define FAKE_EXPORT __attribute__((visibility("default")))

FAKE_EXPORT amdsmi_status_t amdsmi_init(uint64_t flags) {
  return guarded([&]() -> amdsmi_status_t {
    FakeState& f = fake();
    std::lock_guard lock(f.mu);
    if ((flags & AMDSMI_INIT_AMD_GPUS) == 0) {
      return AMDSMI_STATUS_SUCCESS;  // no GPUs asked for: nothing to do
    }
    const char* path = std::getenv("FAKE_AMDSMI_STATE");
    if (path == nullptr) {
      return AMDSMI_STATUS_DRIVER_NOT_LOADED;
    }
    if (f.path != path) {
      f.path = path;
      f.inode = 0;
    }
    f.refresh();
    if (const auto err = f.state["faults"].value("init_error", 0U); err != 0) {
      return err;
    }
    if (!f.initialized) {
      f.init_time = std::chrono::steady_clock::now();
      f.init_count = 0;
    }
    f.initialized = true;
    ++f.init_count;
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_shut_down() {
  std::lock_guard lock(fake().mu);
  if (!fake().initialized) {
    return AMDSMI_STATUS_NOT_INIT;
  }
  fake().initialized = --fake().init_count > 0;
  return AMDSMI_STATUS_SUCCESS;
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_lib_version(void* out) {
  return guarded([&]() -> amdsmi_status_t {
    FakeState& f = fake();
    std::lock_guard lock(f.mu);
    // The version is readable before amdsmi_init, as the real library's is.
    if (const char* path = std::getenv("FAKE_AMDSMI_STATE"); path != nullptr && f.path != path) {
      f.path = path;
      f.inode = 0;
    }
    f.refresh();
    const auto v = f.state.value("lib_version", nlohmann::json{{"major", 26}, {"minor", 1}});
    static const char kBuild[] = "fake";
    if (v.contains("year")) {
      amdsmi_version_abi25_t out25{v["year"].get<uint32_t>(), v.value("major", 0U),
                                   v.value("minor", 0U), v.value("release", 0U), kBuild};
      std::memcpy(out, &out25, sizeof(out25));
    } else {
      amdsmi_version_abi26_t out26{};
      out26.major = v.value("major", 26U);
      out26.minor = v.value("minor", 1U);
      out26.release = v.value("release", 0U);
      out26.build = kBuild;
      std::memcpy(out, &out26, sizeof(out26));
    }
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_status_code_to_string(amdsmi_status_t status,
                                                         const char** text) {
  switch (status) {
    case AMDSMI_STATUS_SUCCESS:
      *text = "AMDSMI_STATUS_SUCCESS: Call succeeded";
      break;
    case AMDSMI_STATUS_INVAL:
      *text = "AMDSMI_STATUS_INVAL: Invalid parameters";
      break;
    case AMDSMI_STATUS_NOT_SUPPORTED:
      *text = "AMDSMI_STATUS_NOT_SUPPORTED: Command not supported";
      break;
    case AMDSMI_STATUS_NO_PERM:
      *text = "AMDSMI_STATUS_NO_PERM: Permission Denied";
      break;
    case AMDSMI_STATUS_NOT_FOUND:
      *text = "AMDSMI_STATUS_NOT_FOUND: Device Not found";
      break;
    case AMDSMI_STATUS_UNEXPECTED_DATA:
      *text = "AMDSMI_STATUS_UNEXPECTED_DATA: The data read or provided was unexpected";
      break;
    default:
      *text = "AMDSMI_STATUS_UNKNOWN_ERROR: An unknown error occurred";
  }
  return AMDSMI_STATUS_SUCCESS;
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_socket_handles(uint32_t* count,
                                                      amdsmi_socket_handle* sockets) {
  return guarded([&]() -> amdsmi_status_t {
    FakeState& f = fake();
    std::lock_guard lock(f.mu);
    if (!f.initialized) {
      return AMDSMI_STATUS_NOT_INIT;
    }
    f.refresh();
    const auto n = static_cast<uint32_t>(f.state["gpus"].size());
    if (sockets != nullptr) {
      for (uint32_t s = 0; s < std::min(*count, n); ++s) {
        sockets[s] = reinterpret_cast<amdsmi_socket_handle>(kSocketBase + s + 1);
      }
    }
    *count = n;
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_processor_handles(amdsmi_socket_handle socket,
                                                         uint32_t* count,
                                                         amdsmi_processor_handle* out) {
  return guarded([&]() -> amdsmi_status_t {
    FakeState& f = fake();
    std::lock_guard lock(f.mu);
    const auto s = reinterpret_cast<uintptr_t>(socket);
    if (!f.initialized) {
      return AMDSMI_STATUS_NOT_INIT;
    }
    if (s <= kSocketBase || s > kSocketBase + f.state["gpus"].size()) {
      return AMDSMI_STATUS_INVAL;
    }
    if (out != nullptr && *count >= 1) {
      out[0] = reinterpret_cast<amdsmi_processor_handle>(s - kSocketBase);
    }
    *count = 1;
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_device_uuid(amdsmi_processor_handle h, uint32_t* len,
                                                       char* uuid) {
  return read_gpu(h, [&](const nlohmann::json& gpu) -> amdsmi_status_t {
    const std::string value = gpu.value("uuid", "");
    if (value.size() + 1 > *len) {
      *len = static_cast<uint32_t>(value.size() + 1);
      return AMDSMI_STATUS_INSUFFICIENT_SIZE;
    }
    std::memcpy(uuid, value.c_str(), value.size() + 1);
    *len = static_cast<uint32_t>(value.size());
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_device_bdf(amdsmi_processor_handle h, uint64_t* bdf) {
  return read_gpu(h, [&](const nlohmann::json& gpu) -> amdsmi_status_t {
    unsigned domain = 0;
    unsigned bus = 0;
    unsigned device = 0;
    unsigned function = 0;
    const std::string text = gpu.value("bdf", "0000:00:00.0");
    if (std::sscanf(text.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) {
      return AMDSMI_STATUS_UNKNOWN_ERROR;
    }
    *bdf = (uint64_t{domain} << 16U) | (uint64_t{bus} << 8U) | (uint64_t{device} << 3U) | function;
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_asic_info(amdsmi_processor_handle h, void* info) {
  return read_gpu(h, [&](const nlohmann::json& gpu) -> amdsmi_status_t {
    // AMD's structure is at most 896 bytes (ABI 26); only market_name (offset 0) is modeled.
    std::memset(info, 0, 896);
    std::snprintf(static_cast<char*>(info), 256, "%s", gpu.value("name", "").c_str());
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_enumeration_info(amdsmi_processor_handle h,
                                                            amdsmi_enumeration_info_t* info) {
  return read_gpu(h, [&](const nlohmann::json& gpu) -> amdsmi_status_t {
    if (fake().state["faults"].value("no_enumeration_info", false)) {
      return AMDSMI_STATUS_NOT_SUPPORTED;  // ROCm 6.3's library
    }
    *info = {};
    info->hip_id = gpu.value("hip_id", 0U);
    info->hsa_id = info->hip_id;
    info->drm_card = info->hip_id;
    info->drm_render = 128 + info->hip_id;
    std::snprintf(info->hip_uuid, sizeof(info->hip_uuid), "%s", gpu.value("uuid", "").c_str());
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_kfd_info(amdsmi_processor_handle h,
                                                    amdsmi_kfd_info_t* info) {
  return read_gpu(h, [&](const nlohmann::json& gpu) -> amdsmi_status_t {
    *info = {};
    info->node_id = gpu.value("kfd_node_id", gpu.value("hip_id", 0U) + 1);
    info->kfd_id = info->node_id * 1000;
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_power_info(amdsmi_processor_handle h, void* out) {
  return read_gpu(h, [&](const nlohmann::json& gpu) -> amdsmi_status_t {
    if (gpu.value("unexpected_data", false)) {
      return AMDSMI_STATUS_UNEXPECTED_DATA;
    }
    const uint32_t current = power_field(gpu, "power_w", gpu.value("current_available", true));
    const uint32_t average = power_field(gpu, "average_w", true);
    const auto limit_uw = static_cast<uint32_t>(gpu.value("cap_uw", 0ULL));
    switch (fake_abi()) {
      case 24: {
        amdsmi_power_info_abi24_t p{};
        p.current_socket_power = current;
        p.average_socket_power = average;
        p.power_limit = limit_uw;
        std::memcpy(out, &p, sizeof(p));
        break;
      }
      case 25: {
        amdsmi_power_info_abi25_t p{};
        p.socket_power = current;
        p.current_socket_power = current;
        p.average_socket_power = average;
        p.power_limit = limit_uw;
        std::memcpy(out, &p, sizeof(p));
        break;
      }
      default: {
        amdsmi_power_info_abi26_t p{};
        p.socket_power = current;
        p.current_socket_power = current;
        p.average_socket_power = average;
        p.power_limit = limit_uw;
        std::memcpy(out, &p, sizeof(p));
      }
    }
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_energy_count(amdsmi_processor_handle h,
                                                    uint64_t* accumulator, float* resolution_uj,
                                                    uint64_t* timestamp_ns) {
  return read_gpu(h, [&](const nlohmann::json& gpu) -> amdsmi_status_t {
    if (!gpu.value("energy_counter", true) || !gpu.value("power_available", true)) {
      return AMDSMI_STATUS_NOT_SUPPORTED;
    }
    const double seconds = seconds_since_init();
    const float resolution = gpu.value("energy_resolution_uj", 15.3F);
    const double uj = gpu.value("energy_uj", 0.0) +
                      gpu.value("energy_rate", 1.0) * gpu.value("power_w", 0.0) * 1e6 * seconds;
    *accumulator = static_cast<uint64_t>(uj / static_cast<double>(resolution));
    *resolution_uj = resolution;
    *timestamp_ns = static_cast<uint64_t>(seconds * 1e9);
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_power_cap_info(amdsmi_processor_handle h,
                                                      uint32_t /*sensor*/,
                                                      amdsmi_power_cap_info_t* info) {
  return read_gpu(h, [&](const nlohmann::json& gpu) -> amdsmi_status_t {
    *info = {};
    info->power_cap = gpu.at("cap_uw").get<uint64_t>();
    info->default_power_cap = gpu.at("default_cap_uw").get<uint64_t>();
    info->dpm_cap = 0;
    info->min_power_cap = gpu.at("min_cap_uw").get<uint64_t>();
    info->max_power_cap = gpu.at("max_cap_uw").get<uint64_t>();
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_set_power_cap(amdsmi_processor_handle h, uint32_t /*sensor*/,
                                                 uint64_t cap_uw) {
  return set_gpu(
      h,
      [&](const nlohmann::json& gpu) {
        // faults.set_error_to: {"cap_uw": X, "error": C}: a cap set to exactly X fails with C.
        const auto to = gpu.value("/faults/set_error_to"_json_pointer, nlohmann::json());
        if (to.is_object() && to.value("cap_uw", uint64_t{0}) == cap_uw) {
          return static_cast<amdsmi_status_t>(to.value("error", 8));
        }
        return cap_uw < gpu.at("min_cap_uw").get<uint64_t>() ||
                       cap_uw > gpu.at("max_cap_uw").get<uint64_t>()
                   ? AMDSMI_STATUS_INVAL
                   : AMDSMI_STATUS_SUCCESS;
      },
      [&](nlohmann::json& state, size_t i) {
        state["gpus"][i]["cap_uw"] = cap_uw;
        if (state.value("record_history", true)) {
          state["limit_history"].push_back({{"gpu", i}, {"cap_uw", cap_uw}, {"pid", ::getpid()}});
        }
      });
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_temp_metric(amdsmi_processor_handle h, uint32_t type,
                                                   uint32_t metric, int64_t* value) {
  return read_gpu(h, [&](const nlohmann::json& gpu) -> amdsmi_status_t {
    if (!gpu.contains("temperature_c") || metric != AMDSMI_TEMP_CURRENT ||
        (type != AMDSMI_TEMPERATURE_TYPE_HOTSPOT && type != AMDSMI_TEMPERATURE_TYPE_EDGE)) {
      return AMDSMI_STATUS_NOT_SUPPORTED;
    }
    *value = gpu["temperature_c"].get<int64_t>();  // degrees C, as AMD SMI gives them
    return AMDSMI_STATUS_SUCCESS;
  });
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_clock_info(amdsmi_processor_handle h, uint32_t type,
                                                  amdsmi_clk_info_t* info) {
  return read_gpu(h, [&](const nlohmann::json& gpu) -> amdsmi_status_t {
    const char* key = type == AMDSMI_CLK_TYPE_GFX   ? "gfx_clk"
                      : type == AMDSMI_CLK_TYPE_MEM ? "mem_clk"
                                                    : nullptr;
    if (key == nullptr || !gpu.contains(key)) {
      return AMDSMI_STATUS_NOT_SUPPORTED;
    }
    *info = {};
    info->clk = gpu[key].value("cur", 0U);
    info->min_clk = gpu[key].value("min", 0U);
    info->max_clk = gpu[key].value("max", 0U);
    return AMDSMI_STATUS_SUCCESS;
  });
}

// As the driver: a minimum above the current maximum, or a maximum below the current minimum,
// is refused, so the caller must write the bounds in the right order.
FAKE_EXPORT amdsmi_status_t amdsmi_set_gpu_clk_limit(amdsmi_processor_handle h, uint32_t type,
                                                     uint32_t limit, uint64_t mhz) {
  const char* key = type == AMDSMI_CLK_TYPE_GFX   ? "gfx_clk"
                    : type == AMDSMI_CLK_TYPE_MEM ? "mem_clk"
                                                  : nullptr;
  return set_gpu(
      h,
      [&](const nlohmann::json& gpu) {
        if (key == nullptr || !gpu.contains(key)) {
          return AMDSMI_STATUS_NOT_SUPPORTED;
        }
        const auto& c = gpu[key];
        const bool bad =
            limit == AMDSMI_CLK_LIMIT_MIN ? mhz > c.value("max", 0ULL) : mhz < c.value("min", 0ULL);
        return bad ? AMDSMI_STATUS_INVAL : AMDSMI_STATUS_SUCCESS;
      },
      [&](nlohmann::json& state, size_t i) {
        state["gpus"][i][key][limit == AMDSMI_CLK_LIMIT_MIN ? "min" : "max"] = mhz;
        state["settings_history"].push_back(
            {{"gpu", i},
             {"setting", std::string(key) + (limit == AMDSMI_CLK_LIMIT_MIN ? ".min" : ".max")},
             {"value", mhz},
             {"pid", ::getpid()}});
      });
}

FAKE_EXPORT amdsmi_status_t amdsmi_set_gpu_perf_level(amdsmi_processor_handle h, uint32_t level) {
  return set_gpu(
      h, [](const nlohmann::json&) { return AMDSMI_STATUS_SUCCESS; },
      [&](nlohmann::json& state, size_t i) {
        for (const char* key : {"gfx_clk", "mem_clk"}) {
          if (level != AMDSMI_DEV_PERF_LEVEL_AUTO || !state["gpus"][i].contains(key)) {
            continue;
          }
          auto& c = state["gpus"][i][key];
          {
            c["min"] = c.value("hw_min", c.value("min", 0U));
            c["max"] = c.value("hw_max", c.value("max", 0U));
          }
        }
        state["settings_history"].push_back(
            {{"gpu", i}, {"setting", "perf_level"}, {"value", level}, {"pid", ::getpid()}});
      });
}

// ABI 26's records; `count` in: the room, out: how many (OUT_OF_RESOURCES when they do not fit).
FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_process_list(amdsmi_processor_handle h, uint32_t* count,
                                                        void* list) {
  return read_gpu(h, [&](const nlohmann::json& gpu) -> amdsmi_status_t {
    const auto pids = gpu.value("processes", std::vector<uint32_t>{});
    const uint32_t room = *count;
    *count = static_cast<uint32_t>(pids.size());
    if (pids.size() > room) {
      return AMDSMI_STATUS_OUT_OF_RESOURCES;
    }
    auto* out = static_cast<amdsmi_proc_info_abi26_t*>(list);
    for (size_t k = 0; k < pids.size(); ++k) {
      out[k] = {};
      out[k].pid = pids[k];
      std::snprintf(out[k].name, sizeof(out[k].name), "python");
    }
    return AMDSMI_STATUS_SUCCESS;
  });
}

}  // extern "C"
