// What only a GPU can check: the CUDA device binding, NCCL collectives, GradientSync on CUDA
// tensors, the loader's pinned, overlapped copies, and the CUDA runtime's UUID against the real
// NVML. Every test skips, saying why, without a CUDA libtorch (Debian's build) or without a GPU
// (the wheel build on a CPU machine); scripts/gpu-check.sh runs them on the GPU machine.
#include <ATen/Functions.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/data/data_loader.h"
#include "zeus/device/discovery.h"
#include "zeus/device/visible_devices.h"
#include "zeus/distributed/backend.h"
#include "zeus/distributed/context.h"

using ::testing::HasSubstr;

namespace zeus::distributed {
namespace {

#define ZEUS_NEEDS_GPU(n)                                                                      \
  do {                                                                                         \
    if (!cuda::built_with_cuda()) {                                                            \
      GTEST_SKIP() << "libtorch has no CUDA (Debian's build): `make test-cuda` on a GPU runs " \
                      "this";                                                                  \
    }                                                                                          \
    if (cuda::device_count() < (n)) {                                                          \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), " << cuda::device_count()           \
                   << " visible (CUDA_VISIBLE_DEVICES, driver)";                               \
    }                                                                                          \
  } while (false)

TEST(Gpu, InitBindsTheLocalRanksDeviceAndNccl) {
  ZEUS_NEEDS_GPU(1);
  auto ctx = init();
  EXPECT_EQ(ctx->device(), c10::Device(c10::kCUDA, 0));
  EXPECT_EQ(ctx->backend_kind(), BackendKind::kNccl);
  EXPECT_EQ(ctx->collective_device(), ctx->device());
  ctx->synchronize_device();
  auto cpu = init({.device = DeviceType::kCpu});
  EXPECT_EQ(cpu->backend_kind(), BackendKind::kGloo);
}

// The UUID the CUDA runtime gives cuda:0 names one of the GPUs the real NVML sees: the mapping
// from a rank's device to the GPU its local master measures rests on it.
TEST(Gpu, TheRuntimesUuidIsOneOfNvmlsGpus) {
  ZEUS_NEEDS_GPU(1);
  const std::string uuid = cuda::device_uuid(0);
  EXPECT_THAT(uuid, ::testing::MatchesRegex("GPU-[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}"));
  const auto nvml = device::open_gpu_set("nvml", {.respect_visible_devices = false});
  const auto match = device::match_cuda_device({.runtime_uuid = uuid, .index = 0}, *nvml);
  ASSERT_TRUE(match);
  EXPECT_EQ(nvml->name(match->machine_index), cuda::device_name(0))
      << "NVML and CUDA name the same GPU";
}

// NCCL in a world of one, what one GPU can show: the group is NCCL (not a silent Gloo), every
// collective runs and leaves random data bit for bit as it was (a wrongly laid out ncclConfig_t,
// trap 3, corrupts memory), a background reduction is ordered before later work on the stream,
// and a root that does not exist is refused by name. Sums across ranks need two GPUs: NCCL
// refuses two ranks on one device (GradientSyncOverNcclOnTwoGpus).
TEST(Gpu, NcclOnAWorldOfOneKeepsDataIntactAndRefusesAMissingRoot) {
  ZEUS_NEEDS_GPU(1);
  cluster::Env env;
  env.master_addr = "127.0.0.1";
  env.master_port = test::free_port();
  Backend nccl(env, {.store_timeout = std::chrono::seconds(20),
                     .collective_timeout = std::chrono::seconds(20),
                     .kind = BackendKind::kNccl,
                     .cuda_device = 0});
  ASSERT_EQ(nccl.kind(), BackendKind::kNccl);
  const auto opts = at::TensorOptions().device(at::kCUDA, 0);
  const at::Tensor original = at::randn({4099}, opts.dtype(at::kFloat));
  std::vector<at::Tensor> t{original.clone()};
  nccl.all_reduce_sum(t);
  EXPECT_TRUE(at::equal(t[0], original)) << "all_reduce over one rank changed the data";
  nccl.broadcast(t, 0);
  EXPECT_TRUE(at::equal(t[0], original)) << "broadcast from the only rank changed the data";
  EXPECT_EQ(t[0].device(), c10::Device(c10::kCUDA, 0));
  nccl.barrier();
  std::vector<at::Tensor> big{at::ones({1 << 20}, opts)};
  auto pending = nccl.start_all_reduce_sum(big);
  pending->wait();  // orders the reduction before the next work on this stream
  big[0].mul_(2);
  EXPECT_EQ(big[0].sum().item<float>(), 2.0f * (1 << 20));
  try {
    nccl.broadcast(t, 1);
    FAIL() << "broadcast from rank 1 of a world of one";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("broadcast from rank 1, which is not a rank"));
  }
}

// Two ranks sharing cuda:0 over Gloo (CUDA tensors): replicas equal one process trained on the
// union of the data, as on the CPU.
TEST(Gpu, GradientSyncOnCudaTensorsMatchesOneProcess) {
  ZEUS_NEEDS_GPU(1);
  const auto ranks = test::run_ranks({ZEUS_DIST_WORKER_PATH, "gradient_sync"}, 2,
                                     {{"ZEUS_TEST_DEVICE", "cuda"},
                                      {"ZEUS_TEST_BACKEND", "gloo"},
                                      {"ZEUS_TEST_CUDA_DEVICE", "0"}});
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ranks[r].process.exit_code, 0) << ranks[r].process.out << ranks[r].process.err;
    EXPECT_EQ(ranks[r].values.at("device"), "cuda:0");
    EXPECT_LT(std::stod(ranks[r].values.at("max_diff")), 1e-5) << "rank " << r;
    EXPECT_EQ(ranks[r].values.at("checksum"), ranks[0].values.at("checksum"));
  }
}

