// Test helper: one rank of a multi-process job on 127.0.0.1, launched by dist_test with
// torchrun's variables. argv[1] names the scenario; results go to stdout as "key=value" lines.
//   collectives: barrier, all_reduce_mean/max of the rank
//   sync_model:  a Linear with rank-dependent weights, then sync_model; prints checksums
//   gradient_sync: GradientSync against one process on the union of the data
//   sync_wait [armed|disarmed] MS: 20 steps, rank 1 slowed by MS ms before each forward; prints
//     each rank's own step time (wall less the waits GradientSync counted) and its wait, in ms
//   unused_params: find_unused_parameters on and off
//   peer_dies:   rank 1 exits right after init; rank 0's all-reduce must fail, not hang
//   elastic FILE: all-reduce 1 (the world size), print it, wait until FILE exists
// ZEUS_TEST_DEVICE (auto|cuda|cpu), ZEUS_TEST_BACKEND (nccl|gloo) and ZEUS_TEST_CUDA_DEVICE pick
// the device and backend (gpu_test: CUDA tensors; two ranks may share one GPU over Gloo).
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "zeus/common/errors.h"
#include "zeus/common/sync_wait.h"
#include "zeus/distributed/context.h"
#include "zeus/distributed/gradient_sync.h"
#include "zeus/distributed/spawn.h"
#include "zeus/distributed/sync_model.h"

namespace {

double checksum(torch::nn::Module& m) {
  double sum = 0;
  for (const auto& p : m.parameters()) {
    sum += p.sum().item<double>() * static_cast<double>(p.numel());
  }
  return sum;
}

torch::nn::Sequential make_model() {
  torch::manual_seed(7);
  return torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::ReLU(), torch::nn::Linear(8, 1));
}

void sgd_step(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  for (auto& p : m.parameters()) {
    p.sub_(0.1 * p.grad());
    p.mutable_grad().zero_();
  }
}

double max_diff(torch::nn::Module& a, torch::nn::Module& b) {
  double d = 0;
  const auto pa = a.parameters();
  const auto pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    d = std::max(d, (pa[i] - pb[i]).abs().max().item<double>());
  }
  return d;
}

// Two steps with GradientSync on this rank's 8 rows of a shared 8 x world dataset (the second
// step accumulates two micro-batches, the first under no_sync), against one process doing the
// same on all the rows.
// Note [own step time] on Gloo: rank 1 takes `slow_ms` longer before each forward (a slower GPU),
// so rank 0's finish() waits that long for rank 1's buckets; each rank's own step time is its wall
// time less the waits GradientSync counted while the energy job armed it.
void sync_wait_scenario(zeus::distributed::Context& ctx, bool armed, int slow_ms) {
  torch::manual_seed(99);
  auto model = make_model();
  zeus::distributed::sync_model(ctx, *model);
  zeus::distributed::GradientSync sync(ctx, *model);
  const auto x = torch::randn({16, 4});
  const auto y = torch::randn({16, 1});
  const auto step = [&] {
    if (ctx.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
    }
    torch::nn::functional::mse_loss(model->forward(x), y).backward();
    sync.finish();
    sgd_step(*model);
  };
  step();  // warm
  zeus::sync_wait::arm(armed);
  ctx.barrier();
  constexpr int kSteps = 20;
  const auto wait_before = zeus::sync_wait::total();
  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < kSteps; ++i) {
    step();
  }
  const auto wall = std::chrono::steady_clock::now() - begin;
  const auto wait = zeus::sync_wait::total() - wait_before;
  const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("own_ms=%.3f\nwait_ms=%.3f\n", ms(wall - wait) / kSteps, ms(wait) / kSteps);
  zeus::sync_wait::arm(false);
}

