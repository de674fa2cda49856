#include "zeus/kube/device_ids.h"

#include "zeus/common/parse.h"

namespace zeus::kube {

bool is_gpu_resource(std::string_view resource_name) {
  const std::string name = to_lower(resource_name);
  const auto slash = name.find('/');
  return name.find("gpu") != std::string::npos ||
         name.compare(slash == std::string::npos ? 0 : slash + 1, 4, "mig-") == 0;
}

std::optional<std::string> gpu_key_of_device(std::string_view id, const MigParent& mig_parent) {
  std::string key = to_lower(trim(id));
  if (const auto replica = key.find("::"); replica != std::string::npos) {
    key.resize(replica);
  }
  if (key.starts_with("mig-")) {
    // Looked up as the driver spells MIG UUIDs ("MIG-" and lower-case hex); the device plugin's
    // may come lower-cased from a map keyed by it.
    const auto parent = mig_parent ? mig_parent("MIG-" + key.substr(4)) : std::nullopt;
    if (!parent) {
      return std::nullopt;
    }
    return to_lower(*parent);
  }
  return key;
}

}  // namespace zeus::kube
