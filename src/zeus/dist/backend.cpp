#include "zeus/dist/backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "zeus/common/errors.h"
#include "zeus/common/posix.h"

namespace zeus::dist {

struct Backend::Impl {
  cluster::Env env;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;

  std::string where() const {
    return fmt::format("rank {}/{} (host {}, pid {})", env.rank, env.world_size, host_name(),
                       ::getpid());
  }

  [[noreturn]] void fail(const char* collective, const std::exception& e) const {
    std::string what = e.what();
    if (const size_t nl = what.find('\n'); nl != std::string::npos) {
      what.resize(nl);  // c10 appends a C++ backtrace
    }
    throw PeerFailed(fmt::format(
        "{}: {} failed: {}; a peer rank probably died or is stuck (check its log), or the "
        "collective timed out",
        where(), collective, what));
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
  c10d::TCPStoreOptions store_options;
  // torchrun >= 2.0 already serves its store on MASTER_PORT, with a wire protocol libtorch
  // 1.13's client does not speak (its requests fail with "Broken pipe"): rendezvous on the next
  // port instead, served by rank 0 as usual.
  const int port = env.agent_store ? env.master_port + 1 : env.master_port;
  store_options.port = static_cast<uint16_t>(port);
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = static_cast<size_t>(env.world_size);
  store_options.waitWorkers = true;
  store_options.timeout = options.store_timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const size_t nl = what.find('\n'); nl != std::string::npos) {
      what.resize(nl);
    }
    throw StoreError(fmt::format(
        "{}: cannot {} the rendezvous store at {}:{}: {}; {}", impl_->where(),
        env.rank == 0 ? "serve" : "reach", env.master_addr, port, what,
        env.rank == 0 ? (env.agent_store ? "under torchrun >= 2.0 zeus-cpp workers use "
                                           "MASTER_PORT + 1; is that port in use?"
                                         : "is the port in use? pick another MASTER_PORT")
                      : "check MASTER_ADDR/MASTER_PORT and that rank 0 started"));
  }
  auto group_options = c10d::ProcessGroupGloo::Options::create(options.collective_timeout);
  // Bind Gloo to the address peers reach us on: loopback for a single-node job on 127.0.0.1.
  group_options->devices.push_back(
      env.master_addr == "127.0.0.1" || env.master_addr == "localhost"
          ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
          : c10d::ProcessGroupGloo::createDefaultDevice());
  group_options->threads = 2;
  try {
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, env.rank,
                                                               env.world_size, group_options);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const size_t nl = what.find('\n'); nl != std::string::npos) {
      what.resize(nl);
    }
    throw PeerFailed(
        fmt::format("{}: creating the Gloo process group failed: {}", impl_->where(), what));
  }
}

Backend::~Backend() = default;

void Backend::barrier() {
  impl_->run("barrier", [&] { return impl_->group->barrier(); });
}

void Backend::broadcast(std::vector<at::Tensor>& tensors, int root) {
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

}  // namespace zeus::dist
