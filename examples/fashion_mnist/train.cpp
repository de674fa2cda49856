// Energy-optimized data-parallel training of a small CNN on Fashion-MNIST (Debian's
// dataset-fashion-mnist) with zeus::DataLoader: the same program runs under all four launch
// methods.
//   zeus run --nproc-per-node 2 ./fashion_mnist --device sim:v100   (torchrun's environment)
//   zeus run --nproc-per-node 2 --local-rank-arg ./fashion_mnist     (legacy --local_rank)
//   ./fashion_mnist --spawn 2                                        (in-process start)
//   srun --ntasks-per-node 2 ./fashion_mnist                         (Slurm; examples/slurm/)
// Each rank trains on its DistributedSampler shard; GradientSync averages gradients; the train
// loader profiles the GPU power limits in the first epoch, keeps the cheapest, and stops at the
// target test accuracy (all-reduced), at --epochs, or when the next epoch would cost more than
// ZEUS_COST_THRESH. Results land in --log-dir (zeus report DIR turns them into a page).
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "net.h"
#include "zeus/cluster/env.h"
#include "zeus/common/errors.h"
#include "zeus/data/data_loader.h"
#include "zeus/data/fashion_mnist.h"
#include "zeus/dist/context.h"
#include "zeus/dist/gradient_sync.h"
#include "zeus/dist/spawn.h"
#include "zeus/dist/sync_model.h"
#include "zeus/optimize/early_stop.h"

namespace F = torch::nn::functional;

namespace {

using zeus::examples::Net;

struct Options {
  int epochs = 3;           // max_epochs of the train loader
  int64_t batch_size = 64;  // per rank
  double lr = 0.05;
  double momentum = 0.9;
  double target_accuracy = 0.88;
  int threads = 1;
  int workers = 0;
  uint64_t seed = 1;
  int64_t limit_train = 0;  // > 0: only this many training samples (quick runs)
  std::string data_dir = zeus::data::kFashionMnistDir;
  zeus::job::JobOptions job;
};

// Accuracy of `net` over the eval loader's shards of all ranks.
double evaluate(zeus::dist::Context& ctx, Net& net, zeus::DataLoader& eval) {
  torch::NoGradGuard no_grad;
  net.eval();
  int64_t correct = 0;
  int64_t total = 0;
  for (auto& batch : eval) {
    correct += net.forward(batch.data).argmax(1).eq(batch.target).sum().item<int64_t>();
    total += batch.target.size(0);
  }
  net.train();
  // The sampler pads the last shard with a few repeated samples (at most world - 1).
  return ctx.all_reduce_sum(static_cast<double>(correct)) /
         ctx.all_reduce_sum(static_cast<double>(total));
}

int train(zeus::dist::Context& ctx, const Options& o) {
  torch::set_num_threads(o.threads);
  auto train_set = zeus::data::load_fashion_mnist(zeus::data::Split::kTrain, {.dir = o.data_dir});
  auto test_set = zeus::data::load_fashion_mnist(zeus::data::Split::kTest, {.dir = o.data_dir});
  if (o.limit_train > 0 && o.limit_train < train_set.size()) {
    train_set.images = train_set.images.narrow(0, 0, o.limit_train);
    train_set.labels = train_set.labels.narrow(0, 0, o.limit_train);
  }
  zeus::job::JobOptions job = o.job;
  job.target_metric = o.target_accuracy;
  job.higher_is_better = true;
  zeus::DataLoader train_loader(
      std::make_shared<zeus::data::TensorDataset>(train_set.images, train_set.labels),
      {.batch_size = o.batch_size,
       .max_epochs = o.epochs,
       .distributed = zeus::data::Distributed::kDataParallel,
       .seed = o.seed,
       .drop_last = true,
       .num_workers = o.workers,
       .job = job});
  zeus::DataLoader eval_loader(
      std::make_shared<zeus::data::TensorDataset>(test_set.images, test_set.labels),
      {.batch_size = 1000, .distributed = zeus::data::Distributed::kDataParallel});

  torch::manual_seed(o.seed);
  Net net;
  zeus::dist::sync_model(ctx, net);
  zeus::dist::GradientSync grad_sync(ctx, net);
  torch::optim::SGD optimizer(net.parameters(),
                              torch::optim::SGDOptions(o.lr).momentum(o.momentum));
  double accuracy = 0;
  try {
    for (int epoch : train_loader.epochs()) {
      double loss_sum = 0;
      int64_t steps = 0;
      for (auto& batch : train_loader) {
        optimizer.zero_grad();
        auto loss = F::cross_entropy(net.forward(batch.data), batch.target);
        loss.backward();
        grad_sync.finish();
        optimizer.step();
        loss_sum += loss.item<double>();
        ++steps;
      }
      const double mean_loss = ctx.all_reduce_mean(steps > 0 ? loss_sum / steps : 0.0);
      accuracy = evaluate(ctx, net, eval_loader);
      if (ctx.is_master()) {
        std::printf("epoch %d/%d: train loss %.4f, test accuracy %.4f\n", epoch + 1, o.epochs,
                    mean_loss, accuracy);
        std::fflush(stdout);
      }
      train_loader.report_metric(accuracy);
    }
  } catch (const zeus::optimize::CostThresholdExceeded& e) {
    // Every rank gets it at the same epoch; the master already wrote the train result.
    if (ctx.is_master()) {
      std::printf("stopped early: %s\n", e.what());
    }
    return 0;
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
    app.add_option("--epochs", o.epochs, "At most this many epochs")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--batch-size", o.batch_size, "Per rank")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--lr", o.lr)->capture_default_str();
    app.add_option("--target-accuracy", o.target_accuracy)->capture_default_str();
    app.add_option("--threads", o.threads, "Intra-op threads per rank")->capture_default_str();
    app.add_option("--seed", o.seed)->capture_default_str();
    app.add_option("--limit-train", o.limit_train, "Train on the first N samples only");
    app.add_option("--data", o.data_dir, "Directory with the IDX files")->capture_default_str();
    app.add_option("--workers", o.workers, "Loader threads per rank")->capture_default_str();
    app.add_option("--spawn", spawn, "Start N workers from this process");
    // zeus::DataLoader's options; unset ones take the ZEUS_* variables, then the defaults.
    std::string device;
    app.add_option("--device", device, "GPUs to optimize: auto, nvml or sim:<gpu> (ZEUS_DEVICE)");
    app.add_option("--log-dir", o.job.log_dir, "Profiles, results, power logs (ZEUS_LOG_DIR)");
    app.add_option("--job-id", o.job.job_id, "Result file prefix (ZEUS_JOB_ID)");
    app.add_option("--eta", o.job.eta, "Energy vs time weight in [0, 1] (ZEUS_ETA_KNOB)");
    app.add_option("--cost-threshold", o.job.cost_threshold,
                   "Stop when the next epoch would reach this cost (ZEUS_COST_THRESH)");
    bool observer = false;
    app.add_flag("--observer", observer,
                 "Profile and report, but train at the maximum limit (ZEUS_USE_OPTIMAL_PL=false)");
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
    if (!device.empty()) {
      o.job.device = device;
    }
    if (observer) {
      o.job.observer_mode = true;
    }
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
