#include "zeus/distributed/sync_model.h"

#include <torch/nn/module.h>

#include <map>

#include "zeus/distributed/context.h"

namespace zeus::distributed {
// Flattens same-dtype tensors into one buffer on the backend's device (the model may live
// elsewhere: a CPU model under NCCL, a CUDA one under Gloo), runs the collective on it, and
// copies back.
void sync_tensors(Context& ctx, const std::vector<at::Tensor>& tensors, bool average) {
  if (ctx.world_size() == 1 || tensors.empty()) {
    return;
  }
  torch::NoGradGuard no_grad;
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& t : tensors) {
    by_dtype[t.scalar_type()].push_back(t);
  }
  for (auto& [dtype, group] : by_dtype) {
    std::vector<at::Tensor> flat_parts;
    flat_parts.reserve(group.size());
    for (const auto& t : group) {
      flat_parts.push_back(t.detach().reshape({-1}));
    }
    std::vector<at::Tensor> flat{at::cat(flat_parts).to(ctx.collective_device())};
    const bool can_average = average && at::isFloatingType(dtype);
    if (can_average) {
      ctx.backend()->all_reduce_sum(flat);
      flat[0].div_(ctx.world_size());
    } else {
      ctx.backend()->broadcast(flat, 0);
    }
    int64_t offset = 0;
    for (auto& t : group) {
      const int64_t n = t.numel();
      t.detach().copy_(flat[0].narrow(0, offset, n).view_as(t));
      offset += n;
    }
  }
}

void sync_model(Context& ctx, torch::nn::Module& module, const SyncModelOptions& options) {
  if (ctx.world_size() == 1) {
    return;
  }
  sync_tensors(ctx, module.parameters(), options.reduce_parameters);
  sync_tensors(ctx, module.buffers(), options.reduce_buffers);
}

}  // namespace zeus::distributed
