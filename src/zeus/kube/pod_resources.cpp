#include "zeus/kube/pod_resources.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/parse.h"

namespace zeus::kube {

std::vector<std::pair<std::string, std::string>> owner_labels(
    const std::optional<DeviceOwner>& owner) {
  return {{"pod", owner ? owner->pod : ""},
          {"namespace", owner ? owner->namespace_name : ""},
          {"container", owner ? owner->container : ""}};
}

DeviceOwner merge_owners(std::vector<DeviceOwner> owners) {
  const auto key = [](const DeviceOwner& o) {
    return std::tie(o.namespace_name, o.pod, o.container);
  };
  std::sort(owners.begin(), owners.end(),
            [&](const DeviceOwner& a, const DeviceOwner& b) { return key(a) < key(b); });
  owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  DeviceOwner merged;
  for (size_t i = 0; i < owners.size(); ++i) {
    const std::string sep = i == 0 ? "" : ",";
    merged.pod += sep + owners[i].pod;
    merged.namespace_name += sep + owners[i].namespace_name;
    merged.container += sep + owners[i].container;
  }
  return merged;
}

PodResourcesWatcher::PodResourcesWatcher(std::string socket_path, WatcherOptions options)
    : socket_path_(std::move(socket_path)),
      options_(options),
      last_answer_(std::chrono::steady_clock::now()) {
  if (!pod_resources_supported()) {
    list_device_owners(socket_path_, options_.period);  // throws the ConfigError saying why
  }
  thread_ = std::thread([this] { run(); });
}

PodResourcesWatcher::~PodResourcesWatcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::optional<DeviceOwner> PodResourcesWatcher::owner(const std::string& device_id) const {
  const std::string key = to_lower(device_id);
  std::lock_guard lock(mu_);
  const auto it = owners_.find(key);
  return it == owners_.end() ? std::nullopt : std::optional(it->second);
}

std::optional<DeviceOwner> PodResourcesWatcher::owner_of_gpu(const std::string& uuid,
                                                             const std::string& pci) const {
  std::vector<DeviceOwner> owners;
  std::lock_guard lock(mu_);
  for (const std::string* id : {&uuid, &pci}) {
    if (id->empty()) {
      continue;
    }
    if (const auto it = by_gpu_.find(to_lower(*id)); it != by_gpu_.end()) {
      owners.insert(owners.end(), it->second.begin(), it->second.end());
    }
  }
  if (owners.empty()) {
    return std::nullopt;
  }
  return merge_owners(std::move(owners));
}

int64_t PodResourcesWatcher::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}

bool PodResourcesWatcher::refresh() {
  DeviceOwners owners;
  try {
    owners = list_device_owners(socket_path_, std::chrono::seconds(2));
  } catch (const Error& e) {
    std::lock_guard lock(mu_);
    ++failures_;
    if (!failing_) {
      logger().warn(
          "{}; GPUs keep the pods last seen for {} ms (none before the first answer), then "
          "have none; retried every {} ms",
          e.what(), options_.forget_after.count(), options_.period.count());
      failing_ = true;
    }
    if (std::chrono::steady_clock::now() - last_answer_ >= options_.forget_after) {
      owners_.clear();
      by_gpu_.clear();
    }
    return false;
  }
  // Outside the lock: a MIG lookup is a call into the vendor library.
  std::map<std::string, std::vector<DeviceOwner>> by_gpu;
  for (const auto& [id, owner] : owners) {
    if (const auto key = gpu_key_of_device(id, options_.mig_parent)) {
      by_gpu[*key].push_back(owner);
    }
  }
  {
    std::lock_guard lock(mu_);
    by_gpu_ = std::move(by_gpu);
    if (failing_) {
      logger().info("the kubelet's pod-resources API at {} answers again", socket_path_);
      failing_ = false;
    }
    owners_ = owners;
    last_answer_ = std::chrono::steady_clock::now();
  }
  if (options_.on_answer) {
    std::lock_guard lock(answer_mu_);
    options_.on_answer(owners);
  }
  return true;
}

void PodResourcesWatcher::run() {
  while (true) {
    refresh();
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, options_.period, [this] { return stop_; })) {
      return;
    }
  }
}

}  // namespace zeus::kube
