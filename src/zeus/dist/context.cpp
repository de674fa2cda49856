#include "zeus/dist/context.h"

#include <ATen/Functions.h>

#include <mutex>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/malloc_tuning.h"

namespace zeus::dist {
namespace {

std::mutex g_mu;
std::weak_ptr<Context> g_current;

}  // namespace

Context::Context(const InitOptions& options) : env_(cluster::detect_env(options.env)) {
  if (options.tune_malloc) {
    tune_malloc_for_training();
  }
  configure_rank_logging({env_.rank, env_.world_size, env_.is_local_master(), options.log_all_ranks,
                          options.log_file});
  if (env_.world_size > 1) {
    backend_ = std::make_unique<Backend>(env_, options.backend);
  }
  logger().debug("joined: {}", env_.describe());
}

Context::~Context() = default;

void Context::barrier() {
  if (backend_) {
    backend_->barrier();
  }
}

double Context::all_reduce_sum(double value) {
  if (!backend_) {
    return value;
  }
  std::vector<at::Tensor> t{at::full({1}, value, at::kDouble)};
  backend_->all_reduce_sum(t);
  return t[0].item<double>();
}

double Context::all_reduce_mean(double value) {
  return all_reduce_sum(value) / world_size();
}

double Context::all_reduce_max(double value) {
  if (!backend_) {
    return value;
  }
  // max = the largest of the all-gathered values; with sum-only collectives, gather by slots.
  std::vector<at::Tensor> t{at::zeros({world_size()}, at::kDouble)};
  t[0][rank()] = value;
  backend_->all_reduce_sum(t);
  return t[0].max().item<double>();
}

void Context::all_reduce_sum(std::span<double> values) {
  if (!backend_ || values.empty()) {
    return;
  }
  std::vector<at::Tensor> t{at::empty({static_cast<int64_t>(values.size())}, at::kDouble)};
  std::copy(values.begin(), values.end(), t[0].data_ptr<double>());
  backend_->all_reduce_sum(t);
  std::copy_n(t[0].data_ptr<double>(), values.size(), values.begin());
}

void Context::broadcast(std::span<double> values, int root) {
  if (!backend_ || values.empty()) {
    return;
  }
  std::vector<at::Tensor> t{at::empty({static_cast<int64_t>(values.size())}, at::kDouble)};
  std::copy(values.begin(), values.end(), t[0].data_ptr<double>());
  backend_->broadcast(t, root);
  std::copy_n(t[0].data_ptr<double>(), values.size(), values.begin());
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
    throw Error("zeus::dist::init() has not been called (or its Context was destroyed)");
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

}  // namespace zeus::dist
