// How device plugins name GPUs, and which physical GPU a name is. NVIDIA's device plugin lists a
// whole GPU by its UUID ("GPU-..."), each replica of a time-sliced or MPS-shared GPU as
// "GPU-...::N" (so that several pods hold one GPU, each by a name of its own), and a MIG device by
// the MIG instance's UUID ("MIG-..."); AMD's (ROCm/k8s-device-plugin) lists a GPU by its PCI
// address ("0000:c1:00.0"). Power limits, energy and pods are per physical GPU, so every name is
// reduced to that GPU's key: its UUID or PCI address, lower case.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace zeus::kube {

// The UUID of the GPU holding MIG instance `instance_uuid`, or std::nullopt (GpuSet's
// mig_parent_uuid). May be empty: MIG names then match no GPU.
using MigParent = std::function<std::optional<std::string>(std::string_view instance_uuid)>;

// Whether a resource of the kubelet is GPUs: "nvidia.com/gpu", "amd.com/gpu", and the MIG
// resources of NVIDIA's mixed strategy ("nvidia.com/mig-1g.10gb").
bool is_gpu_resource(std::string_view resource_name);

// The physical GPU's key (lower case) of device `id`: the UUID without a replica's "::N", a MIG
// instance's parent UUID, or the PCI address as given. std::nullopt for a MIG instance whose
// parent is unknown here (another node's, or no resolver).
std::optional<std::string> gpu_key_of_device(std::string_view id, const MigParent& mig_parent);

}  // namespace zeus::kube
