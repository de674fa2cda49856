#include "zeus/distributed/gradient_sync.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <chrono>
#include <mutex>

#include "zeus/common/errors.h"
#include "zeus/common/sync_wait.h"
#include "zeus/distributed/backend.h"
#include "zeus/distributed/context.h"
#include "zeus/distributed/sync_model.h"

namespace zeus::distributed {

// Note [gradient buckets]:
//   1. At construction, parameters are assigned to buckets in reverse registration order (the
//      order backward produces their gradients), each bucket one dtype and at most its cap.
//   2. Each contiguous parameter's .grad is made to share storage with its slot of the bucket's
//      flat buffer (set_(), not a view: libtorch's zero_grad() detaches .grad in place, which a
//      view forbids), so backward accumulates straight into the bucket and the averages land
//      in .grad without copies, as DDP's gradient_as_bucket_view does.
//   3. A post-hook on each parameter's AccumulateGrad node runs after the gradient has been
//      accumulated; when .grad no longer shares the slot (the user set it to a new tensor, or
//      it was undefined and autograd stole the incoming gradient), the hook copies it into the
//      slot and re-aliases. Then it counts the parameter as ready.
//   4. When a bucket is complete, it and every complete bucket after the last launched one are
//      launched, strictly in bucket order, so all ranks issue the same collectives in the same
//      order even if their hooks fire in a different order.
//   5. finish() launches what is left (unused parameters as their current gradient, or zeros
//      when they have none, with find_unused_parameters), waits for every bucket and divides by
//      the world size; non-aliased gradients (non-contiguous parameters) are copied back.
struct GradientSync::State {
  struct Bucket {
    std::vector<size_t> params;    // indices into State::params
    std::vector<int64_t> offsets;  // in elements, per slot
    at::Tensor flat;
    size_t ready = 0;
    std::unique_ptr<Backend::Pending> pending;
  };
  struct Hooked {
    // std::shared_ptr<Node> in libtorch 1.13, c10::intrusive_ptr<Node> in 2.x: whichever
    // grad_accumulator() returns, so this file compiles against both (backend.h's rule allows
    // this one version difference outside backend.cpp, since it is spelled by the type itself).
    decltype(torch::autograd::impl::grad_accumulator(
        std::declval<const at::Tensor&>())) accumulator;
    uintptr_t key;
  };

  Context& ctx;
  GradientSyncOptions options;
  std::vector<at::Tensor> buffers;
  std::vector<std::string> names;
  std::vector<at::Tensor> params;
  std::vector<size_t> bucket_of;
  std::vector<size_t> slot_of;
  std::vector<bool> ready;
  std::vector<Bucket> buckets;
  std::vector<Hooked> hooks;
  size_t next_launch = 0;
  bool no_sync = false;
  std::mutex mu;  // hooks may run on autograd worker threads

  State(Context& c, GradientSyncOptions o) : ctx(c), options(o) {}

  void launch_ready_buckets() {
    while (next_launch < buckets.size() &&
           buckets[next_launch].ready == buckets[next_launch].params.size()) {
      Bucket& b = buckets[next_launch++];
      std::vector<at::Tensor> t{b.flat};
      b.pending = ctx.backend()->start_all_reduce_sum(t);
    }
  }

  at::Tensor slot(size_t i) {
    Bucket& b = buckets[bucket_of[i]];
    return b.flat.narrow(0, b.offsets[slot_of[i]], params[i].numel());
  }

  bool aliased(size_t i) {
    const at::Tensor& grad = params[i].grad();
    return grad.defined() && grad.data_ptr() == slot(i).data_ptr() &&
           grad.sizes() == params[i].sizes();
  }

  // Makes .grad share the slot's storage (contiguous parameters only), keeping its value; an
  // undefined gradient becomes zeros.
  void alias(size_t i) {
    at::Tensor& p = params[i];
    at::Tensor s = slot(i);
    const at::Tensor& grad = p.grad();
    if (grad.defined()) {
      s.copy_(grad.reshape({-1}));
    } else {
      s.zero_();
    }
    if (!p.is_contiguous()) {
      return;  // copied in and out instead
    }
    at::Tensor g = at::empty({0}, s.options());
    g.set_(s.storage(), s.storage_offset(), p.sizes(), p.strides());
    p.mutable_grad() = g;
  }

  void copy_in(size_t i) {
    if (!aliased(i)) {
      alias(i);
    }
  }

