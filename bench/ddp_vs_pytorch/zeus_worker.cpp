// One rank of the DDP benchmark on zeus-cpp: the small Fashion-MNIST CNN of ddp_peer.py, trained
// data-parallel with GradientSync (or one flat all-reduce after backward, or no sync at all, to
// measure what synchronization costs). Started with torchrun's environment by run.py; rank 0
// prints one JSON line with the measured throughput and its minor page faults per iteration
// (the cost of glibc's dynamic mmap threshold when malloc is left untuned: bench/README.md).
// --count-waits arms common/sync_wait.h as an energy job does while profiling and sampling a
// GPU's pace (bench/per_gpu_plan/armed_cost.py measures what that costs a step).
#include <sys/resource.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <CLI/CLI.hpp>
#include <array>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "net.h"
#include "zeus/common/sync_wait.h"
#include "zeus/data/fashion_mnist.h"
#include "zeus/distributed/backend.h"
#include "zeus/distributed/context.h"
#include "zeus/distributed/distributed_sampler.h"
#include "zeus/distributed/gradient_sync.h"
#include "zeus/distributed/sync_model.h"

namespace F = torch::nn::functional;

using zeus::examples::Net;

namespace {

// Minor page faults of this process so far: a buffer that glibc mmaps afresh every step costs
// one per 4 KiB page touched.
long minor_faults() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// The baseline GradientSync is measured against: every gradient in one buffer, one blocking
// all-reduce after backward, no overlap.
void flat_all_reduce(zeus::distributed::Context& ctx, Net& net) {
  std::vector<torch::Tensor> grads;
  for (auto& p : net.parameters())
    grads.push_back(p.grad().flatten());
  std::vector<torch::Tensor> flat{torch::cat(grads)};
  ctx.backend()->all_reduce_sum(flat);
  flat[0].div_(ctx.world_size());
  int64_t offset = 0;
  for (auto& p : net.parameters()) {
    const int64_t n = p.numel();
    p.mutable_grad().view(-1).copy_(flat[0].narrow(0, offset, n));
    offset += n;
  }
}

}  // namespace

