#include "zeus/device/amdsmi/amdsmi_library.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <system_error>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::device::amdsmi {
namespace {

constexpr std::array kSonames{"libamd_smi.so.26", "libamd_smi.so.25", "libamd_smi.so.24"};

// "rocm-6.4.1" -> {6, 4, 1}; a name without numbers sorts first.
std::vector<int> version_of(std::string_view dir_name) {
  std::vector<int> parts;
  std::string_view rest = dir_name.substr(dir_name.find('-') + 1);
  while (!rest.empty()) {
    int value = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc()) {
      break;
    }
    parts.push_back(value);
    rest.remove_prefix(static_cast<size_t>(end - rest.data()));
    if (!rest.empty() && rest.front() == '.') {
      rest.remove_prefix(1);
    } else {
      break;
    }
  }
  return parts;
}

std::optional<std::filesystem::path> newest_versioned_rocm(const std::filesystem::path& opt) {
  std::error_code ec;
  std::optional<std::filesystem::path> best;
  std::vector<int> best_version;
  for (const auto& entry : std::filesystem::directory_iterator(opt, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rocm-", 0) != 0 || !entry.is_directory(ec)) {
      continue;
    }
    if (const auto v = version_of(name); !best || v > best_version) {
      best = entry.path();
      best_version = v;
    }
  }
  return best;
}

// The ABI a path's soname names, if it names one.
std::optional<Abi> abi_of(std::string_view path) {
  for (const Abi abi : {Abi::k24, Abi::k25, Abi::k26}) {
    if (path.ends_with(fmt::format("libamd_smi.so.{}", static_cast<int>(abi)))) {
      return abi;
    }
  }
  return std::nullopt;
}

}  // namespace

AmdsmiSearch AmdsmiSearch::from_env() {
  AmdsmiSearch s;
  s.override_path = get_env(kEnvAmdsmiLibrary);
  s.lib_dir = get_env(kEnvAmdsmiLibDir);
  s.rocm_path = get_env(kEnvRocmPath);
  return s;
}

std::vector<std::string> library_candidates(const AmdsmiSearch& search) {
  if (search.override_path) {
    return {*search.override_path};
  }
  std::vector<std::filesystem::path> dirs;
  if (search.lib_dir) {
    dirs.emplace_back(*search.lib_dir);
  }
  if (search.rocm_path) {
    dirs.push_back(std::filesystem::path(*search.rocm_path) / "lib");
  } else {
    dirs.push_back(search.opt_root / "rocm" / "lib");
    if (const auto newest = newest_versioned_rocm(search.opt_root)) {
      dirs.push_back(*newest / "lib");
    }
  }
  std::vector<std::string> out;
  for (const auto& dir : dirs) {
    for (const char* soname : kSonames) {
      out.push_back((dir / soname).string());
    }
  }
  for (const char* soname : kSonames) {
    out.emplace_back(soname);  // the loader's paths: LD_LIBRARY_PATH, ld.so.cache
  }
  return out;
}

