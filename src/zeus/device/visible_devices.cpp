#include "zeus/device/visible_devices.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <variant>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/device/gpu_set.h"

namespace zeus::device {
namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) {
    s.remove_suffix(1);
  }
  return std::string(s);
}

std::vector<std::string> entries_of(const std::string& visible) {
  std::vector<std::string> out;
  for (const auto& e : split(visible, ',')) {
    out.push_back(trim(e));
  }
  return out;
}

int index_of_uuid(const std::vector<std::string>& uuids, std::string_view uuid) {
  const auto it = std::find(uuids.begin(), uuids.end(), uuid);
  return it == uuids.end() ? -1 : static_cast<int>(it - uuids.begin());
}

// The parent GPU of a MIG UUID: the legacy "MIG-GPU-<uuid>/<gi>/<ci>" spelling names it; the
// current "MIG-<uuid>" needs NVML.
std::optional<std::string> mig_parent_of(const std::string& mig, const MigParentLookup& lookup) {
  if (mig.rfind("MIG-GPU-", 0) == 0) {
    return mig.substr(4,
                      mig.find('/') == std::string::npos ? std::string::npos : mig.find('/') - 4);
  }
  return lookup ? lookup(mig) : std::nullopt;
}

// The NVML index an entry of CUDA_VISIBLE_DEVICES names, or a reason it names none.
std::variant<int, std::string> resolve_entry(const std::string& entry,
                                             const std::vector<std::string>& uuids,
                                             const MigParentLookup& mig_lookup) {
  if (entry.empty()) {
    return std::string("empty entry");
  }
  if (entry.rfind("MIG-", 0) == 0) {
    const auto parent = mig_parent_of(entry, mig_lookup);
    if (!parent) {
      return std::string("no GPU holds this MIG instance");
    }
    const int i = index_of_uuid(uuids, *parent);
    if (i < 0) {
      return fmt::format("its GPU {} is not among NVML's", *parent);
    }
    return i;
  }
  if (std::all_of(entry.begin(), entry.end(), [](char c) { return std::isdigit(c) != 0; })) {
    const auto index = parse_number<long>(entry);
    if (!index || *index >= static_cast<long>(uuids.size())) {
      return fmt::format("index {} >= GPU count {}", entry, uuids.size());
    }
    return static_cast<int>(*index);
  }
  // A UUID or a unique prefix of one, with or without the "GPU-" prefix.
  const std::string wanted = entry.rfind("GPU-", 0) == 0 ? entry : "GPU-" + entry;
  int found = -1;
  for (size_t i = 0; i < uuids.size(); ++i) {
    if (uuids[i].rfind(wanted, 0) == 0) {
      if (found >= 0) {
        return std::string("ambiguous UUID prefix");
      }
      found = static_cast<int>(i);
    }
  }
  if (found < 0) {
    return std::string("no GPU has this UUID");
  }
  return found;
}

}  // namespace

std::vector<int> map_visible_devices(const std::optional<std::string>& visible,
                                     const std::vector<std::string>& machine_uuids,
                                     std::vector<std::string>* ignored,
                                     const MigParentLookup& mig_parent) {
  std::vector<int> out;
  if (!visible) {
    for (size_t i = 0; i < machine_uuids.size(); ++i) {
      out.push_back(static_cast<int>(i));
    }
    return out;
  }
  if (trim(*visible).empty()) {
    return out;  // CUDA_VISIBLE_DEVICES="" hides every GPU
  }
  const std::vector<std::string> entries = entries_of(*visible);
  std::set<int> seen;
  for (size_t i = 0; i < entries.size(); ++i) {
    auto resolved = resolve_entry(entries[i], machine_uuids, mig_parent);
    const int* index = std::get_if<int>(&resolved);
    if (index != nullptr && seen.insert(*index).second) {
      out.push_back(*index);
      continue;
    }
    if (ignored != nullptr) {
      ignored->push_back(fmt::format(
          "'{}' ({})", entries[i],
          index != nullptr ? "its GPU is listed already" : std::get<std::string>(resolved)));
      for (size_t j = i + 1; j < entries.size(); ++j) {
        ignored->push_back(fmt::format("'{}' (after an invalid entry)", entries[j]));
      }
    }
    break;
  }
  return out;
}

RocmVisibility RocmVisibility::from_env() {
  return {get_env_set(kEnvRocrVisibleDevices), get_env_set(kEnvHipVisibleDevices),
          get_env_set(kEnvCudaVisibleDevices)};
}

