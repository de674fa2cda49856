#include "zeus/kube/pod_identity.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>

#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/kube/device_ids.h"

namespace zeus::kube {

std::optional<std::string> pod_uid_of_cgroup(std::string_view proc_cgroup) {
  // "pod" then a UID whose dashes the systemd driver writes as underscores, at the start of a
  // path component or after a slice's "-".
  static const std::regex kPod(
      "(?:^|/|-)pod([0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_]"
      "[0-9a-fA-F]{12})(?:\\.slice)?(?:/|$)");
  for (const std::string& line : split(std::string(proc_cgroup), '\n')) {
    // "<id>:<controllers>:<path>"; the path may itself hold colons.
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) {
      continue;
    }
    const std::string path = line.substr(second + 1);
    const auto kubepods = path.find("kubepods");
    if (kubepods == std::string::npos) {
      continue;
    }
    std::smatch m;
    const std::string below = path.substr(kubepods);
    if (std::regex_search(below, m, kPod)) {
      std::string uid = to_lower(m[1].str());
      std::replace(uid.begin(), uid.end(), '_', '-');
      return uid;
    }
  }
  return std::nullopt;
}

std::optional<std::string> pod_uid_of_process(pid_t pid) {
  return pod_uid_of_cgroup(read_file(fmt::format("/proc/{}/cgroup", pid)));
}

std::map<std::string, std::vector<PodDevices>> parse_device_checkpoint(std::string_view text,
                                                                       std::string_view where) {
  std::map<std::string, std::vector<PodDevices>> out;
  try {
    const auto j = nlohmann::json::parse(text);
    for (const auto& e : j.at("Data").at("PodDeviceEntries")) {
      PodDevices d;
      d.container = e.value("ContainerName", "");
      d.resource = e.at("ResourceName").get<std::string>();
      if (!is_gpu_resource(d.resource)) {
        continue;
      }
      const auto& ids = e.at("DeviceIDs");
      const auto add = [&d](const nlohmann::json& list) {
        for (const auto& id : list) {
          d.device_ids.push_back(id.get<std::string>());
        }
      };
      if (ids.is_array()) {
        add(ids);
      } else if (ids.is_object()) {
        for (const auto& [numa, list] : ids.items()) {
          add(list);
        }
      } else if (!ids.is_null()) {
        throw ConfigError("DeviceIDs is neither a list nor a map of NUMA node to list");
      }
      out[to_lower(e.at("PodUID").get<std::string>())].push_back(std::move(d));
    }
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(
        fmt::format("the kubelet's device checkpoint {} is not one: {}", where, e.what()));
  } catch (const ConfigError& e) {
    throw ConfigError(
        fmt::format("the kubelet's device checkpoint {} is not one: {}", where, e.what()));
  }
  return out;
}

}  // namespace zeus::kube