void gradient_sync_scenario(zeus::distributed::Context& ctx) {
  const int world = ctx.world_size();
  torch::manual_seed(1234);
  const auto x = torch::randn({8 * world, 4}).to(ctx.device());
  const auto y = torch::randn({8 * world, 1}).to(ctx.device());
  auto model = make_model();
  model->to(ctx.device());
  zeus::distributed::sync_model(ctx, *model);
  // Tiny buckets: several of them, launched from hooks in order.
  zeus::distributed::GradientSync sync(ctx, *model,
                                       {.bucket_cap_bytes = 64, .first_bucket_cap_bytes = 64});
  const auto rows = [&](int r, int from, int n) {
    return std::pair{x.narrow(0, 8 * r + from, n), y.narrow(0, 8 * r + from, n)};
  };
  const auto mse = [](torch::nn::Sequential& m, const std::pair<at::Tensor, at::Tensor>& d) {
    return torch::nn::functional::mse_loss(m->forward(d.first), d.second);
  };
  mse(model, rows(ctx.rank(), 0, 8)).backward();
  sync.finish();
  sgd_step(*model);
  {
    auto scope = sync.no_sync();
    mse(model, rows(ctx.rank(), 0, 4)).backward();
  }
  mse(model, rows(ctx.rank(), 4, 4)).backward();
  sync.finish();
  sgd_step(*model);
  // A third step through libtorch's optimizer, whose zero_grad() detaches .grad in place.
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  optimizer.zero_grad();
  mse(model, rows(ctx.rank(), 2, 6)).backward();
  sync.finish();
  optimizer.step();

  auto reference = make_model();
  reference->to(ctx.device());
  at::Tensor loss = torch::zeros({}, x.options());
  for (int r = 0; r < world; ++r) {
    loss = loss + mse(reference, rows(r, 0, 8));
  }
  (loss / world).backward();
  sgd_step(*reference);
  loss = torch::zeros({}, x.options());
  for (int r = 0; r < world; ++r) {
    loss = loss + mse(reference, rows(r, 0, 4)) + mse(reference, rows(r, 4, 4));
  }
  (loss / world).backward();
  sgd_step(*reference);
  loss = torch::zeros({}, x.options());
  for (int r = 0; r < world; ++r) {
    loss = loss + mse(reference, rows(r, 2, 6));
  }
  (loss / world).backward();
  sgd_step(*reference);
  std::printf("buckets=%zu\nmax_diff=%.3g\nchecksum=%.9g\ndevice=%s\n", sync.bucket_count(),
              max_diff(*model, *reference), checksum(*model), ctx.device().str().c_str());
}

