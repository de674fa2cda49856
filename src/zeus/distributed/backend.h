// The one place zeus-cpp calls c10d (TCPStore, ProcessGroupGloo, ProcessGroupNCCL,
// collectives) and CUDA (devices, streams), and the one place the two supported libtorches
// differ: Debian's 1.13 (CPU only; ProcessGroupGloo is a ProcessGroup) and PyTorch's 2.x wheel
// (CUDA + NCCL; process groups are c10d::Backends). Everything else in zeus_torch is written
// against this header. Tensors are forward-declared: including it costs no libtorch parse time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "zeus/cluster/env.h"

namespace at {
class Tensor;
}  // namespace at

namespace zeus::distributed {

enum class BackendKind {
  kGloo,  // CPU tensors (and CUDA tensors, slowly, through host copies)
  kNccl,  // CUDA tensors; the libtorch must have CUDA (has_cuda())
};
const char* backend_name(BackendKind kind);

struct BackendOptions {
  // How long non-master ranks retry connecting to the master's store, and how long the store
  // waits for all ranks to join.
  std::chrono::milliseconds store_timeout = std::chrono::seconds(300);
  // How long a collective may wait for its peers (PyTorch's default: 30 min).
  std::chrono::milliseconds collective_timeout = std::chrono::minutes(30);
  BackendKind kind = BackendKind::kGloo;
  // NCCL: this rank's CUDA device (its communicator and streams live there).
  int cuda_device = -1;
};

// A rendezvous store plus a process group (Gloo or NCCL) for one rank of `env`.
//
// Contract: construction is collective (every rank constructs with the same world and kind);
// then collectives are called in the same order on every rank, from one thread (the gradient
// hooks of GradientSync start theirs from autograd's threads, in an order it fixes). Failures
// (a peer that died, a timeout) throw DistError subclasses naming this rank, the collective and
// the cause; they never hang past the timeout. Tensors must live on the backend's device type
// (CPU for Gloo, the rank's CUDA device for NCCL). For NCCL, a collective that returns has been
// ordered before later work on the caller's current CUDA stream (Work::wait() makes the stream
// wait); it has not necessarily finished on the device.
class Backend {
 public:
  Backend(const cluster::Env& env, const BackendOptions& options);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  BackendKind kind() const;

  void barrier();
  // In place: every tensor becomes root's. ConfigError when root is not a rank of the world.
  void broadcast(std::vector<at::Tensor>& tensors, int root);
  // In place: every tensor becomes the sum over ranks.
  void all_reduce_sum(std::vector<at::Tensor>& tensors);

  // An all-reduce running in the background; wait() finishes it (and throws its error). For
  // NCCL, wait() makes the caller's current stream wait for it, without blocking the CPU.
  class Pending {
   public:
    virtual ~Pending() = default;
    virtual void wait() = 0;
  };
  // Starts all_reduce_sum without waiting. The tensors must stay alive until wait().
  [[nodiscard]] std::unique_ptr<Pending> start_all_reduce_sum(std::vector<at::Tensor>& tensors);

  struct Impl;  // opaque: the c10d objects

 private:
  std::unique_ptr<Impl> impl_;
};

// CUDA through the linked libtorch. Without CUDA in libtorch (Debian's) or without a GPU,
// has_cuda() is false or cuda_device_count() is 0, and the other calls throw NotSupported.
namespace cuda {

// libtorch was built with CUDA and zeus-cpp with its NCCL (the PyPI wheel build).
bool built_with_cuda();
// Devices this process can use (after CUDA_VISIBLE_DEVICES); 0 without CUDA or a driver.
int device_count();
void set_device(int index);
// Waits until every stream of device `index` is idle.
void synchronize(int index);
// Waits until the current stream of device `index` (the model's compute; not NCCL's streams,
// which may be waiting for a peer) is idle.
void synchronize_current_stream(int index);
// The device's UUID as NVML spells it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (for a MIG
// instance, its own UUID with the "MIG-" prefix), from the CUDA runtime.
std::string device_uuid(int index);
std::string device_name(int index);

// Host-to-device copies on a side stream of one device, so that the copy of the next batch
// overlaps the work of the current step on the current stream (as PyTorch's data prefetchers
// do). Contract: used from one thread; start() takes pinned host tensors (pin them with
// pin()); hand_over() must be called on the tensors start() returned before the current
// stream uses them; it orders the copies before the current stream's next work and keeps the
// device memory from being reused while that stream may still read it.
class CopyStream {
 public:
  explicit CopyStream(int device_index);
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;

  static at::Tensor pin(const at::Tensor& host);
  std::vector<at::Tensor> start(const std::vector<at::Tensor>& host);
  void hand_over(std::vector<at::Tensor>& device_tensors);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuda
}  // namespace zeus::distributed
