// Making every replica start equal without wrapping the model in DDP.
#pragma once

#include <vector>

namespace at {
class Tensor;
}  // namespace at

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace zeus::distributed {

class Context;

struct SyncModelOptions {
  bool reduce_parameters = false;  // average parameters instead of taking the master's
  bool reduce_buffers = false;     // average buffers (e.g. BatchNorm statistics) instead
};

// Broadcasts (or averages) every parameter and buffer from the global master, coalesced into
// one flat buffer per dtype. Collective: every rank calls it with the same module structure.
void sync_model(Context& ctx, torch::nn::Module& module, const SyncModelOptions& options = {});

// The same for a list of tensors: broadcast from the master, or (average, floating point only)
// replaced by the mean over ranks; one flat buffer per dtype. Collective.
void sync_tensors(Context& ctx, const std::vector<at::Tensor>& tensors, bool average);

}  // namespace zeus::distributed