// Parameter `b` never takes part in forward: with find_unused_parameters its gradient is zero
// and `a`'s is averaged; without, finish() names the parameters.
void unused_params_scenario(zeus::distributed::Context& ctx) {
  struct TwoHeads : torch::nn::Module {
    TwoHeads() {
      a = register_module("a", torch::nn::Linear(4, 1));
      b = register_module("b", torch::nn::Linear(4, 1));
    }
    torch::nn::Linear a{nullptr};
    torch::nn::Linear b{nullptr};
  };
  torch::manual_seed(3);
  auto model = std::make_shared<TwoHeads>();
  const auto x = torch::full({2, 4}, static_cast<float>(ctx.rank() + 1));
  {
    zeus::distributed::GradientSync sync(ctx, *model, {.find_unused_parameters = true});
    model->a->forward(x).sum().backward();
    sync.finish();
    std::printf("b_grad_abs_sum=%.6f\na_bias_grad=%.6f\n",
                model->b->weight.grad().abs().sum().item<double>(),
                model->a->bias.grad().item<double>());
  }
  zeus::distributed::GradientSync strict(ctx, *model);
  model->a->forward(x).sum().backward();
  try {
    strict.finish();
    std::printf("strict=finished\n");
  } catch (const zeus::Error& e) {
    std::printf("strict_error=%s\n", e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  try {
    if (scenario == "spawn_stuck") {
      // Rank 1 fails; rank 2 ignores SIGTERM and sleeps: only the SIGKILL after the grace period
      // ends it, so the parent returns in seconds, not after the sleep.
      return zeus::distributed::spawn({.nprocs = 3, .grace_period = std::chrono::seconds(1)},
                                      [&](zeus::distributed::Context& ctx) {
                                        if (ctx.rank() == 1) {
                                          throw zeus::Error("rank 1 fails on purpose");
                                        }
                                        if (ctx.rank() == 2) {
                                          std::signal(SIGTERM, SIG_IGN);
                                          std::this_thread::sleep_for(std::chrono::seconds(60));
                                        }
                                      });
    }
    if (scenario == "spawn" || scenario == "spawn_fail") {
      // No launcher: the program starts its own three workers.
      return zeus::distributed::spawn({.nprocs = 3}, [&](zeus::distributed::Context& ctx) {
        if (scenario == "spawn_fail" && ctx.rank() == 1) {
          throw zeus::Error("rank 1 fails on purpose");
        }
        std::printf("spawn_rank=%d mean=%.6f\n", ctx.rank(), ctx.all_reduce_mean(ctx.rank()));
        std::fflush(stdout);
      });
    }
    zeus::distributed::InitOptions options;
    options.backend.store_timeout = std::chrono::seconds(20);
    options.backend.collective_timeout = std::chrono::seconds(5);
    if (const char* d = std::getenv("ZEUS_TEST_DEVICE")) {
      options.device = zeus::distributed::parse_device_type(d, "ZEUS_TEST_DEVICE");
    }
    if (const char* b = std::getenv("ZEUS_TEST_BACKEND")) {
      options.backend_kind = zeus::distributed::parse_backend_kind(b, "ZEUS_TEST_BACKEND");
    }
    if (const char* i = std::getenv("ZEUS_TEST_CUDA_DEVICE")) {
      options.cuda_device = std::atoi(i);
    }
    auto ctx = zeus::distributed::init(options);
    if (scenario == "collectives") {
      ctx->barrier();
      std::printf("mean=%.6f\nmax=%.6f\nmaster=%d\n", ctx->all_reduce_mean(ctx->rank()),
                  ctx->all_reduce_max(ctx->rank()), zeus::distributed::is_master() ? 1 : 0);
    } else if (scenario == "sync_model") {
      torch::manual_seed(100 + ctx->rank());
      torch::nn::Linear model(16, 8);
      std::printf("before=%.9g\n", checksum(*model));
      zeus::distributed::sync_model(*ctx, *model);
      std::printf("after=%.9g\n", checksum(*model));
      ctx->barrier();
    } else if (scenario == "gradient_sync") {
      gradient_sync_scenario(*ctx);
    } else if (scenario == "sync_wait" && argc == 4) {
      sync_wait_scenario(*ctx, std::string(argv[2]) == "armed", std::atoi(argv[3]));
    } else if (scenario == "unused_params") {
      unused_params_scenario(*ctx);
    } else if (scenario == "buffers") {
      // A module whose buffer differs per rank; prepare_forward() must make it the master's.
      struct WithBuffer : torch::nn::Module {
        WithBuffer(int rank) {
          weight = register_parameter("weight", torch::ones({2}));
          stat = register_buffer("stat", torch::full({3}, static_cast<float>(rank + 1)));
        }
        torch::Tensor weight;
        torch::Tensor stat;
      };
      auto module = std::make_shared<WithBuffer>(ctx->rank());
      zeus::distributed::GradientSync sync(*ctx, *module, {.broadcast_buffers = true});
      std::printf("stat_before=%.1f\n", module->stat.sum().item<double>());
      sync.prepare_forward();
      std::printf("stat_after=%.1f\n", module->stat.sum().item<double>());
    } else if (scenario == "elastic" && argc == 3) {
      std::printf("elastic_sum=%.0f world=%d restart=%s\n", ctx->all_reduce_sum(1.0),
                  ctx->world_size(),
                  std::getenv("TORCHELASTIC_RESTART_COUNT") != nullptr
                      ? std::getenv("TORCHELASTIC_RESTART_COUNT")
                      : "?");
      std::fflush(stdout);
      while (!std::filesystem::exists(argv[2])) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    } else if (scenario == "peer_dies") {
      if (ctx->rank() == 1) {
        ::_exit(0);
      }
      ::sleep(1);
      ctx->all_reduce_mean(1.0);
      std::printf("unexpected=success\n");
    } else {
      std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
      return 2;
    }
    std::fflush(stdout);
    return 0;
  } catch (const zeus::Error& e) {
    std::fprintf(stderr, "dist_worker: %s\n", e.what());
    std::printf("error=%s\n", e.what());
    std::fflush(stdout);
    return 1;
  }
}
