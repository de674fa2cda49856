// Which pod a process runs in, and which devices the kubelet gave each pod, read where a pod
// cannot forge them: the process's cgroup (the kubelet names each pod's cgroup after its UID, and
// a container cannot move itself out of it) and the kubelet's device-manager checkpoint (the
// kubelet's record of every allocation, a host file no pod mounts). zeusd authorizes per GPU with
// them (daemon/pod_authority.h): the pod-resources API names pods but not their UIDs, and a pod's
// own claims (its hostname, its environment) are its to change.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::kube {

// The UID (lower case, with dashes) of the pod in `proc_cgroup` (the text of /proc/PID/cgroup,
// cgroup v1 or v2): a path under "kubepods" with a component "pod<UID>" (the cgroupfs driver) or
// "...-pod<UID with underscores>.slice" (the systemd driver). std::nullopt: no pod's (a host
// process).
std::optional<std::string> pod_uid_of_cgroup(std::string_view proc_cgroup);

// pod_uid_of_cgroup of /proc/<pid>/cgroup. Throws IoError when it cannot be read (the process
// ended, or it is in a PID namespace whose /proc this is not).
std::optional<std::string> pod_uid_of_process(pid_t pid);

// One allocation of the kubelet's device manager: a container's devices of one resource.
struct PodDevices {
  std::string container;
  std::string resource;                 // "nvidia.com/gpu"
  std::vector<std::string> device_ids;  // as the device plugin named them
};

// Pod UID (lower case) -> its allocations, from the text of the kubelet's checkpoint
// (/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint: {"Data": {"PodDeviceEntries":
// [{"PodUID", "ContainerName", "ResourceName", "DeviceIDs"}]}, "Checksum"}; DeviceIDs is a list
// in kubelets before 1.20, a map of NUMA node to list after). Only GPU resources are kept
// (is_gpu_resource). Throws ConfigError naming `where` for a file that is not one.
std::map<std::string, std::vector<PodDevices>> parse_device_checkpoint(std::string_view text,
                                                                       std::string_view where);

}  // namespace zeus::kube
