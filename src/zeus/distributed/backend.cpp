#include "zeus/distributed/backend.h"

#include <ATen/Functions.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/version.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef ZEUS_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "zeus/common/errors.h"
#include "zeus/common/posix.h"

namespace zeus::distributed {

// The libtorch difference this file exists for: since 2.0 a process group implementation is a
// c10d::Backend (a ProcessGroup holds one per device type); in 1.13 ProcessGroupGloo is itself
// a c10d::ProcessGroup. Both offer the same collectives.
#if TORCH_VERSION_MAJOR >= 2
using Group = c10d::Backend;
#else
using Group = c10d::ProcessGroup;
#endif

const char* backend_name(BackendKind kind) {
  return kind == BackendKind::kNccl ? "NCCL" : "Gloo";
}

namespace {

std::string first_line(const std::exception& e) {
  std::string what = e.what();
  if (const size_t nl = what.find('\n'); nl != std::string::npos) {
    what.resize(nl);  // c10 appends a C++ backtrace
  }
  return what;
}

}  // namespace

struct Backend::Impl {
  cluster::Env env;
  BackendOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<Group> group;

  std::string where() const {
    return fmt::format("rank {}/{} (host {}, pid {})", env.rank, env.world_size, host_name(),
                       ::getpid());
  }

  [[noreturn]] void fail(const char* collective, const std::exception& e) const {
    throw PeerFailed(fmt::format(
        "{}: {} over {} failed: {}; a peer rank probably died or is stuck (check its log), or "
        "the collective timed out",
        where(), collective, backend_name(options.kind), first_line(e)));
  }

  // Runs a collective and waits; converts c10 errors into DistError naming rank and collective.
  template <typename F>
  void run(const char* collective, F start) {
    try {
      c10::intrusive_ptr<c10d::Work> work = start();
      work->wait();
    } catch (const std::exception& e) {
      fail(collective, e);
    }
  }

  void make_gloo() {
    auto group_options = c10d::ProcessGroupGloo::Options::create(options.collective_timeout);
    // Bind Gloo to the address peers reach us on: loopback for a single-node job on 127.0.0.1.
    group_options->devices.push_back(
        env.master_addr == "127.0.0.1" || env.master_addr == "localhost"
            ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
            : c10d::ProcessGroupGloo::createDefaultDevice());
    group_options->threads = 2;
    group =
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, group_options);
  }

  void make_nccl() {
#ifdef ZEUS_HAVE_CUDA
    if (options.cuda_device < 0) {
      throw ConfigError(
          fmt::format("{}: the NCCL backend needs a CUDA device (cuda_device unset)", where()));
    }
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(options.cuda_device));
    auto group_options = c10d::ProcessGroupNCCL::Options::create();
    group_options->timeout = options.collective_timeout;
    auto nccl =
        c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, group_options);
    // Bound to the rank's device: the communicator is made for it (not guessed from the rank),
    // and barrier() runs there.
    nccl->setBoundDeviceId(
        at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(options.cuda_device)));
    group = nccl;
#else
    throw NotSupported(fmt::format(
        "{}: the NCCL backend needs a libtorch with CUDA; this zeus-cpp is built against {} {} "
        "(CPU only): use Gloo, or build with the `cuda` preset (make test-cuda)",
        where(), TORCH_VERSION, "Debian's libtorch"));
#endif
  }
};

namespace {

class PendingWork final : public Backend::Pending {
 public:
  PendingWork(const Backend::Impl* impl, c10::intrusive_ptr<c10d::Work> work)
      : impl_(impl), work_(std::move(work)) {}
  void wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      impl_->fail("all_reduce (gradient bucket)", e);
    }
  }

 private:
  const Backend::Impl* impl_;
  c10::intrusive_ptr<c10d::Work> work_;
};

}  // namespace

Backend::Backend(const cluster::Env& env, const BackendOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->env = env;
  impl_->options = options;
  c10d::TCPStoreOptions store_options;
  // torchrun >= 2.0 already serves its store on MASTER_PORT, with a wire protocol libtorch
  // 1.13's client does not speak (its requests fail with "Broken pipe"): rendezvous on the next
  // port instead, served by rank 0 as usual (also with libtorch 2.x, so that both builds behave
  // alike under one launcher).
  const int port = env.agent_store ? env.master_port + 1 : env.master_port;
  store_options.port = static_cast<uint16_t>(port);
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = static_cast<size_t>(env.world_size);
  store_options.waitWorkers = true;
  store_options.timeout = options.store_timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
  } catch (const std::exception& e) {
    throw StoreError(fmt::format(
        "{}: cannot {} the rendezvous store at {}:{}: {}; {}", impl_->where(),
        env.rank == 0 ? "serve" : "reach", env.master_addr, port, first_line(e),
        env.rank == 0 ? (env.agent_store ? "under torchrun >= 2.0 zeus-cpp workers use "
                                           "MASTER_PORT + 1; is that port in use?"
                                         : "is the port in use? pick another MASTER_PORT")
                      : "check MASTER_ADDR/MASTER_PORT and that rank 0 started"));
  }
  try {
    if (options.kind == BackendKind::kNccl) {
      impl_->make_nccl();
    } else {
      impl_->make_gloo();
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw PeerFailed(fmt::format("{}: creating the {} process group failed: {}", impl_->where(),
                                 backend_name(options.kind), first_line(e)));
  }
}

Backend::~Backend() = default;

BackendKind Backend::kind() const {
  return impl_->options.kind;
}

void Backend::barrier() {
  if (impl_->options.kind == BackendKind::kNccl) {
    // NCCL's barrier only orders streams; a one-element all-reduce read back on the host blocks
    // this thread until every rank reached it, which is what callers of barrier() want.
    std::vector<at::Tensor> t{
        at::zeros({1}, at::TensorOptions().device(at::kCUDA, impl_->options.cuda_device))};
    all_reduce_sum(t);
    (void)t[0].item<float>();
    return;
  }
  impl_->run("barrier", [&] { return impl_->group->barrier(); });
}

