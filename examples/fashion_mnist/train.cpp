// Energy-optimized data-parallel training of a small CNN on Fashion-MNIST (Debian's
// dataset-fashion-mnist) with zeus::DataLoader: the same program runs under all four launch
// methods.
//   zeus run --nproc-per-node 2 ./fashion_mnist --device sim:v100   (torchrun's environment)
//   zeus run --nproc-per-node 2 --local-rank-arg ./fashion_mnist     (legacy --local_rank)
//   ./fashion_mnist --spawn 2                                        (in-process start)
//   srun --ntasks-per-node 2 ./fashion_mnist                         (Slurm; examples/slurm/)
// Each rank trains on cuda:<local rank> when there is a GPU (--device-type), else on the CPU.
// Each rank trains on its DistributedSampler shard; GradientSync averages gradients; the train
// loader profiles the GPU power limits in the first epoch, keeps the cheapest, and stops at the
// target test accuracy (all-reduced), at --epochs, or when the next epoch would cost more than
// ZEUS_COST_THRESH. Results land in --log-dir (zeus report DIR turns them into a page).
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "example_main.h"
#include "net.h"
#include "zeus/common/errors.h"
#include "zeus/data/data_loader.h"
#include "zeus/data/fashion_mnist.h"
#include "zeus/distributed/context.h"
#include "zeus/distributed/distributed_sampler.h"
#include "zeus/distributed/gradient_sync.h"
#include "zeus/distributed/sync_model.h"

namespace F = torch::nn::functional;

namespace {

using zeus::examples::Net;

struct Options : zeus::examples::TrainingOptions {
  int64_t limit_train = 0;  // > 0: only this many training samples (quick runs)
  int64_t limit_test = 0;   // > 0: only this many test samples
  bool plain_loop = false;  // no zeus::DataLoader (benchmark baseline)
  std::string data_dir = zeus::data::kFashionMnistDir;
};

// Accuracy of `net` over `batches` (this rank's shard), all-reduced over the ranks.
template <typename Batches>
double evaluate(zeus::distributed::Context& ctx, Net& net, Batches&& batches) {
  torch::NoGradGuard no_grad;
  net.eval();
  at::Tensor correct =
      torch::zeros({}, torch::TensorOptions().device(ctx.device()).dtype(torch::kLong));
  int64_t total = 0;
  for (const zeus::data::Batch& batch : batches) {
    correct += net.forward(batch.data).argmax(1).eq(batch.target).sum();
    total += batch.target.size(0);
  }
  net.train();
  // The sampler pads the last shard with a few repeated samples (at most world - 1).
  return ctx.all_reduce_sum(static_cast<double>(correct.item<int64_t>())) /
         ctx.all_reduce_sum(static_cast<double>(total));
}

// --plain-loop: the batches a hand-written loop makes (same sampler, same batches), without
// zeus::DataLoader, for bench/loader_overhead's epoch-time comparison.
std::vector<zeus::data::Batch> plain_batches(zeus::data::TensorDataset& set,
                                             zeus::distributed::DistributedSampler& sampler,
                                             int64_t batch_size, bool drop_last,
                                             c10::Device device) {
  const std::vector<int64_t> order = sampler.indices();
  std::vector<zeus::data::Batch> out;
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch_size)) {
    const size_t n = std::min(order.size() - start, static_cast<size_t>(batch_size));
    if (drop_last && n < static_cast<size_t>(batch_size)) {
      break;
    }
    zeus::data::Batch b = set.get_batch(std::span(order).subspan(start, n));
    out.push_back({b.data.to(device), b.target.to(device)});
  }
  return out;
}

