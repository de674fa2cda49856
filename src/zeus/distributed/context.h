// Joining a data-parallel job: `zeus::distributed::init()` detects who this process is, binds its
// device (cuda:<local rank> when CUDA has devices, else the CPU), creates the rendezvous store
// and the process group (NCCL for CUDA, Gloo for the CPU), and returns the Context every other
// call uses.
#pragma once

#include <c10/core/Device.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "zeus/cluster/env.h"
#include "zeus/distributed/backend.h"
#include "zeus/distributed/dist_alias.h"

namespace zeus::distributed {

enum class DeviceType {
  kAuto,  // cuda:<local rank> among the visible devices when CUDA has any, else the CPU
  kCuda,  // a CUDA device, or an error saying why there is none
  kCpu,
};

struct InitOptions {
  cluster::EnvOptions env;  // explicit values beat the launcher's variables
  BackendOptions backend;   // timeouts; `kind` and `cuda_device` are set by init()
  DeviceType device = DeviceType::kAuto;
  // The CUDA device index among the visible ones; unset: the local rank (or 0 when the launcher
  // gave this worker exactly one device, as `zeus run --devices` does).
  std::optional<int> cuda_device;
  // Unset: NCCL when the device is CUDA, Gloo on the CPU.
  std::optional<BackendKind> backend_kind;
  bool log_all_ranks = false;      // console logs from every rank, not only local masters
  std::filesystem::path log_file;  // per-rank log file, "{rank}" replaced; empty: none
  // Fix glibc's mmap/trim thresholds for the training loop (zeus/common/malloc_tuning.h);
  // skipped when GLIBC_TUNABLES is set. On by default: with glibc's dynamic mmap threshold a
  // process lands in one of two modes depending on the order of its first frees, and in the
  // slow one every step re-faults its multi-MB buffers (bench/README.md, DDP section).
  bool tune_malloc = true;
};

// "auto", "cuda" or "cpu" (any case); ConfigError naming `what` otherwise.
DeviceType parse_device_type(std::string_view text, std::string_view what);
// "nccl" or "gloo" (any case); ConfigError naming `what` otherwise.
BackendKind parse_backend_kind(std::string_view text, std::string_view what);

// Which device a rank binds, decided from what it can see (pure, so that tests need no GPU).
struct DeviceRequest {
  DeviceType type = DeviceType::kAuto;
  std::optional<int> cuda_device;
  bool cuda_built = false;  // libtorch has CUDA
  int cuda_device_count = 0;
  std::optional<std::string> visible_devices;  // CUDA_VISIBLE_DEVICES
};
// c10::Device(kCpu) or c10::Device(kCUDA, i). Throws ConfigError naming the rank, the host, the
// number of visible devices and CUDA_VISIBLE_DEVICES when the rank's CUDA device does not exist
// or CUDA was asked for where there is none.
c10::Device choose_device(const DeviceRequest& request, const cluster::Env& env);

// Contract: one per process, made by init(); collectives are called in the same order on every
// rank. A world of size 1 has no store and no process group: collectives return at once.
class Context {
 public:
  explicit Context(const InitOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const cluster::Env& env() const { return env_; }
  int rank() const { return env_.rank; }
  int local_rank() const { return env_.local_rank; }
  int world_size() const { return env_.world_size; }
  int local_world_size() const { return env_.local_world_size; }
  int node_rank() const { return env_.node_rank; }
  bool is_master() const { return env_.is_master(); }
  bool is_local_master() const { return env_.is_local_master(); }

  // Where this rank trains: move the model and batches there (the loader's `device` option).
  c10::Device device() const { return device_; }
  bool on_cuda() const { return device_.is_cuda(); }
  BackendKind backend_kind() const { return backend_kind_; }
  // Where collective tensors must live: the CUDA device for NCCL, else the CPU.
  c10::Device collective_device() const;
  // Waits for this rank's device to finish its queued work (no-op on the CPU).
  void synchronize_device();

  void barrier();
  // The mean over ranks of a metric (loss, accuracy), in double precision.
  double all_reduce_mean(double value);
  double all_reduce_sum(double value);
  double all_reduce_max(double value);
  // In place, in double precision: sums over ranks / root's values (small vectors: metrics,
  // zeus::DataLoader's measurements and decisions).
  void all_reduce_sum(std::span<double> values);
  void broadcast(std::span<double> values, int root);
  // Null for a single process.
  Backend* backend() { return backend_.get(); }

 private:
  cluster::Env env_;
  c10::Device device_{c10::kCPU};
  BackendKind backend_kind_ = BackendKind::kGloo;
  std::unique_ptr<Backend> backend_;
};

// Creates the process's Context (and makes it current). Throws ConfigError for a bad
// environment or a missing device, StoreError/PeerFailed when the rendezvous fails.
[[nodiscard]] std::shared_ptr<Context> init(const InitOptions& options = {});
// The context init() made; throws Error when init() was not called.
Context& current();
bool is_master();
bool is_local_master();
int rank();
int world_size();
// current().all_reduce_mean(value): the metric helper zeus::DataLoader's users call before
// report_metric().
double all_reduce_mean(double value);

}  // namespace zeus::distributed
