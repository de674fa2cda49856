// Finding the physical GPU behind a CUDA device number in the machine's numbering (the GPU
// backend's: NVML's index, PCI bus order). Vendor-neutral: a backend supplies the UUIDs of the
// machine's GPUs and, where it has them, MIG parents. CUDA numbers the
// devices a process sees after CUDA_VISIBLE_DEVICES (indices, "GPU-" UUIDs or prefixes of them,
// "MIG-" instance UUIDs), fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; NVML numbers every
// GPU of the machine in PCI bus order. The UUID names the same GPU in both, so a UUID from the
// CUDA runtime decides; without one (a rank that trains on the CPU, tests without CUDA) the
// variables are followed as CUDA does.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::device {

struct MachineGpuIdentity {
  std::string uuid;  // "GPU-..."
  std::string name;
};

// The UUID of the GPU that holds MIG instance `mig_uuid` ("MIG-..."), or std::nullopt when no
// GPU has it. Empty: only the legacy "MIG-GPU-<uuid>/<gi>/<ci>" spelling can be resolved.
using MigParentLookup = std::function<std::optional<std::string>(std::string_view mig_uuid)>;

// Maps CUDA_VISIBLE_DEVICES to machine (NVML) indices, following CUDA's rules: entries are indices,
// (prefixes of) "GPU-..." UUIDs, or MIG instance UUIDs (mapped to the GPU that holds them: a
// MIG slice has no power limit of its own, its GPU has); the list ends at the first entry that
// matches no GPU or repeats one. An unset variable shows every GPU; an empty one shows none.
// Indices are taken in NVML (PCI bus) order, which is CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID
// or identical GPUs. `ignored` (optional) receives a note for each entry that was dropped.
std::vector<int> map_visible_devices(const std::optional<std::string>& visible,
                                     const std::vector<std::string>& machine_uuids,
                                     std::vector<std::string>* ignored = nullptr,
                                     const MigParentLookup& mig_parent = {});

// ROCm's visibility variables as a process has them (std::nullopt: unset).
struct RocmVisibility {
  std::optional<std::string> rocr;  // ROCR_VISIBLE_DEVICES: filters first
  std::optional<std::string> hip;   // HIP_VISIBLE_DEVICES: then picks among ROCr's
  std::optional<std::string> cuda;  // CUDA_VISIBLE_DEVICES: HIP reads it when HIP's is unset
  static RocmVisibility from_env();
  bool any() const { return rocr || hip || cuda; }
};

// The GPUs ROCm PyTorch shows a process, as positions into `hip_order_uuids` (the machine's GPUs
// in HIP's order): ROCR_VISIBLE_DEVICES (indices or UUIDs) over the machine, then
// HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES, over what ROCr shows, renumbered densely as
// PyTorch does, each by map_visible_devices' rules. A variable set but empty throws ConfigError
// naming it (ROCm would show no GPU, which is never what a training job meant).
std::vector<int> map_rocm_visible_devices(const RocmVisibility& visibility,
                                          const std::vector<std::string>& hip_order_uuids,
                                          std::vector<std::string>* ignored = nullptr);

// One rank's CUDA device, as the rank knows it.
struct CudaDeviceRef {
  // From the CUDA runtime ("GPU-..." spelling of cudaDeviceProp::uuid): decides when set.
  std::optional<std::string> runtime_uuid;
  int index = 0;                               // CUDA's device number in this process
  std::optional<std::string> visible_devices;  // the rank's CUDA_VISIBLE_DEVICES
  std::optional<std::string> device_order;     // the rank's CUDA_DEVICE_ORDER
};

struct CudaMatch {
  int machine_index = 0;
  std::string how;                  // e.g. "by the CUDA runtime's UUID"
  std::optional<std::string> note;  // a caveat worth a warning (order assumed, MIG slice)
};

// The machine's GPU behind `ref`, or std::nullopt when CUDA would show the process no device with
// that number. Throws ConfigError when the runtime's UUID is not among NVML's GPUs.
std::optional<CudaMatch> match_cuda_device(const CudaDeviceRef& ref,
                                           const std::vector<MachineGpuIdentity>& gpus,
                                           const MigParentLookup& mig_parent = {});

class GpuSet;
// The same over `machine`, a set opened machine-wide (every GPU, in machine order), with its MIG
// lookups: the form a job and a test use.
std::optional<CudaMatch> match_cuda_device(const CudaDeviceRef& ref, const GpuSet& machine);

}  // namespace zeus::device