int train(zeus::distributed::Context& ctx, const Options& o) {
  torch::set_num_threads(o.threads);
  auto train_set = zeus::data::load_fashion_mnist(zeus::data::Split::kTrain, {.dir = o.data_dir});
  auto test_set = zeus::data::load_fashion_mnist(zeus::data::Split::kTest, {.dir = o.data_dir});
  if (o.limit_train > 0 && o.limit_train < train_set.size()) {
    train_set.images = train_set.images.narrow(0, 0, o.limit_train);
    train_set.labels = train_set.labels.narrow(0, 0, o.limit_train);
  }
  if (o.limit_test > 0 && o.limit_test < test_set.size()) {
    test_set.images = test_set.images.narrow(0, 0, o.limit_test);
    test_set.labels = test_set.labels.narrow(0, 0, o.limit_test);
  }
  auto train_data = std::make_shared<zeus::data::TensorDataset>(train_set.images, train_set.labels);
  auto test_data = std::make_shared<zeus::data::TensorDataset>(test_set.images, test_set.labels);
  torch::manual_seed(o.seed);
  Net net;
  net.to(ctx.device());
  zeus::distributed::sync_model(ctx, net);
  zeus::distributed::GradientSync grad_sync(ctx, net);
  torch::optim::SGD optimizer(net.parameters(),
                              torch::optim::SGDOptions(o.lr).momentum(o.momentum));
  // Summed on the device: reading the loss every step would wait for the GPU every step.
  at::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().device(ctx.device()));
  int64_t steps = 0;
  auto train_step = [&](const zeus::data::Batch& batch) {
    optimizer.zero_grad();
    auto loss = F::cross_entropy(net.forward(batch.data), batch.target);
    loss.backward();
    grad_sync.finish();
    optimizer.step();
    loss_sum += loss.detach();
    ++steps;
  };
  double accuracy = 0;
  auto epoch_start = std::chrono::steady_clock::now();
  // Called on every rank after each epoch's evaluation.
  auto end_epoch = [&](int epoch) {
    const double mean_loss =
        ctx.all_reduce_mean(steps > 0 ? loss_sum.item<double>() / static_cast<double>(steps) : 0.0);
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    if (ctx.is_master()) {
      std::printf("epoch %d/%d: train loss %.4f, test accuracy %.4f, %.1f s\n", epoch + 1, o.epochs,
                  mean_loss, accuracy, wall_s);
      std::fflush(stdout);
    }
    loss_sum.zero_();
    steps = 0;
    epoch_start = std::chrono::steady_clock::now();
  };

  if (o.plain_loop) {
    zeus::distributed::DistributedSampler train_sampler(
        train_data->size(),
        {.num_replicas = ctx.world_size(), .rank = ctx.rank(), .seed = o.seed, .drop_last = true});
    zeus::distributed::DistributedSampler test_sampler(
        test_data->size(),
        {.num_replicas = ctx.world_size(), .rank = ctx.rank(), .shuffle = false});
    return zeus::examples::finish_training(
        ctx, "test accuracy", o.target_accuracy,
        [&] {
          for (int epoch = 0; epoch < o.epochs && accuracy < o.target_accuracy; ++epoch) {
            train_sampler.set_epoch(epoch);
            test_sampler.set_epoch(epoch);
            for (const auto& batch :
                 plain_batches(*train_data, train_sampler, o.batch_size, true, ctx.device())) {
              train_step(batch);
            }
            accuracy = evaluate(ctx, net,
                                plain_batches(*test_data, test_sampler, 1000, false, ctx.device()));
            end_epoch(epoch);
          }
          return accuracy;
        },
        o.fail_if_not_reached);
  }

  zeus::job::JobOptions job = o.job;
  job.target_metric = o.target_accuracy;
  job.higher_is_better = true;
  zeus::DataLoader train_loader(train_data, {.batch_size = o.batch_size,
                                             .max_epochs = o.epochs,
                                             .distributed = zeus::data::Distributed::kDataParallel,
                                             .seed = o.seed,
                                             .drop_last = true,
                                             .num_workers = o.workers,
                                             .device = ctx.device(),
                                             .job = job});
  zeus::DataLoader eval_loader(test_data, {.batch_size = 1000,
                                           .distributed = zeus::data::Distributed::kDataParallel,
                                           .device = ctx.device()});
  return zeus::examples::finish_training(
      ctx, "test accuracy", o.target_accuracy,
      [&] {
        for (int epoch : train_loader.epochs()) {
          for (auto& batch : train_loader) {
            train_step(batch);
          }
          accuracy = evaluate(ctx, net, eval_loader);
          end_epoch(epoch);
          train_loader.report_metric(accuracy);
        }
        return accuracy;
      },
      o.fail_if_not_reached);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Energy-optimized data-parallel Fashion-MNIST training with zeus-cpp"};
  Options o;
  zeus::examples::add_training_flags(app, o);
  app.add_option("--limit-train", o.limit_train, "Train on the first N samples only");
  app.add_option("--limit-test", o.limit_test, "Evaluate on the first N test samples only");
  app.add_option("--data", o.data_dir, "Directory with the IDX files")->capture_default_str();
  app.add_flag("--plain-loop", o.plain_loop,
               "Batch with a hand-written loop instead of zeus::DataLoader (no energy "
               "optimization; the benchmark's baseline)");
  return zeus::examples::run_example(
      "fashion_mnist", argc, argv, app, o,
      [&](zeus::distributed::Context& ctx) { return train(ctx, o); });
}
