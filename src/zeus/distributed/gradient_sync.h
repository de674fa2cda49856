// Averaging gradients across ranks after backward, as DistributedDataParallel does, for users
// who do not wrap their model: parameters in buckets (reverse registration order, first bucket
// 1 MiB, then 25 MiB), each bucket's all-reduce launched from gradient hooks as soon as its
// gradients are accumulated, so communication overlaps the rest of backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace zeus::distributed {

class Context;

struct GradientSyncOptions {
  size_t bucket_cap_bytes = 25u << 20;
  size_t first_bucket_cap_bytes = 1u << 20;
  // Parameters that get no gradient in an iteration count as zero instead of an error.
  bool find_unused_parameters = false;
  // prepare_forward() broadcasts the module's buffers (e.g. BatchNorm statistics) from the
  // master, as DDP does before each forward.
  bool broadcast_buffers = false;
};

// Contract: construct once after sync_model(); each iteration call prepare_forward(), run
// forward and backward, then finish() before the optimizer step. Every rank must run the same
// number of backward passes. Inside a no_sync() scope the backward passes only accumulate locally
// (gradient accumulation); the next synchronized backward averages the accumulated gradients.
class GradientSync {
 public:
  GradientSync(Context& ctx, torch::nn::Module& module, GradientSyncOptions options = {});
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Call before each forward: broadcasts buffers when broadcast_buffers is set. Collective.
  void prepare_forward();

  // Waits for the buckets still in flight, launches any not yet launched, and writes the
  // averaged gradients back to the parameters. Throws Error naming the parameters that got no
  // gradient (without find_unused_parameters), and PeerFailed when a peer died.
  void finish();

  // While the returned scope lives, backward does not synchronize.
  class NoSync {
   public:
    explicit NoSync(GradientSync& sync);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    GradientSync& sync_;
  };
  NoSync no_sync() { return NoSync(*this); }

  size_t bucket_count() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace zeus::distributed
