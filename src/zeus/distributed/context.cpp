#include "zeus/distributed/context.h"

#include <ATen/Functions.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "zeus/cluster/device_binding.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/malloc_tuning.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"

namespace zeus::distributed {
namespace {

std::mutex g_mu;
std::weak_ptr<Context> g_current;

std::optional<std::string> visible_devices_env() {
  return cluster::runtime_visible_devices();
}

}  // namespace

DeviceType parse_device_type(std::string_view text, std::string_view what) {
  for (const auto& [name, type] :
       {std::pair{"auto", DeviceType::kAuto}, std::pair{"cuda", DeviceType::kCuda},
        std::pair{"cpu", DeviceType::kCpu}}) {
    if (iequals(text, name)) {
      return type;
    }
  }
  throw ConfigError(fmt::format("{} is '{}'; use auto, cuda or cpu", what, text));
}

BackendKind parse_backend_kind(std::string_view text, std::string_view what) {
  if (iequals(text, "nccl")) {
    return BackendKind::kNccl;
  }
  if (iequals(text, "gloo")) {
    return BackendKind::kGloo;
  }
  throw ConfigError(fmt::format("{} is '{}'; use nccl or gloo", what, text));
}

c10::Device choose_device(const DeviceRequest& request, const cluster::Env& env) {
  if (request.type == DeviceType::kCpu) {
    return c10::Device(c10::kCPU);
  }
  const bool cuda = request.cuda_built && request.cuda_device_count > 0;
  if (!cuda) {
    if (request.type == DeviceType::kAuto) {
      return c10::Device(c10::kCPU);
    }
    throw ConfigError(fmt::format(
        "rank {} (host {}): device type cuda was asked for, but {}; train on the CPU "
        "(--device-type cpu) or {}",
        env.rank, host_name(),
        request.cuda_built
            ? fmt::format("CUDA sees no device ({})",
                          cluster::describe_visible_devices(request.visible_devices))
            : std::string("this zeus-cpp is built against a libtorch without CUDA (Debian's)"),
        request.cuda_built ? "check nvidia-smi and CUDA_VISIBLE_DEVICES"
                           : "build the `cuda` preset (PyPI's torch wheel)"));
  }
  const int index = cluster::cuda_device_index({.cuda_device_count = request.cuda_device_count,
                                                .visible_devices = request.visible_devices,
                                                .cuda_device = request.cuda_device},
                                               env);
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

Context::Context(const InitOptions& options) : env_(cluster::detect_env(options.env)) {
  if (options.tune_malloc) {
    tune_malloc_for_training();
  }
  configure_rank_logging({env_.rank, env_.world_size, env_.is_local_master(), options.log_all_ranks,
                          options.log_file});
  const bool wants_cuda = options.device != DeviceType::kCpu;
  device_ = choose_device({.type = options.device,
                           .cuda_device = options.cuda_device,
                           .cuda_built = cuda::built_with_cuda(),
                           .cuda_device_count = wants_cuda ? cuda::device_count() : 0,
                           .visible_devices = visible_devices_env()},
                          env_);
  if (device_.is_cuda()) {
    cuda::set_device(device_.index());
  }
  backend_kind_ =
      options.backend_kind.value_or(device_.is_cuda() ? BackendKind::kNccl : BackendKind::kGloo);
  if (backend_kind_ == BackendKind::kNccl && !device_.is_cuda()) {
    throw ConfigError(fmt::format(
        "rank {} (host {}): the NCCL backend needs a CUDA device, but this rank trains on the "
        "CPU; use Gloo, or device type cuda",
        env_.rank, host_name()));
  }
  if (env_.world_size > 1) {
    // Every rank fails at once on a master no one can reach by name, instead of retrying the
    // store until its timeout.
    if (auto why = cluster::resolve_error(env_.master_addr)) {
      throw ConfigError(fmt::format(
          "rank {} (host {}): the master address '{}' (from {}) does not resolve: {}; set "
          "MASTER_ADDR to an address every node reaches",
          env_.rank, host_name(), env_.master_addr,
          env_.master_source.empty() ? "the launcher" : env_.master_source, *why));
    }
    BackendOptions backend = options.backend;
    backend.kind = backend_kind_;
    backend.cuda_device = device_.is_cuda() ? device_.index() : -1;
    backend_ = std::make_unique<Backend>(env_, backend);
    // Returns once every rank is connected: a rank that fails right after init (a bad option,
    // which every rank then reports alike) cannot cut a peer's connection still being set up,
    // which would make that peer's failure look like the cause.
    backend_->barrier();
  }
  logger().debug("joined: {}; device {}, backend {}", env_.describe(), device_.str(),
                 backend_name(backend_kind_));
}

Context::~Context() = default;

c10::Device Context::collective_device() const {
  return backend_kind_ == BackendKind::kNccl ? device_ : c10::Device(c10::kCPU);
}

void Context::synchronize_device() {
  if (device_.is_cuda()) {
    cuda::synchronize(device_.index());
  }
}

void Context::barrier() {
  if (backend_) {
    backend_->barrier();
  }
}

double Context::all_reduce_sum(double value) {
  all_reduce_sum(std::span<double>(&value, 1));
  return value;
}

double Context::all_reduce_mean(double value) {
  return all_reduce_sum(value) / world_size();
}

double Context::all_reduce_max(double value) {
  if (!backend_) {
    return value;
  }
  // max = the largest of the all-gathered values; with sum-only collectives, gather by slots.
  std::vector<double> slots(static_cast<size_t>(world_size()), 0.0);
  slots[static_cast<size_t>(rank())] = value;
  all_reduce_sum(slots);
  return *std::max_element(slots.begin(), slots.end());
}

namespace {

// The values as a double tensor on `device` (a host copy first: these vectors are small).
std::vector<at::Tensor> to_device(std::span<const double> values, c10::Device device) {
  at::Tensor host = at::empty({static_cast<int64_t>(values.size())}, at::kDouble);
  std::copy(values.begin(), values.end(), host.data_ptr<double>());
  return {device.is_cpu() ? host : host.to(device)};
}

void from_device(const at::Tensor& t, std::span<double> values) {
  const at::Tensor host = t.cpu();  // waits for the collective on CUDA
  std::copy_n(host.data_ptr<double>(), values.size(), values.begin());
}

}  // namespace

void Context::all_reduce_sum(std::span<double> values) {
  if (!backend_ || values.empty()) {
    return;
  }
  auto t = to_device(values, collective_device());
  backend_->all_reduce_sum(t);
  from_device(t[0], values);
}

void Context::broadcast(std::span<double> values, int root) {
  if (!backend_ || values.empty()) {
    return;
  }
  auto t = to_device(values, collective_device());
  backend_->broadcast(t, root);
  from_device(t[0], values);
}

std::shared_ptr<Context> init(const InitOptions& options) {
  auto context = std::make_shared<Context>(options);
  std::lock_guard lock(g_mu);
  g_current = context;
  return context;
}

Context& current() {
  std::lock_guard lock(g_mu);
  auto context = g_current.lock();
  if (!context) {
    throw Error("zeus::distributed::init() has not been called (or its Context was destroyed)");
  }
  return *context;  // the caller's shared_ptr from init() keeps it alive
}

double all_reduce_mean(double value) {
  return current().all_reduce_mean(value);
}

bool is_master() {
  return current().is_master();
}
bool is_local_master() {
  return current().is_local_master();
}
int rank() {
  return current().rank();
}
int world_size() {
  return current().world_size();
}

}  // namespace zeus::distributed