void Backend::broadcast(std::vector<at::Tensor>& tensors, int root) {
  if (root < 0 || root >= impl_->env.world_size) {
    throw ConfigError(
        fmt::format("{}: broadcast from rank {}, which is not a rank of this world "
                    "of {}; this is a bug in the caller",
                    impl_->where(), root, impl_->env.world_size));
  }
  c10d::BroadcastOptions options;
  options.rootRank = root;
  impl_->run("broadcast", [&] { return impl_->group->broadcast(tensors, options); });
}

void Backend::all_reduce_sum(std::vector<at::Tensor>& tensors) {
  impl_->run("all_reduce", [&] { return impl_->group->allreduce(tensors); });
}

std::unique_ptr<Backend::Pending> Backend::start_all_reduce_sum(std::vector<at::Tensor>& tensors) {
  try {
    return std::make_unique<PendingWork>(impl_.get(), impl_->group->allreduce(tensors));
  } catch (const std::exception& e) {
    impl_->fail("all_reduce (gradient bucket)", e);
  }
}

namespace cuda {
namespace {

[[noreturn]] void no_cuda(const char* what) {
  throw NotSupported(fmt::format(
      "{}: this zeus-cpp is built against libtorch {} without CUDA (Debian's); build the `cuda` "
      "preset (PyPI's torch wheel) to train on GPUs, or use the CPU",
      what, TORCH_VERSION));
}

}  // namespace

bool built_with_cuda() {
#ifdef ZEUS_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int device_count() {
  // torch::cuda::device_count() is 0 in a CPU-only libtorch and without a driver.
  return static_cast<int>(torch::cuda::device_count());
}

#ifdef ZEUS_HAVE_CUDA

namespace {

void check_index(int index) {
  const int n = device_count();
  if (index < 0 || index >= n) {
    throw ConfigError(
        fmt::format("CUDA device {} does not exist: {} device(s) are visible", index, n));
  }
}

}  // namespace

void set_device(int index) {
  check_index(index);
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
}

void synchronize(int index) {
  torch::cuda::synchronize(static_cast<int64_t>(index));
}

void synchronize_current_stream(int index) {
  c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(index)).synchronize();
}

std::string device_uuid(int index) {
  check_index(index);
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  const auto* b = reinterpret_cast<const unsigned char*>(prop->uuid.bytes);
  // NVML's spelling: 8-4-4-4-12 hex digits. A MIG instance's UUID is matched with "MIG-" by the
  // caller (it tries both prefixes).
  return fmt::format(
      "GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-"
      "{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
      b[15]);
}

std::string device_name(int index) {
  check_index(index);
  return at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index))->name;
}

struct CopyStream::Impl {
  c10::DeviceIndex device;
  c10::cuda::CUDAStream stream;
  at::cuda::CUDAEvent copied;
};

CopyStream::CopyStream(int device_index) {
  check_index(device_index);
  const auto d = static_cast<c10::DeviceIndex>(device_index);
  impl_ = std::unique_ptr<Impl>(new Impl{d, c10::cuda::getStreamFromPool(false, d), {}});
}

CopyStream::~CopyStream() = default;

at::Tensor CopyStream::pin(const at::Tensor& host) {
  return host.is_pinned() ? host : host.pin_memory();
}

std::vector<at::Tensor> CopyStream::start(const std::vector<at::Tensor>& host) {
  // No wait for the current stream: the copies land in memory fresh from the side stream's
  // pool (the caching allocator hands out a block another stream used only after that stream's
  // recorded work finished), so they overlap whatever the current stream is computing.
  std::vector<at::Tensor> out;
  {
    const c10::cuda::CUDAStreamGuard guard(impl_->stream);
    for (const auto& t : host) {
      out.push_back(t.to(at::Device(at::kCUDA, impl_->device), /*non_blocking=*/true));
    }
  }
  impl_->copied = at::cuda::CUDAEvent();
  impl_->copied.record(impl_->stream);
  return out;
}

void CopyStream::hand_over(std::vector<at::Tensor>& device_tensors) {
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(impl_->device);
  impl_->copied.block(current);
  for (auto& t : device_tensors) {
    // Allocated on the side stream: without this the caching allocator could hand the memory
    // out again once the side stream moves on, while the current stream still reads it.
    t.record_stream(current.unwrap());
  }
}

#else  // no CUDA in libtorch

void set_device(int /*index*/) {
  no_cuda("cuda::set_device");
}
void synchronize(int /*index*/) {
  no_cuda("cuda::synchronize");
}
void synchronize_current_stream(int /*index*/) {
  no_cuda("cuda::synchronize_current_stream");
}
std::string device_uuid(int /*index*/) {
  no_cuda("cuda::device_uuid");
}
std::string device_name(int /*index*/) {
  no_cuda("cuda::device_name");
}

struct CopyStream::Impl {};

CopyStream::CopyStream(int /*device_index*/) {
  no_cuda("cuda::CopyStream");
}
CopyStream::~CopyStream() = default;
at::Tensor CopyStream::pin(const at::Tensor& /*host*/) {
  no_cuda("cuda::CopyStream::pin");
}
std::vector<at::Tensor> CopyStream::start(const std::vector<at::Tensor>& /*host*/) {
  no_cuda("cuda::CopyStream::start");
}
void CopyStream::hand_over(std::vector<at::Tensor>& /*device_tensors*/) {
  no_cuda("cuda::CopyStream::hand_over");
}

#endif

}  // namespace cuda
}  // namespace zeus::distributed
