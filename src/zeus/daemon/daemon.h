// zeusd, assembled: the node's GPUs and RAPL packages, the lease keeper over its state directory,
// the power streams and the wire API, served on a Unix socket or a TCP address.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "zeus/daemon/api.h"
#include "zeus/daemon/node_metrics.h"
#include "zeus/daemon/pod_authority.h"
#include "zeus/daemon/pod_records.h"
#include "zeus/daemon/pods.h"
#include "zeus/daemon/power_streams.h"
#include "zeus/http/server.h"

namespace zeus::daemon {

struct DaemonOptions {
  http::ServerOptions server;
  ApiOptions api;
  PowerStreamOptions streams;
  // Holds leases.json (the lease journal) and audit.jsonl. Created 0700 when missing; refused
  // when another user may write it (the journal is trusted input: it says what to restore).
  std::filesystem::path state_dir = "/var/lib/zeusd";
  bool require_gpu_process = false;
  // Zeus 0.16's TOML of commands replacing NVML setters (command_overrides.h); empty: none.
  std::filesystem::path gpu_command_overrides;
  // The GPUs' backend: "auto" (the first of the registry's machine backends that shows a GPU)
  // or a registered machine backend's name (check_gpu_backend).
  std::string gpu_backend = "auto";
  // Powercap root; empty: /zeus_sys/class/powercap when it exists (upstream's container
  // convention), else $ZEUS_RAPL_ROOT or /sys/class/powercap.
  std::filesystem::path rapl_root;
  // GET /metrics for Prometheus on its own TCP address (--metrics-bind-address); off when empty.
  MetricsOptions metrics;
  // The kubelet's pod-resources socket (--kubelet-socket): the metrics, the audit and the
  // job-energy records name the pod holding each GPU, and each pod holding GPUs gets a
  // job-energy record of its own (pod_records.h). Empty: no pods.
  std::string kubelet_socket;
  std::chrono::milliseconds kubelet_period{5000};
  // The kubelet's device-manager checkpoint (--kubelet-device-checkpoint): a client whose
  // process is in a pod (its cgroup names one) may change only the GPUs allocated to that pod
  // (pod_authority.h). Empty: any GPU nobody else holds.
  std::filesystem::path kubelet_device_checkpoint;
  // zeusd's admin credential (admin_token.h); empty: <state_dir>/admin.token.
  std::filesystem::path admin_token_file;
  // Upstream's rule: gpu-control and cpu-read need euid 0. Off only for tests of the routes.
  bool require_root = true;
};

// What the daemon found on this machine (`zeusd serve --check`, and the start-up log).
struct Inventory {
  std::vector<std::string> lines;
  bool ok = true;  // false: it would not start (the lines say why)
};
Inventory inspect(const DaemonOptions& options);

// The GPU of a MIG device of `set`'s, and the GPU of a device plugin's device id (kube/
// device_ids.h), for the kubelet's answers; `set` may be null (no GPUs), and must outlive them.
kube::MigParent mig_parent_of(const device::GpuSet* set);
GpuOfDevice gpu_of_device(const device::GpuSet* set);

// `name` when it is "auto" or a machine backend of the registry (--gpu-backend), else a
// ConfigError listing those.
std::string check_gpu_backend(const std::string& name);

class Daemon {
 public:
  // Throws ConfigError (what to change) or IoError naming what failed.
  explicit Daemon(DaemonOptions options);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  const std::string& address() const { return server_->address(); }
  // The metrics endpoint's "host:port", or "" when it is off.
  std::string metrics_address() const { return metrics_ ? metrics_->address() : ""; }
  LeaseKeeper& leases() { return *leases_; }

 private:
  DaemonOptions options_;
  std::unique_ptr<device::GpuSet> gpu_set_;  // null without GPUs; gpus_ and metrics_ view it
  std::unique_ptr<GpuControl> gpus_;
  std::unique_ptr<device::CpuSet> cpus_;
  std::unique_ptr<PodAuthority> authority_;  // with --kubelet-device-checkpoint
  std::unique_ptr<LeaseKeeper> leases_;
  std::unique_ptr<PowerStreams> streams_;
  std::unique_ptr<JobEnergyBook> jobs_;
  // After the book its answers start and stop records in (stops first); read by pod_of through
  // watcher_, which is set once it exists (its thread's first answer comes before that).
  std::unique_ptr<kube::PodResourcesWatcher> pods_;
  std::atomic<const kube::PodResourcesWatcher*> watcher_{nullptr};
  std::vector<std::pair<std::string, std::string>> gpu_device_ids_;  // (uuid, pci) by GPU id
  std::unique_ptr<Api> api_;
  std::unique_ptr<NodeMetrics> metrics_;
  std::unique_ptr<http::Server> server_;  // last: stops first
};

}  // namespace zeus::daemon