AmdsmiLibrary::AmdsmiLibrary(AmdsmiLibraryOptions options) {
  const AmdsmiSearch search = options.search.value_or(AmdsmiSearch::from_env());
  const std::vector<std::string> candidates =
      options.path.empty() ? library_candidates(search) : std::vector<std::string>{options.path};
  library_ = std::make_unique<DynamicLibrary>(candidates);
  if (!library_->loaded()) {
    // Where it looked, once; dlopen's reasons only for files that exist but did not load.
    std::vector<std::string> places;
    for (const auto& c : candidates) {
      const std::string place = c.find('/') == std::string::npos
                                    ? std::string("the loader's paths")
                                    : std::filesystem::path(c).parent_path().string();
      if (std::find(places.begin(), places.end(), place) == places.end()) {
        places.push_back(place);
      }
    }
    std::vector<std::string> failed;
    for (const auto& e : library_->errors()) {
      if (e.find("No such file or directory") == std::string::npos) {
        failed.push_back(e);
      }
    }
    throw NotSupported(fmt::format(
        "cannot load AMD SMI: {} in {} ({}); install ROCm's amd-smi-lib, set {} to ROCm's "
        "prefix or {} to the library's path, or use --device sim:<gpu> to simulate",
        candidates.size() == 1 ? std::filesystem::path(candidates.front()).filename().string()
                               : std::string("libamd_smi.so.26/.25/.24"),
        fmt::join(places, ", "),
        failed.empty() ? std::string("no such file") : fmt::format("{}", fmt::join(failed, "; ")),
        kEnvRocmPath.name, kEnvAmdsmiLibrary.name));
  }
  path_ = library_->path();
  const auto [missing_required, missing_optional] = library_->resolve({
      {{"amdsmi_init"}, symbol_slot(&api_.init), true},
      {{"amdsmi_shut_down"}, symbol_slot(&api_.shut_down), true},
      {{"amdsmi_get_lib_version"}, symbol_slot(&api_.get_lib_version), true},
      {{"amdsmi_get_socket_handles"}, symbol_slot(&api_.get_socket_handles), true},
      {{"amdsmi_get_processor_handles"}, symbol_slot(&api_.get_processor_handles), true},
      {{"amdsmi_get_power_info"}, symbol_slot(&api_.get_power_info), true},
      {{"amdsmi_get_power_cap_info"}, symbol_slot(&api_.get_power_cap_info), true},
      {{"amdsmi_set_power_cap"}, symbol_slot(&api_.set_power_cap), true},
      {{"amdsmi_status_code_to_string"}, symbol_slot(&api_.status_code_to_string), false},
      {{"amdsmi_get_gpu_device_bdf"}, symbol_slot(&api_.get_gpu_device_bdf), false},
      {{"amdsmi_get_gpu_device_uuid"}, symbol_slot(&api_.get_gpu_device_uuid), false},
      {{"amdsmi_get_gpu_asic_info"}, symbol_slot(&api_.get_gpu_asic_info), false},
      {{"amdsmi_get_energy_count"}, symbol_slot(&api_.get_energy_count), false},
      {{"amdsmi_get_temp_metric"}, symbol_slot(&api_.get_temp_metric), false},
      {{"amdsmi_get_clock_info"}, symbol_slot(&api_.get_clock_info), false},
      {{"amdsmi_set_gpu_clk_limit"}, symbol_slot(&api_.set_gpu_clk_limit), false},
      {{"amdsmi_set_gpu_perf_level"}, symbol_slot(&api_.set_gpu_perf_level), false},
      {{"amdsmi_get_gpu_enumeration_info"}, symbol_slot(&api_.get_gpu_enumeration_info), false},
      {{"amdsmi_get_gpu_kfd_info"}, symbol_slot(&api_.get_gpu_kfd_info), false},
      {{"amdsmi_get_gpu_process_list"}, symbol_slot(&api_.get_gpu_process_list), false},
  });
  missing_optional_ = missing_optional;
  if (!missing_required.empty()) {
    throw DeviceError(fmt::format(
        "AMD SMI library '{}' lacks required function(s) {}; it is too old (zeus-cpp needs "
        "ROCm 6.3 or later) or it is not AMD SMI",
        path_, fmt::join(missing_required, ", ")));
  }
  if (!missing_optional_.empty()) {
    logger().debug("AMD SMI '{}' lacks optional {}", path_, fmt::join(missing_optional_, ", "));
  }
  check_version();
  const amdsmi_status_t status = api_.init(AMDSMI_INIT_AMD_GPUS);
  if (status != AMDSMI_STATUS_SUCCESS) {
    throw DeviceError(fmt::format(
        "amdsmi_init(AMD GPUs) failed in '{}': {} (AMD SMI status {}); check that the amdgpu "
        "driver is loaded (amd-smi list) and that this user may open /dev/kfd and /dev/dri",
        path_, status_string(status), status));
  }
}

// Both layouts of amdsmi_version_t are 24 bytes; the soname says which one this is, else the
// first word does (a year, 24 or 25, on ABI 24/25; the major version, 26 or later, on ABI 26).
void AmdsmiLibrary::check_version() {
  alignas(8) std::array<unsigned char, 24> raw{};
  const amdsmi_status_t status = api_.get_lib_version(raw.data());
  if (status != AMDSMI_STATUS_SUCCESS) {
    throw DeviceError(
        fmt::format("amdsmi_get_lib_version failed in '{}' (AMD SMI status {})", path_, status));
  }
  uint32_t first = 0;
  std::memcpy(&first, raw.data(), sizeof(first));
  const std::optional<Abi> named = abi_of(path_);
  const bool year_layout = named ? *named != Abi::k26 : first == 24 || first == 25;
  uint32_t major = 0;
  uint32_t minor = 0;
  uint32_t year = 0;
  if (year_layout) {
    amdsmi_version_abi25_t v{};
    std::memcpy(&v, raw.data(), sizeof(v));
    year = v.year;
    major = v.major;
    minor = v.minor;
    version_ = fmt::format("{}.{}.{}", v.year, v.major, v.minor);
  } else {
    amdsmi_version_abi26_t v{};
    std::memcpy(&v, raw.data(), sizeof(v));
    major = v.major;
    minor = v.minor;
    version_ = fmt::format("{}.{}.{}", v.major, v.minor, v.release);
  }
  std::optional<Abi> abi;
  if (year_layout && year == 25) {
    abi = Abi::k25;
  } else if (year_layout && year == 24 && major >= 7) {
    abi = Abi::k24;
  } else if (!year_layout && major == 26) {
    abi = Abi::k26;
  }
  if (!abi || (named && *named != *abi)) {
    throw DeviceError(fmt::format(
        "AMD SMI library '{}' is version {}{}, whose structure layouts zeus-cpp does not know "
        "(it knows 24.7+ from ROCm 6.3, 25.x from ROCm 6.4 and 26.x from ROCm 7); use a ROCm "
        "from 6.3 to 7.x, or point {} at one",
        path_, version_,
        named ? fmt::format(" but its soname says ABI {}", static_cast<int>(*named)) : "",
        kEnvAmdsmiLibrary.name));
  }
  abi_ = *abi;
  // Concurrent calls are safe from 26.2 on (ROCm 7.2); upstream zeusd documents the rest.
  serialize_ = abi_ != Abi::k26 || minor < 2;
  logger().debug("AMD SMI {} (ABI {}) from {}{}", version_, static_cast<int>(abi_), path_,
                 serialize_ ? ", calls serialized" : "");
}

