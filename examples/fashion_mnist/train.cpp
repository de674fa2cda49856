// Data-parallel training of a small CNN on Fashion-MNIST (Debian's dataset-fashion-mnist), with
// zeus::dist: the same program runs under all four launch methods.
//   zeus run --nproc-per-node 2 ./fashion_mnist --epochs 3        (torchrun's environment)
//   zeus run --nproc-per-node 2 --local-rank-arg ./fashion_mnist   (legacy --local_rank)
//   ./fashion_mnist --spawn 2                                      (in-process start)
//   srun --ntasks-per-node 2 ./fashion_mnist                       (Slurm's SLURM_* variables)
// Each rank trains on its DistributedSampler shard; GradientSync averages gradients; test
// accuracy is all-reduced; the master prints one line per epoch. Energy optimization
// (zeus::DataLoader) is issue #6's next step; this is the training loop it will drive.
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "net.h"
#include "zeus/cluster/env.h"
#include "zeus/common/errors.h"
#include "zeus/data/fashion_mnist.h"
#include "zeus/dist/context.h"
#include "zeus/dist/distributed_sampler.h"
#include "zeus/dist/gradient_sync.h"
#include "zeus/dist/spawn.h"
#include "zeus/dist/sync_model.h"

namespace F = torch::nn::functional;

namespace {

using zeus::examples::Net;

struct Options {
  int epochs = 3;
  int64_t batch_size = 64;  // per rank
  double lr = 0.05;
  double momentum = 0.9;
  double target_accuracy = 0.88;
  int threads = 1;
  uint64_t seed = 1;
  int64_t limit_train = 0;  // > 0: only this many training samples (quick runs)
  std::string data_dir = zeus::data::kFashionMnistDir;
};

// Accuracy of `net` on the test split, over all ranks (each evaluates its shard).
double evaluate(zeus::dist::Context& ctx, Net& net, const zeus::data::ImageDataset& test) {
  torch::NoGradGuard no_grad;
  net.eval();
  zeus::dist::DistributedSampler sampler(
      test.size(), {.num_replicas = ctx.world_size(), .rank = ctx.rank(), .shuffle = false});
  std::vector<int64_t> order = sampler.indices();
  auto index = torch::from_blob(order.data(), {static_cast<int64_t>(order.size())}, torch::kLong);
  int64_t correct = 0;
  for (int64_t start = 0; start < index.size(0); start += 1000) {
    auto part = index.narrow(0, start, std::min<int64_t>(1000, index.size(0) - start));
    auto logits = net.forward(test.images.index_select(0, part));
    correct += logits.argmax(1).eq(test.labels.index_select(0, part)).sum().item<int64_t>();
  }
  net.train();
  // Padding repeats a few samples on some ranks; with 10000 test images and small worlds the
  // difference is at most world-1 samples.
  return ctx.all_reduce_sum(static_cast<double>(correct)) /
         ctx.all_reduce_sum(static_cast<double>(order.size()));
}

int train(zeus::dist::Context& ctx, const Options& o) {
  torch::set_num_threads(o.threads);
  auto train_set = zeus::data::load_fashion_mnist(zeus::data::Split::kTrain, {.dir = o.data_dir});
  auto test_set = zeus::data::load_fashion_mnist(zeus::data::Split::kTest, {.dir = o.data_dir});
  if (o.limit_train > 0 && o.limit_train < train_set.size()) {
    train_set.images = train_set.images.narrow(0, 0, o.limit_train);
    train_set.labels = train_set.labels.narrow(0, 0, o.limit_train);
  }
  torch::manual_seed(o.seed);
  Net net;
  zeus::dist::sync_model(ctx, net);
  zeus::dist::GradientSync grad_sync(ctx, net);
  torch::optim::SGD optimizer(net.parameters(),
                              torch::optim::SGDOptions(o.lr).momentum(o.momentum));
  zeus::dist::DistributedSampler sampler(
      train_set.size(),
      {.num_replicas = ctx.world_size(), .rank = ctx.rank(), .seed = o.seed, .drop_last = true});
  const auto start = std::chrono::steady_clock::now();
  double accuracy = 0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    std::vector<int64_t> order = sampler.indices();
    const int64_t steps = static_cast<int64_t>(order.size()) / o.batch_size;
    double loss_sum = 0;
    for (int64_t step = 0; step < steps; ++step) {
      auto index =
          torch::from_blob(order.data() + step * o.batch_size, {o.batch_size}, torch::kLong);
      optimizer.zero_grad();
      auto loss = F::cross_entropy(net.forward(train_set.images.index_select(0, index)),
                                   train_set.labels.index_select(0, index));
      loss.backward();
      grad_sync.finish();
      optimizer.step();
      loss_sum += loss.item<double>();
    }
    const double mean_loss = ctx.all_reduce_mean(steps > 0 ? loss_sum / steps : 0.0);
    accuracy = evaluate(ctx, net, test_set);
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (ctx.is_master()) {
      std::printf("epoch %d/%d: train loss %.4f, test accuracy %.4f, %.1f s\n", epoch + 1, o.epochs,
                  mean_loss, accuracy, elapsed_s);
      std::fflush(stdout);
    }
  }
  if (ctx.is_master()) {
    std::printf("final test accuracy %.4f (target %.2f: %s) on %d rank(s)\n", accuracy,
                o.target_accuracy, accuracy >= o.target_accuracy ? "reached" : "not reached",
                ctx.world_size());
  }
  return accuracy >= o.target_accuracy ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    // The legacy launcher's --local_rank is taken out before the flags are parsed.
    zeus::dist::InitOptions init;
    init.env.legacy_local_rank = zeus::cluster::take_local_rank_arg(args);
    CLI::App app{"Data-parallel Fashion-MNIST training with zeus-cpp"};
    Options o;
    int spawn = 0;
    app.add_option("--epochs", o.epochs)->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--batch-size", o.batch_size, "Per rank")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--lr", o.lr)->capture_default_str();
    app.add_option("--target-accuracy", o.target_accuracy)->capture_default_str();
    app.add_option("--threads", o.threads, "Intra-op threads per rank")->capture_default_str();
    app.add_option("--seed", o.seed)->capture_default_str();
    app.add_option("--limit-train", o.limit_train, "Train on the first N samples only");
    app.add_option("--data", o.data_dir, "Directory with the IDX files")->capture_default_str();
    app.add_option("--spawn", spawn, "Start N workers from this process");
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
    if (spawn > 0) {
      return zeus::dist::spawn({.nprocs = spawn}, [&](zeus::dist::Context& ctx) {
        if (train(ctx, o) != 0)
          throw zeus::Error("target not reached");
      });
    }
    auto ctx = zeus::dist::init(init);
    return train(*ctx, o);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 2;
  } catch (const zeus::ConfigError& e) {
    std::fprintf(stderr, "fashion_mnist: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
}
