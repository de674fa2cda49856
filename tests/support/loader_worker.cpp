// Test helper: a training job driven by zeus::DataLoader on synthetic tensors, with one small
// all-reduce per step standing in for gradient synchronization. The job's options come from the
// ZEUS_* environment (so the tests exercise it); flags shape the data and the failure cases.
//   --samples N --batch-size B --max-epochs E --metrics m0,m1,... (epoch k reports m_k, the
//   last repeats) --workers W --no-eval --bad-sampler --single (no zeus::distributed) --progress
//   (draw the progress bar even without a TTY) --throw-at-step N / --kill-at-step N (rank 0, or
//   --kill-rank R, fails at step N of the first epoch, in the middle of profiling) --step-ms M
//   (each step takes M ms) --fail-first-attempt-at-epoch E (rank 0 fails as epoch E begins, on a
//   launcher's first attempt only: ZEUS_RESTART_COUNT unset or 0) --log-dir-in-code DIR (the
//   program sets JobOptions::log_dir itself, whatever ZEUS_LOG_DIR says)
// Prints "rank=R local_rank=L pid=P epochs=E stop=..." per rank; exit 0 on a clean stop
// (including the cost threshold), 2 on a configuration error, 1 otherwise.
#include <ATen/Functions.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/data/data_loader.h"
#include "zeus/distributed/context.h"
#include "zeus/distributed/distributed_sampler.h"
#include "zeus/optimize/early_stop.h"

namespace {

struct Args {
  int64_t samples = 480;
  int64_t batch_size = 4;
  int max_epochs = 3;
  std::vector<double> metrics{0.1};
  int workers = 0;
  bool no_eval = false;
  bool bad_sampler = false;
  bool single = false;
  bool progress = false;
  int64_t throw_at_step = -1;  // rank 0 throws from its training loop at this step of epoch 0
  int64_t kill_at_step = -1;   // rank `kill_rank` SIGKILLs itself at this step of epoch 0
  int kill_rank = 0;
  int step_ms = 0;  // each step sleeps this long (a test can act in the middle of profiling)
  int fail_first_attempt_at_epoch = -1;
  std::string log_dir_in_code;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw zeus::ConfigError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--samples")
      a.samples = *zeus::parse_number<int64_t>(value());
    else if (arg == "--batch-size")
      a.batch_size = *zeus::parse_number<int64_t>(value());
    else if (arg == "--max-epochs")
      a.max_epochs = *zeus::parse_number<int>(value());
    else if (arg == "--workers")
      a.workers = *zeus::parse_number<int>(value());
    else if (arg == "--metrics") {
      a.metrics.clear();
      for (const auto& m : zeus::split(value(), ','))
        a.metrics.push_back(*zeus::parse_number<double>(m));
    } else if (arg == "--no-eval")
      a.no_eval = true;
    else if (arg == "--bad-sampler")
      a.bad_sampler = true;
    else if (arg == "--single")
      a.single = true;
    else if (arg == "--progress")
      a.progress = true;
    else if (arg == "--throw-at-step")
      a.throw_at_step = *zeus::parse_number<int64_t>(value());
    else if (arg == "--kill-at-step")
      a.kill_at_step = *zeus::parse_number<int64_t>(value());
    else if (arg == "--kill-rank")
      a.kill_rank = *zeus::parse_number<int>(value());
    else if (arg == "--step-ms")
      a.step_ms = *zeus::parse_number<int>(value());
    else if (arg == "--fail-first-attempt-at-epoch")
      a.fail_first_attempt_at_epoch = *zeus::parse_number<int>(value());
    else if (arg == "--log-dir-in-code")
      a.log_dir_in_code = value();
    else
      throw zeus::ConfigError("unknown flag " + arg);
  }
  return a;
}

int run(const Args& a) {
  std::shared_ptr<zeus::distributed::Context> ctx;
  auto mode = zeus::data::Distributed::kNone;
  if (!a.single) {
    ctx = zeus::distributed::init();
    mode = zeus::data::Distributed::kDataParallel;
  }
  const int rank = ctx ? ctx->rank() : 0;
  const int world = ctx ? ctx->world_size() : 1;
  auto make_set = [](int64_t n) {
    return std::make_shared<zeus::data::TensorDataset>(at::arange(n * 4, at::kFloat).view({n, 4}),
                                                       at::arange(n, at::kLong));
  };
  zeus::data::DataLoaderOptions train_options{.batch_size = a.batch_size,
                                              .max_epochs = a.max_epochs,
                                              .distributed = mode,
                                              .num_workers = a.workers};
  train_options.job.progress_bar = a.progress;
  if (!a.log_dir_in_code.empty()) {
    train_options.job.log_dir = a.log_dir_in_code;
  }
  if (a.bad_sampler) {
    train_options.sampler = std::make_shared<zeus::distributed::DistributedSampler>(
        a.samples,
        zeus::distributed::DistributedSamplerOptions{.num_replicas = world + 1, .rank = rank});
  }
  zeus::data::DataLoader train(make_set(a.samples), train_options);
  std::optional<zeus::data::DataLoader> eval;
  if (!a.no_eval) {
    eval.emplace(make_set(a.samples / 4),
                 zeus::data::DataLoaderOptions{.batch_size = a.batch_size, .distributed = mode});
  }
  int epochs = 0;
  int64_t seen = 0;
  try {
    const char* restart = std::getenv("ZEUS_RESTART_COUNT");
    const bool first_attempt = restart == nullptr || std::string_view(restart) == "0";
    for (int epoch : train.epochs()) {
      if (rank == 0 && first_attempt && epoch == a.fail_first_attempt_at_epoch) {
        throw std::runtime_error("epoch " + std::to_string(epoch) +
                                 " fails on the first attempt (--fail-first-attempt-at-epoch)");
      }
      int64_t step = 0;
      for (auto& batch : train) {
        if (epoch == 0 && rank == 0 && step == a.throw_at_step) {
          throw std::runtime_error("the training step failed (--throw-at-step)");
        }
        if (epoch == 0 && rank == a.kill_rank && step == a.kill_at_step) {
          ::raise(SIGKILL);
        }
        if (a.step_ms > 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(a.step_ms));
        }
        ++step;
        seen += batch.target.size(0);
        if (ctx) {
          ctx->all_reduce_sum(1.0);  // the gradient all-reduce of a real step
        }
      }
      for (auto& batch : *eval) {
        (void)batch;
      }
      const double metric =
          a.metrics[std::min<size_t>(static_cast<size_t>(epoch), a.metrics.size() - 1)];
      train.report_metric(ctx ? ctx->all_reduce_mean(metric) : metric);
      epochs = epoch + 1;
    }
  } catch (const zeus::optimize::CostThresholdExceeded& e) {
    std::printf("rank=%d local_rank=%d pid=%d epochs=%d samples=%lld stop=cost_threshold\n", rank,
                ctx ? ctx->local_rank() : 0, static_cast<int>(getpid()), epochs,
                static_cast<long long>(seen));
    std::fflush(stdout);
    return 0;
  }
  const auto& result = train.result();
  std::printf("rank=%d local_rank=%d pid=%d epochs=%d samples=%lld stop=%s profiled=%d\n", rank,
              ctx ? ctx->local_rank() : 0, static_cast<int>(getpid()), epochs,
              static_cast<long long>(seen),
              result ? std::string(zeus::contract::to_string(result->stop_reason)).c_str() : "none",
              result && result->profiled ? 1 : 0);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const zeus::ConfigError& e) {
    std::fprintf(stderr, "loader_worker: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loader_worker: %s\n", e.what());
    return 1;
  }
}