AmdsmiLibrary::~AmdsmiLibrary() {
  api_.shut_down();
}

AmdsmiLibrary::Call::Call(const AmdsmiLibrary& lib) {
  static std::mutex process_lock;
  if (lib.serialize_) {
    lock_ = std::unique_lock(process_lock);
  }
}

std::string AmdsmiLibrary::status_string(amdsmi_status_t status) const {
  if (api_.status_code_to_string != nullptr) {
    const char* text = nullptr;
    if (api_.status_code_to_string(status, &text) == AMDSMI_STATUS_SUCCESS && text != nullptr) {
      return text;
    }
  }
  return fmt::format("AMD SMI status {}", status);
}

amdsmi_status_t AmdsmiLibrary::power_info(amdsmi_processor_handle handle, SocketPower* out) const {
  const auto available = [](uint32_t w) -> std::optional<uint32_t> {
    if (w == kAmdsmiPowerNotAvailable16 || w == kAmdsmiPowerNotAvailable32) {
      return std::nullopt;
    }
    return w;
  };
  const auto decode = [&](auto info) {
    const amdsmi_status_t status = api_.get_power_info(handle, &info);
    if (status == AMDSMI_STATUS_SUCCESS) {
      out->current_w = available(info.current_socket_power);
      out->average_w = available(info.average_socket_power);
    }
    return status;
  };
  switch (abi_) {
    case Abi::k24:
      return decode(amdsmi_power_info_abi24_t{});
    case Abi::k25:
      return decode(amdsmi_power_info_abi25_t{});
    case Abi::k26:
      break;
  }
  return decode(amdsmi_power_info_abi26_t{});
}

void check_amdsmi(const AmdsmiLibrary& lib, amdsmi_status_t status, std::string_view function,
                  std::string_view where) {
  if (status == AMDSMI_STATUS_SUCCESS) {
    return;
  }
  const std::string base = fmt::format("{} failed on {}: {} (AMD SMI status {})", function, where,
                                       lib.status_string(status), status);
  switch (status) {
    case AMDSMI_STATUS_NO_PERM:
      throw PermissionError(
          base +
          "; changing AMD GPU power caps needs root: run as root, set them through zeusd "
          "(ZEUSD_SOCK_PATH), or measure energy without changing limits with "
          "ZEUS_MEASURE_ONLY=true (--measure-only in the examples)");
    case AMDSMI_STATUS_NOT_SUPPORTED:
      throw NotSupported(base + "; this GPU, its driver or a guest VM does not offer it");
    case AMDSMI_STATUS_UNEXPECTED_DATA:
      throw DeviceError(fmt::format(
          "{}; the AMD SMI library (version {}) is older than this GPU: install the ROCm "
          "release that supports it (amd-smi version, then ROCm's compatibility matrix) and "
          "point {} at its lib/",
          base, lib.version(), kEnvRocmPath.name));
    case AMDSMI_STATUS_NOT_FOUND:
    case AMDSMI_STATUS_DRIVER_NOT_LOADED:
      throw DeviceLost(base +
                       "; the GPU stopped answering: check `amd-smi list` and the kernel "
                       "log (dmesg | grep amdgpu)");
    case AMDSMI_STATUS_INVAL:
      throw ConfigError(base);
    default:
      throw DeviceError(base);
  }
}

}  // namespace zeus::device::amdsmi