  void on_ready(size_t i) {
    std::lock_guard lock(mu);
    if (no_sync || ready[i]) {
      return;
    }
    copy_in(i);
    ready[i] = true;
    ++buckets[bucket_of[i]].ready;
    launch_ready_buckets();
  }
};

GradientSync::GradientSync(Context& ctx, torch::nn::Module& module, GradientSyncOptions options)
    : state_(std::make_unique<State>(ctx, options)) {
  State& s = *state_;
  for (const auto& item : module.named_parameters()) {
    if (item.value().requires_grad()) {
      s.names.push_back(item.key());
      s.params.push_back(item.value());
    }
  }
  s.buffers = module.buffers();
  if (ctx.world_size() > 1 && ctx.backend_kind() == BackendKind::kNccl) {
    for (size_t i = 0; i < s.params.size(); ++i) {
      if (s.params[i].device() != ctx.device()) {
        throw ConfigError(fmt::format(
            "rank {}: GradientSync over NCCL needs the parameters on {}, but {} is on {}; move "
            "the model first (model->to(ctx.device()))",
            ctx.rank(), ctx.device().str(), s.names[i], s.params[i].device().str()));
      }
    }
  }
  s.ready.assign(s.params.size(), false);
  s.bucket_of.assign(s.params.size(), 0);
  s.slot_of.assign(s.params.size(), 0);
  if (ctx.world_size() == 1) {
    return;  // nothing to average
  }
  size_t cap = options.first_bucket_cap_bytes;
  for (size_t k = s.params.size(); k-- > 0;) {
    const at::Tensor& p = s.params[k];
    const size_t bytes = static_cast<size_t>(p.numel()) * p.element_size();
    const bool fits =
        !s.buckets.empty() &&
        s.params[s.buckets.back().params.front()].scalar_type() == p.scalar_type() &&
        (s.buckets.back().offsets.back() + s.params[s.buckets.back().params.back()].numel()) *
                    static_cast<int64_t>(p.element_size()) +
                static_cast<int64_t>(bytes) <=
            static_cast<int64_t>(cap);
    if (!fits) {
      if (!s.buckets.empty()) {
        cap = options.bucket_cap_bytes;
      }
      s.buckets.emplace_back();
    }
    State::Bucket& b = s.buckets.back();
    b.offsets.push_back(b.params.empty() ? 0
                                         : b.offsets.back() + s.params[b.params.back()].numel());
    s.slot_of[k] = b.params.size();
    b.params.push_back(k);
    s.bucket_of[k] = s.buckets.size() - 1;
  }
  for (auto& b : s.buckets) {
    const at::Tensor& last = s.params[b.params.back()];
    b.flat = at::zeros({b.offsets.back() + last.numel()}, last.options().requires_grad(false));
  }
  for (size_t i = 0; i < s.params.size(); ++i) {
    s.alias(i);
  }
  for (size_t i = 0; i < s.params.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(s.params[i]);
    const uintptr_t key =
        accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [state = state_.get(), i](const torch::autograd::variable_list& outputs,
                                      const torch::autograd::variable_list&) {
              state->on_ready(i);
              return outputs;
            }));
    s.hooks.push_back({std::move(accumulator), key});
  }
}

GradientSync::~GradientSync() {
  for (auto& h : state_->hooks) {
    h.accumulator->del_post_hook(h.key);
  }
}

void GradientSync::prepare_forward() {
  if (state_->options.broadcast_buffers) {
    sync_tensors(state_->ctx, state_->buffers, /*average=*/false);
  }
}

void GradientSync::finish() {
  State& s = *state_;
  if (s.ctx.world_size() == 1) {
    return;
  }
  std::lock_guard lock(s.mu);
  if (s.no_sync) {
    return;
  }
  std::vector<std::string> unused;
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (!s.ready[i]) {
      unused.push_back(s.names[i]);
    }
  }
  if (!unused.empty() && !s.options.find_unused_parameters) {
    throw Error(fmt::format(
        "rank {}: parameter(s) {} got no gradient this iteration; pass "
        "GradientSyncOptions{{.find_unused_parameters = true}} if that is expected, else check "
        "that backward ran on every rank",
        s.ctx.rank(), fmt::join(unused, ", ")));
  }
  // Note [own step time]: when an energy job asks (common/sync_wait.h), the wait below is
  // counted, from the moment this rank's own backward is done (on CUDA its compute stream is
  // waited for first) to the moment the averaged gradients are in place: what the slower ranks
  // and the transfer cost this rank.
  const bool timed = sync_wait::armed();
  const int cuda_index =
      !s.params.empty() && s.params.front().is_cuda() ? s.params.front().get_device() : -1;
  std::chrono::steady_clock::time_point wait_from;
  if (timed) {
    if (cuda_index >= 0) {
      cuda::synchronize_current_stream(cuda_index);
    }
    wait_from = std::chrono::steady_clock::now();
  }
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (!s.ready[i]) {
      s.copy_in(i);  // zeros: unused this iteration
      s.ready[i] = true;
      ++s.buckets[s.bucket_of[i]].ready;
    }
  }
  s.launch_ready_buckets();
  const double world = s.ctx.world_size();
  for (auto& b : s.buckets) {
    b.pending->wait();
    b.pending.reset();
    b.flat.div_(world);
    for (size_t i : b.params) {
      if (s.aliased(i)) {
        continue;
      }
      at::Tensor& p = s.params[i];
      const at::Tensor avg = s.slot(i).view_as(p);
      if (p.grad().defined()) {
        p.mutable_grad().copy_(avg);
      } else {
        p.mutable_grad() = avg.clone();
      }
    }
    b.ready = 0;
  }
  s.ready.assign(s.params.size(), false);
  s.next_launch = 0;
  if (timed) {
    if (cuda_index >= 0) {
      cuda::synchronize_current_stream(cuda_index);
    }
    sync_wait::add(std::chrono::steady_clock::now() - wait_from);
  }
}

size_t GradientSync::bucket_count() const {
  return state_->buckets.size();
}

GradientSync::NoSync::NoSync(GradientSync& sync) : sync_(sync) {
  std::lock_guard lock(sync_.state_->mu);
  sync_.state_->no_sync = true;
}

GradientSync::NoSync::~NoSync() {
  std::lock_guard lock(sync_.state_->mu);
  sync_.state_->no_sync = false;
}

}  // namespace zeus::distributed
