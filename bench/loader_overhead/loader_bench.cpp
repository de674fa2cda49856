// Per-step cost of zeus::DataLoader against a hand-written batching loop and libtorch's own data
// loader, on the same in-memory Fashion-MNIST-shaped tensors, outside profiling windows (the
// power profile is loaded from a file, as on every run after the first). The GPUs are the fake
// NVML library, whose calls happen only at epoch boundaries here, as a real driver's would.
// Two step bodies: none (the loaders' own cost per step, in us) and the example's CNN train
// step (what that cost is as a share of a real step). Modes are interleaved in every repetition.
//   loader_bench [--reps 3] [--epochs-null 10] [--steps-cnn 100]
#include <ATen/Functions.h>
#include <torch/data/dataloader.h>
#include <torch/data/datasets/base.h>
#include <torch/data/datasets/map.h>
#include <torch/data/samplers/random.h>
#include <torch/data/transforms/stack.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "net.h"
#include "zeus/contract/run_files.h"
#include "zeus/data/data_loader.h"
#include "zeus/optimize/power_profile.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kSamples = 60000;
constexpr int64_t kBatch = 64;

// libtorch's map-style dataset over the same tensors (one Example per index, then Stack).
class TorchTensors : public torch::data::datasets::Dataset<TorchTensors> {
 public:
  TorchTensors(at::Tensor x, at::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  torch::data::Example<> get(size_t i) override {
    return {x_[static_cast<int64_t>(i)], y_[static_cast<int64_t>(i)]};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(x_.size(0)); }

 private:
  at::Tensor x_, y_;
};

void setup_fake_nvml(const fs::path& dir) {
  nlohmann::json gpu{{"name", "NVIDIA A40"},   {"uuid", "GPU-bench-0"},
                     {"power_mw", 200000},     {"energy_mj", 0},
                     {"limit_mw", 300000},     {"min_limit_mw", 100000},
                     {"max_limit_mw", 300000}, {"default_limit_mw", 300000},
                     {"instant_power", true},  {"energy_counter", true}};
  nlohmann::json state{{"gpus", {gpu}},
                       {"faults", nlohmann::json::object()},
                       {"permissive", true},
                       {"limit_history", nlohmann::json::array()}};
  std::ofstream(dir / "nvml.json") << state.dump();
  ::setenv("ZEUS_NVML_LIBRARY", ZEUS_FAKE_NVML_FULL, 1);
  ::setenv("FAKE_NVML_STATE", (dir / "nvml.json").c_str(), 1);
  // A saved profile: the loader skips profiling, as every run after the first does.
  zeus::optimize::PowerProfile p;
  p.global_batch_size = kBatch;
  for (int64_t w = 300; w >= 100; w -= 25) {
    p.train[w * 1000] = {w * 1000, 10.0 + static_cast<double>(w) / 100, static_cast<double>(w)};
  }
  p.optimal_power_limit_mw = 200000;
  p.eval_throughput_ips = 20;
  p.eval_power_w = 150;
  zeus::contract::save_power_profile(zeus::contract::power_profile_path(dir, kBatch), p);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 3;
  int epochs_null = 10;
  int64_t steps_cnn = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (flag == "--epochs-null")
      epochs_null = std::atoi(argv[i + 1]);
    else if (flag == "--steps-cnn")
      steps_cnn = std::atoll(argv[i + 1]);
  }
  torch::set_num_threads(1);
  const fs::path dir =
      fs::temp_directory_path() / ("zeus-loader-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  setup_fake_nvml(dir);

  torch::manual_seed(1);
  const at::Tensor x = at::randn({kSamples, 1, 28, 28});
  const at::Tensor y = at::randint(0, 10, {kSamples}, at::kLong);
  auto tensors = std::make_shared<zeus::data::TensorDataset>(x, y);
  zeus::examples::Net net;
  torch::optim::SGD opt(net.parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  int64_t cnn_left = 0;
  double sink = 0;
  auto step = [&](const at::Tensor& data, const at::Tensor& target, bool cnn) {
    if (!cnn) {
      sink += static_cast<double>(data.size(0));
      return;
    }
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net.forward(data), target);
    loss.backward();
    opt.step();
    --cnn_left;
  };

  // One pass per mode: returns (steps, seconds).
  auto plain = [&](int epochs, bool cnn) {
    int64_t steps = 0;
    const auto t0 = Clock::now();
    for (int e = 0; e < epochs && (!cnn || cnn_left > 0); ++e) {
      const at::Tensor order = at::randperm(kSamples, at::kLong);
      for (int64_t s = 0; s + kBatch <= kSamples && (!cnn || cnn_left > 0); s += kBatch) {
        const at::Tensor idx = order.narrow(0, s, kBatch);
        step(x.index_select(0, idx), y.index_select(0, idx), cnn);
        ++steps;
      }
    }
    return std::pair(steps, std::chrono::duration<double>(Clock::now() - t0).count());
  };
  auto libtorch = [&](int epochs, bool cnn) {
    auto loader =
        torch::data::make_data_loader(TorchTensors(x, y).map(torch::data::transforms::Stack<>()),
                                      torch::data::samplers::RandomSampler(kSamples),
                                      torch::data::DataLoaderOptions(kBatch).drop_last(true));
    int64_t steps = 0;
    const auto t0 = Clock::now();
    for (int e = 0; e < epochs && (!cnn || cnn_left > 0); ++e) {
      for (auto& batch : *loader) {
        if (cnn && cnn_left <= 0)
          break;
        step(batch.data, batch.target, cnn);
        ++steps;
      }
    }
    return std::pair(steps, std::chrono::duration<double>(Clock::now() - t0).count());
  };
  int run_id = 0;
  auto zeus_loader = [&](int epochs, bool cnn) {
    zeus::job::JobOptions job;
    job.target_metric = 2.0;  // never reached: runs max_epochs
    job.log_dir = dir;
    job.job_id = "bench" + std::to_string(run_id++);
    job.device = "nvml";
    job.progress_bar = false;
    zeus::DataLoader train(
        tensors, {.batch_size = kBatch, .max_epochs = epochs, .drop_last = true, .job = job});
    zeus::DataLoader eval(tensors, {.batch_size = kBatch});
    int64_t steps = 0;
    const auto t0 = Clock::now();
    for (int e : train.epochs()) {
      (void)e;
      for (auto& batch : train) {
        if (cnn && cnn_left <= 0)
          break;
        step(batch.data, batch.target, cnn);
        ++steps;
      }
      train.report_metric(0);
    }
    return std::pair(steps, std::chrono::duration<double>(Clock::now() - t0).count());
  };

  std::map<std::string, std::vector<double>> null_us;
  std::map<std::string, std::vector<double>> cnn_ms;
  const std::vector<std::pair<std::string, std::function<std::pair<int64_t, double>(int, bool)>>>
      modes{{"plain loop", plain},
            {"libtorch DataLoader", libtorch},
            {"zeus::DataLoader", zeus_loader}};
  for (int r = 0; r < reps; ++r) {
    for (const auto& [name, run] : modes) {
      const auto [steps, s] = run(epochs_null, false);
      null_us[name].push_back(s / static_cast<double>(steps) * 1e6);
      cnn_left = steps_cnn;  // fewer than one epoch's steps: the loop leaves the epoch early
      const auto [csteps, cs] = run(1, true);
      cnn_ms[name].push_back(cs / static_cast<double>(csteps) * 1e3);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("%-22s %16s %16s %12s\n", "mode", "no step: us/step", "CNN: ms/step", "CNN vs plain");
  const double plain_cnn = median(cnn_ms["plain loop"]);
  for (const auto& [name, run] : modes) {
    std::printf("%-22s %16.2f %16.3f %11.2f%%\n", name.c_str(), median(null_us[name]),
                median(cnn_ms[name]), 100.0 * (median(cnn_ms[name]) / plain_cnn - 1));
  }
  std::printf(
      "zeus::DataLoader's own cost per step: %.2f us over the plain loop = %.3f%% of a 10 "
      "ms step (median of %d reps, sink %.0f)\n",
      median(null_us["zeus::DataLoader"]) - median(null_us["plain loop"]),
      (median(null_us["zeus::DataLoader"]) - median(null_us["plain loop"])) / 100.0, reps, sink);
  fs::remove_all(dir);
  return 0;
}
