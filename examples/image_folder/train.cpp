// Energy-optimized data-parallel training of a small ResNet on an ImageNet-layout directory:
//   DATA/train/<class>/*.jpg|png and DATA/val/<class>/*.jpg|png
// Images are decoded (libjpeg-turbo, libpng) and augmented (random resized crop, flip) on
// --workers loader threads per rank by zeus::DataLoader, which also profiles the GPU power
// limits and stops at the target validation accuracy. Same launch methods as fashion_mnist:
//   zeus run --nproc-per-node 2 ./image_folder --data DATA --device sim:v100
// Each rank trains on cuda:<local rank> when there is a GPU (--device-type), else on the CPU;
// the loader pins the decoded batches and copies them there while the previous step runs.
#include <fmt/format.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "example_main.h"
#include "zeus/data/data_loader.h"
#include "zeus/data/image_folder.h"
#include "zeus/distributed/gradient_sync.h"
#include "zeus/distributed/sync_model.h"

namespace nn = torch::nn;

namespace {

// ResNet's basic block: two 3x3 convolutions with batch norm, and a projection shortcut when
// the shape changes.
struct BasicBlockImpl : nn::Module {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1(register_module(
            "conv1",
            nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)))),
        bn1(register_module("bn1", nn::BatchNorm2d(out))),
        conv2(register_module("conv2",
                              nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out) {
      shortcut = register_module(
          "shortcut",
          nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                         nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = torch::relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    return torch::relu(y + (shortcut ? shortcut->forward(x) : x));
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential shortcut{nullptr};
};
TORCH_MODULE(BasicBlock);

// A ResNet for small images: a 3x3 stem, three stages of two blocks (16, 32, 64 channels), global
// average pooling and a linear classifier.
struct ResNetImpl : nn::Module {
  explicit ResNetImpl(int64_t classes)
      : stem(register_module("stem",
                             nn::Conv2d(nn::Conv2dOptions(3, 16, 3).padding(1).bias(false)))),
        bn(register_module("bn", nn::BatchNorm2d(16))),
        layers(register_module(
            "layers",
            nn::Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 16, 1), BasicBlock(16, 32, 2),
                           BasicBlock(32, 32, 1), BasicBlock(32, 64, 2), BasicBlock(64, 64, 1)))),
        pool(register_module("pool", nn::AdaptiveAvgPool2d(1))),
        fc(register_module("fc", nn::Linear(64, classes))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = layers->forward(torch::relu(bn(stem(x))));
    return fc(pool(y).flatten(1));
  }
  nn::Conv2d stem;
  nn::BatchNorm2d bn;
  nn::Sequential layers;
  nn::AdaptiveAvgPool2d pool;
  nn::Linear fc;
};
TORCH_MODULE(ResNet);

struct Options : zeus::examples::TrainingOptions {
  Options() {
    epochs = 10;
    batch_size = 32;
    lr = 0.1;
    target_accuracy = 0.7;
    workers = 2;
  }
  std::string data_dir;
  int image_size = 64;
  double weight_decay = 5e-4;
};

int train(zeus::distributed::Context& ctx, const Options& o) {
  torch::set_num_threads(o.threads);
  const std::filesystem::path root(o.data_dir);
  auto train_set = std::make_shared<zeus::data::ImageFolderDataset>(
      root / "train",
      zeus::data::ImageFolderOptions{.image_size = o.image_size,
                                     .train = true,
                                     .seed = o.seed + static_cast<uint64_t>(ctx.rank())});
  auto val_set = std::make_shared<zeus::data::ImageFolderDataset>(
      root / "val", zeus::data::ImageFolderOptions{.image_size = o.image_size, .train = false});
  if (val_set->classes() != train_set->classes()) {
    throw zeus::ConfigError(fmt::format("{} and {} hold different class folders",
                                        (root / "train").string(), (root / "val").string()));
  }
  zeus::job::JobOptions job = o.job;
  job.target_metric = o.target_accuracy;
  zeus::DataLoader train_loader(train_set, {.batch_size = o.batch_size,
                                            .max_epochs = o.epochs,
                                            .distributed = zeus::data::Distributed::kDataParallel,
                                            .seed = o.seed,
                                            .num_workers = o.workers,
                                            .device = ctx.device(),
                                            .job = job});
  zeus::DataLoader val_loader(val_set, {.batch_size = o.batch_size,
                                        .distributed = zeus::data::Distributed::kDataParallel,
                                        .num_workers = o.workers,
                                        .device = ctx.device()});
  torch::manual_seed(o.seed);
  ResNet net(static_cast<int64_t>(train_set->classes().size()));
  net->to(ctx.device());
  zeus::distributed::sync_model(ctx, *net);
  zeus::distributed::GradientSync grad_sync(ctx, *net);
  torch::optim::SGD optimizer(
      net->parameters(),
      torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
  if (ctx.is_master()) {
    std::printf("%zu classes, %lld training and %lld validation images, %d loader threads/rank\n",
                train_set->classes().size(), static_cast<long long>(train_set->size()),
                static_cast<long long>(val_set->size()), o.workers);
  }
  return zeus::examples::finish_training(
      ctx, "val accuracy", o.target_accuracy,
      [&] {
        double accuracy = 0;
        // Sums stay on the device: reading them per step would wait for the GPU every step.
        const auto on_device = torch::TensorOptions().device(ctx.device());
        for (int epoch : train_loader.epochs()) {
          at::Tensor loss_sum = torch::zeros({}, on_device);
          int64_t steps = 0;
          for (auto& batch : train_loader) {
            optimizer.zero_grad();
            auto loss = nn::functional::cross_entropy(net->forward(batch.data), batch.target);
            loss.backward();
            grad_sync.finish();
            optimizer.step();
            loss_sum += loss.detach();
            ++steps;
          }
          torch::NoGradGuard no_grad;
          net->eval();
          at::Tensor correct = torch::zeros({}, on_device.dtype(torch::kLong));
          int64_t total = 0;
          for (auto& batch : val_loader) {
            correct += net->forward(batch.data).argmax(1).eq(batch.target).sum();
            total += batch.target.size(0);
          }
          net->train();
          accuracy = ctx.all_reduce_sum(static_cast<double>(correct.item<int64_t>())) /
                     ctx.all_reduce_sum(static_cast<double>(total));
          const double mean_loss = ctx.all_reduce_mean(
              steps > 0 ? loss_sum.item<double>() / static_cast<double>(steps) : 0.0);
          if (ctx.is_master()) {
            std::printf("epoch %d/%d: train loss %.4f, val accuracy %.4f\n", epoch + 1, o.epochs,
                        mean_loss, accuracy);
            std::fflush(stdout);
          }
          train_loader.report_metric(accuracy);
        }
        return accuracy;
      },
      o.fail_if_not_reached);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Energy-optimized data-parallel ResNet training on an image folder"};
  Options o;
  zeus::examples::add_training_flags(app, o);
  app.add_option("--data", o.data_dir, "DIR with train/<class>/ and val/<class>/")->required();
  app.add_option("--image-size", o.image_size, "Crop side in pixels")->capture_default_str();
  return zeus::examples::run_example(
      "image_folder", argc, argv, app, o,
      [&](zeus::distributed::Context& ctx) { return train(ctx, o); });
}