std::vector<int> map_rocm_visible_devices(const RocmVisibility& visibility,
                                          const std::vector<std::string>& hip_order_uuids,
                                          std::vector<std::string>* ignored) {
  const auto stage = [&](const std::optional<std::string>& value, std::string_view name,
                         const std::vector<int>& shown) {
    if (!value) {
      return shown;
    }
    if (trim(*value).empty()) {
      throw ConfigError(fmt::format(
          "{} is set but empty, which shows this process no GPU; unset it, or list the GPUs "
          "(indices or UUIDs, comma-separated)",
          name));
    }
    std::vector<std::string> uuids;
    for (const int i : shown) {
      uuids.push_back(hip_order_uuids[static_cast<size_t>(i)]);
    }
    std::vector<std::string> dropped;
    std::vector<int> out;
    for (const int k : map_visible_devices(value, uuids, &dropped)) {
      out.push_back(shown[static_cast<size_t>(k)]);
    }
    if (ignored != nullptr) {
      for (const auto& d : dropped) {
        ignored->push_back(fmt::format("{} entry {}", name, d));
      }
    }
    return out;
  };
  std::vector<int> all(hip_order_uuids.size());
  for (size_t i = 0; i < all.size(); ++i) {
    all[i] = static_cast<int>(i);
  }
  const std::vector<int> rocr = stage(visibility.rocr, kEnvRocrVisibleDevices.name, all);
  return visibility.hip ? stage(visibility.hip, kEnvHipVisibleDevices.name, rocr)
                        : stage(visibility.cuda, kEnvCudaVisibleDevices.name, rocr);
}

std::optional<CudaMatch> match_cuda_device(const CudaDeviceRef& ref,
                                           const std::vector<MachineGpuIdentity>& gpus,
                                           const MigParentLookup& mig_parent) {
  std::vector<std::string> uuids;
  for (const auto& g : gpus) {
    uuids.push_back(g.uuid);
  }
  if (ref.runtime_uuid) {
    if (const int i = index_of_uuid(uuids, *ref.runtime_uuid); i >= 0) {
      return CudaMatch{i, "by the CUDA runtime's UUID", std::nullopt};
    }
    // A MIG instance: CUDA reports the instance's own UUID, NVML knows it as "MIG-<uuid>".
    const std::string bare =
        ref.runtime_uuid->rfind("GPU-", 0) == 0 ? ref.runtime_uuid->substr(4) : *ref.runtime_uuid;
    if (const auto parent = mig_parent_of("MIG-" + bare, mig_parent)) {
      if (const int i = index_of_uuid(uuids, *parent); i >= 0) {
        return CudaMatch{i, "by the CUDA runtime's UUID (a MIG instance)",
                         fmt::format("CUDA device {} is a MIG instance of {}: its whole GPU is "
                                     "measured, other instances' work included",
                                     ref.index, *parent)};
      }
    }
    throw ConfigError(fmt::format(
        "CUDA device {} has UUID {}, which none of NVML's {} GPU(s) has; is NVML from another "
        "driver than CUDA's (ZEUS_NVML_LIBRARY)?",
        ref.index, *ref.runtime_uuid, gpus.size()));
  }
  // No runtime: CUDA's view from the variables.
  std::vector<std::string> ignored;
  const std::vector<int> visible =
      map_visible_devices(ref.visible_devices, uuids, &ignored, mig_parent);
  if (ref.index < 0 || ref.index >= static_cast<int>(visible.size())) {
    return std::nullopt;
  }
  const int machine_index = visible[static_cast<size_t>(ref.index)];
  std::optional<std::string> note;
  const bool by_index =
      !ref.visible_devices ||
      std::isdigit(static_cast<unsigned char>(
          trim(entries_of(*ref.visible_devices)[static_cast<size_t>(ref.index)]).front())) != 0;
  const bool pci_order = ref.device_order && *ref.device_order == "PCI_BUS_ID";
  const bool identical = std::all_of(gpus.begin(), gpus.end(), [&](const MachineGpuIdentity& g) {
    return g.name == gpus.front().name;
  });
  if (by_index && !pci_order && !identical) {
    note = fmt::format(
        "CUDA device {} is taken as NVML GPU {} in PCI bus order, but CUDA orders these "
        "different GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID: set it, or list UUIDs "
        "in CUDA_VISIBLE_DEVICES",
        ref.index, machine_index);
  }
  return CudaMatch{machine_index,
                   ref.visible_devices ? "by CUDA_VISIBLE_DEVICES" : "by index (all GPUs visible)",
                   note};
}

std::optional<CudaMatch> match_cuda_device(const CudaDeviceRef& ref, const GpuSet& machine) {
  std::vector<MachineGpuIdentity> gpus;
  for (int g = 0; g < machine.count(); ++g) {
    gpus.push_back({machine.uuid(g), machine.name(g)});
  }
  return match_cuda_device(
      ref, gpus, [&machine](std::string_view mig) { return machine.mig_parent_uuid(mig); });
}

}  // namespace zeus::device