static int run(const std::string& sync, int iters, int warmup, int64_t batch_size, int threads,
               const std::string& data_dir, bool breakdown, double bucket_cap_mb, bool tune_malloc,
               bool count_waits) {
  zeus::sync_wait::arm(count_waits);
  torch::set_num_threads(threads);
  zeus::distributed::InitOptions init_options;
  init_options.tune_malloc = tune_malloc;
  // The comparison is with DDP over Gloo on the CPU (ddp_peer.py), also on a GPU node.
  init_options.device = zeus::distributed::DeviceType::kCpu;
  auto ctx = zeus::distributed::init(init_options);
  auto train = zeus::data::load_fashion_mnist(zeus::data::Split::kTrain, {.dir = data_dir});

  torch::manual_seed(1 + ctx->rank());  // different weights per rank: sync_model must fix that
  Net net;
  zeus::distributed::sync_model(*ctx, net);
  std::unique_ptr<zeus::distributed::GradientSync> grad_sync;
  if (sync == "gradsync") {
    zeus::distributed::GradientSyncOptions options;
    options.bucket_cap_bytes = static_cast<size_t>(bucket_cap_mb * (1 << 20));
    grad_sync = std::make_unique<zeus::distributed::GradientSync>(*ctx, net, options);
  }
  torch::optim::SGD optimizer(net.parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));

  zeus::distributed::DistributedSampler sampler(
      train.size(), {.num_replicas = ctx->world_size(), .rank = ctx->rank(), .seed = 0});
  std::vector<int64_t> order;
  size_t cursor = 0;
  int64_t epoch = 0;
  auto next_batch = [&] {
    if (cursor + batch_size > order.size()) {
      sampler.set_epoch(epoch++);
      order = sampler.indices();
      cursor = 0;
    }
    auto index = torch::from_blob(order.data() + cursor, {batch_size}, torch::kLong);
    cursor += batch_size;
    return std::pair{train.images.index_select(0, index), train.labels.index_select(0, index)};
  };

  double loss_sum = 0;
  // Seconds per phase, summed over the measured iterations: data, forward, backward, sync, step.
  std::array<double, 5> phase_s{};
  auto step = [&] {
    using Clock = std::chrono::steady_clock;
    auto t0 = Clock::now();
    auto lap = [&](size_t phase) {
      const auto now = Clock::now();
      phase_s[phase] += std::chrono::duration<double>(now - t0).count();
      t0 = now;
    };
    auto [x, y] = next_batch();
    lap(0);
    optimizer.zero_grad();
    if (grad_sync)
      grad_sync->prepare_forward();
    auto loss = F::cross_entropy(net.forward(x), y);
    lap(1);
    loss.backward();
    lap(2);
    if (grad_sync)
      grad_sync->finish();
    if (sync == "flat")
      flat_all_reduce(*ctx, net);
    lap(3);
    optimizer.step();
    loss_sum += loss.item<double>();
    lap(4);
  };

  for (int i = 0; i < warmup; ++i)
    step();
  ctx->barrier();
  loss_sum = 0;
  phase_s = {};
  const long faults_before = minor_faults();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    step();
  ctx->barrier();
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double faults_per_iter =
      static_cast<double>(minor_faults() - faults_before) / static_cast<double>(iters);
  const double mean_loss = ctx->all_reduce_mean(loss_sum / iters);
  if (breakdown) {
    std::fprintf(stderr,
                 "rank %d ms/iter: data %.2f forward %.2f backward %.2f sync %.2f step %.2f\n",
                 ctx->rank(), phase_s[0] * 1e3 / iters, phase_s[1] * 1e3 / iters,
                 phase_s[2] * 1e3 / iters, phase_s[3] * 1e3 / iters, phase_s[4] * 1e3 / iters);
  }
  if (ctx->is_master()) {
    std::printf(
        "{\"side\": \"zeus-cpp\", \"sync\": \"%s\", \"world\": %d, \"iters\": %d, "
        "\"batch_size\": %lld, \"elapsed_s\": %.6f, \"samples_per_s\": %.3f, \"mean_loss\": "
        "%.5f, \"minor_faults_per_iter\": %.1f, \"count_waits\": %s}\n",
        sync.c_str(), ctx->world_size(), iters, static_cast<long long>(batch_size), elapsed_s,
        static_cast<double>(iters) * static_cast<double>(batch_size) * ctx->world_size() /
            elapsed_s,
        mean_loss, faults_per_iter, count_waits ? "true" : "false");
  }
  return 0;
}

int main(int argc, char** argv) {
  CLI::App app{"zeus-cpp side of bench/ddp_vs_pytorch"};
  std::string sync = "gradsync";
  int iters = 200;
  int warmup = 20;
  int64_t batch_size = 64;
  int threads = 1;
  std::string data_dir = zeus::data::kFashionMnistDir;
  app.add_option("--sync", sync, "gradsync | flat | none")
      ->check(CLI::IsMember({"gradsync", "flat", "none"}));
  app.add_option("--iters", iters, "measured iterations per rank")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "iterations before the clock starts");
  app.add_option("--batch-size", batch_size, "per rank")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "intra-op threads")->check(CLI::PositiveNumber);
  app.add_option("--data", data_dir, "directory with the Fashion-MNIST IDX files");
  double bucket_cap_mb = 25;
  app.add_option("--bucket-cap-mb", bucket_cap_mb, "GradientSync's bucket cap (MiB)");
  bool glibc_malloc = false;
  app.add_flag("--glibc-malloc", glibc_malloc,
               "InitOptions::tune_malloc = false: glibc's default (dynamic) malloc thresholds");
  bool breakdown = false;
  app.add_flag("--breakdown", breakdown, "print each rank's time per phase to stderr");
  bool count_waits = false;
  app.add_flag("--count-waits", count_waits,
               "count the waits at the gradient sync (an energy job's profiling and pace samples)");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(sync, iters, warmup, batch_size, threads, data_dir, breakdown, bucket_cap_mb,
               !glibc_malloc, count_waits);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zeus_ddp_worker: %s\n", e.what());
    return 1;
  }
}