// With two GPUs, the real thing: one GPU per rank, NCCL, buckets on the devices.
TEST(Gpu, GradientSyncOverNcclOnTwoGpus) {
  ZEUS_NEEDS_GPU(2);
  const auto ranks =
      test::run_ranks({ZEUS_DIST_WORKER_PATH, "gradient_sync"}, 2, {{"ZEUS_TEST_DEVICE", "cuda"}});
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ranks[r].process.exit_code, 0) << ranks[r].process.out << ranks[r].process.err;
    EXPECT_EQ(ranks[r].values.at("device"), "cuda:" + std::to_string(r));
    EXPECT_LT(std::stod(ranks[r].values.at("max_diff")), 1e-5) << "rank " << r;
  }
}

// The loader's batches arrive on the device, in order, equal to the host data, with and without
// loader threads (which pin them).
TEST(Gpu, LoaderBatchesArriveOnTheDeviceInOrder) {
  ZEUS_NEEDS_GPU(1);
  const auto x = at::arange(0, 200, at::kFloat).reshape({100, 2});
  const auto y = at::arange(0, 100, at::kLong);
  for (int workers : {0, 2}) {
    data::DataLoader eval(
        std::make_shared<data::TensorDataset>(x, y),
        {.batch_size = 8, .num_workers = workers, .device = c10::Device(c10::kCUDA, 0)});
    int64_t seen = 0;
    for (auto& batch : eval) {
      ASSERT_TRUE(batch.data.is_cuda());
      ASSERT_TRUE(batch.target.is_cuda());
      const auto expected = y.narrow(0, seen, batch.target.size(0));
      EXPECT_TRUE(at::equal(batch.target.cpu(), expected)) << "batch at " << seen;
      EXPECT_TRUE(at::equal(batch.data.cpu(), x.narrow(0, seen, batch.data.size(0))));
      // Work on the current stream right away must see the copied values.
      EXPECT_EQ(batch.data.sum().item<float>(),
                x.narrow(0, seen, batch.data.size(0)).sum().item<float>());
      seen += batch.target.size(0);
    }
    EXPECT_EQ(seen, 100) << workers << " worker(s)";
  }
}

TEST(Gpu, AskingForAMissingDeviceNamesWhatIsVisible) {
  ZEUS_NEEDS_GPU(1);
  const int n = cuda::device_count();
  try {
    data::DataLoader eval(std::make_shared<data::TensorDataset>(at::zeros({4, 1}), at::zeros({4})),
                          {.batch_size = 2, .device = c10::Device(c10::kCUDA, n)});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(n) + " CUDA device(s) are visible"));
  }
}

}  // namespace
}  // namespace zeus::distributed
