// Test helper: one rank of a multi-process job on 127.0.0.1, launched by dist_test with
// torchrun's variables. argv[1] names the scenario; results go to stdout as "key=value" lines.
//   collectives: barrier, all_reduce_mean/max of the rank
//   sync_model:  a Linear with rank-dependent weights, then sync_model; prints checksums
//   peer_dies:   rank 1 exits right after init; rank 0's all-reduce must fail, not hang
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "zeus/common/errors.h"
#include "zeus/dist/context.h"
#include "zeus/dist/sync_model.h"

namespace {

double checksum(torch::nn::Module& m) {
  double sum = 0;
  for (const auto& p : m.parameters()) {
    sum += p.sum().item<double>() * static_cast<double>(p.numel());
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  try {
    zeus::dist::InitOptions options;
    options.backend.store_timeout = std::chrono::seconds(20);
    options.backend.collective_timeout = std::chrono::seconds(5);
    auto ctx = zeus::dist::init(options);
    if (scenario == "collectives") {
      ctx->barrier();
      std::printf("mean=%.6f\nmax=%.6f\nmaster=%d\n", ctx->all_reduce_mean(ctx->rank()),
                  ctx->all_reduce_max(ctx->rank()), zeus::dist::is_master() ? 1 : 0);
    } else if (scenario == "sync_model") {
      torch::manual_seed(100 + ctx->rank());
      torch::nn::Linear model(16, 8);
      std::printf("before=%.9g\n", checksum(*model));
      zeus::dist::sync_model(*ctx, *model);
      std::printf("after=%.9g\n", checksum(*model));
      ctx->barrier();
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
