// The libtorch zeus_torch is built against, and how a rank picks its device (pure: no GPU
// needed).
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <system_error>

#include "zeus/common/errors.h"
#include "zeus/distributed/context.h"
#include "zeus/distributed/libtorch_info.h"

using ::testing::HasSubstr;

namespace zeus::distributed {
namespace {

TEST(Libtorch, LinksAndReportsItsVersion) {
  EXPECT_TRUE(std::regex_match(libtorch_version(), std::regex(R"(\d+\.\d+(\.\d+)?.*)")))
      << libtorch_version();
  EXPECT_GE(libtorch_num_threads(), 1);
}

// The shared objects of `name` (e.g. "libc10.so") mapped into this process.
std::set<std::string> mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> paths;
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) {
      continue;
    }
    const std::string path = line.substr(slash);
    const std::string base = path.substr(path.rfind('/') + 1);
    if (base.rfind(name, 0) == 0) {
      paths.insert(path);
    }
  }
  return paths;
}

// The build's first trap made visible at run time: two libc10 in one process abort in c10; the
// wheel's CUDA runtime must be the one loaded (the toolkit's is older).
TEST(Libtorch, OneLibtorchIsLoadedAndItIsTheBuildsOwn) {
  const auto c10 = mapped("libc10.so");
  ASSERT_EQ(c10.size(), 1u) << "several libc10: " << ::testing::PrintToString(c10);
  const std::string site = ZEUS_TORCH_SITE;
  if (site.empty()) {
    EXPECT_THAT(*c10.begin(), ::testing::Not(HasSubstr("site-packages"))) << "Debian's libtorch";
    EXPECT_FALSE(cuda::built_with_cuda());
    return;
  }
  EXPECT_EQ(c10.begin()->rfind(site, 0), 0u) << *c10.begin() << " is not under " << site;
  EXPECT_TRUE(cuda::built_with_cuda());
  for (const auto& cudart : mapped("libcudart.so")) {
    EXPECT_EQ(cudart.rfind(site, 0), 0u) << cudart << ": the CUDA toolkit's runtime was loaded";
  }
}

// Trap 5 (cmake/ZeusTorch.cmake): torch 2.11's libtorch.so exports std::filesystem functions
// of a newer libstdc++, whose remove_all jumps to address 0 with an older one. The program's
// standard library calls must resolve to libstdc++ itself, and remove_all must work.
TEST(Libtorch, TheStandardLibraryIsLibstdcxxNotACopyInsideLibtorch) {
  using RemoveAll = std::uintmax_t (*)(const std::filesystem::path&, std::error_code&);
  const RemoveAll remove_all = &std::filesystem::remove_all;
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(remove_all), &info), 0);
  const std::string from = info.dli_fname ? info.dli_fname : "";
  ASSERT_THAT(from.substr(from.rfind('/') + 1), ::testing::StartsWith("libstdc++.so"))
      << "std::filesystem::remove_all resolves to " << from;
  const auto dir =
      std::filesystem::temp_directory_path() / ("zeus-torch-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "a" / "b");
  std::ofstream(dir / "a" / "b" / "f") << "x";
  std::error_code ec;
  EXPECT_EQ(remove_all(dir, ec), 4u) << ec.message();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

cluster::Env env_of(int rank, int local_rank, int local_world) {
  cluster::Env env;
  env.rank = rank;
  env.local_rank = local_rank;
  env.world_size = local_world;
  env.local_world_size = local_world;
  return env;
}

TEST(ChooseDevice, AutoTakesCudaLocalRankWhenThereIsOneElseTheCpu) {
  const auto env = env_of(1, 1, 2);
  EXPECT_EQ(choose_device({.cuda_built = true, .cuda_device_count = 2}, env),
            c10::Device(c10::kCUDA, 1));
  EXPECT_EQ(choose_device({.cuda_built = false, .cuda_device_count = 0}, env),
            c10::Device(c10::kCPU));
  EXPECT_EQ(choose_device({.cuda_built = true, .cuda_device_count = 0}, env),
            c10::Device(c10::kCPU))
      << "a CUDA libtorch on a machine without GPUs";
  EXPECT_EQ(
      choose_device({.type = DeviceType::kCpu, .cuda_built = true, .cuda_device_count = 2}, env),
      c10::Device(c10::kCPU));
  EXPECT_EQ(choose_device({.cuda_device = 0, .cuda_built = true, .cuda_device_count = 2}, env),
            c10::Device(c10::kCUDA, 0));
}

TEST(ChooseDevice, AWorkerGivenOneDeviceOfItsOwnUsesIt) {
  // zeus run --devices 3,5: local rank 1 sees only physical GPU 5, as its cuda:0.
  EXPECT_EQ(choose_device({.cuda_built = true, .cuda_device_count = 1, .visible_devices = "5"},
                          env_of(1, 1, 2)),
            c10::Device(c10::kCUDA, 0));
}

TEST(ChooseDevice, ALocalRankWithoutAGpuIsAClearError) {
  try {
    choose_device({.cuda_built = true, .cuda_device_count = 2, .visible_devices = "0,1"},
                  env_of(6, 2, 4));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("rank 6"));
    EXPECT_THAT(what, HasSubstr("host "));
    EXPECT_THAT(what, HasSubstr("needs CUDA device 2 but 2 device(s) are visible"));
    EXPECT_THAT(what, HasSubstr("CUDA_VISIBLE_DEVICES='0,1'"));
  }
  try {
    choose_device({.type = DeviceType::kCuda, .cuda_built = false}, env_of(0, 0, 1));
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("without CUDA"));
  }
  EXPECT_THROW(choose_device({.type = DeviceType::kCuda, .cuda_built = true}, env_of(0, 0, 1)),
               ConfigError);
}

TEST(ChooseDevice, FlagSpellings) {
  EXPECT_EQ(parse_device_type("CUDA", "--device-type"), DeviceType::kCuda);
  EXPECT_EQ(parse_device_type("auto", "--device-type"), DeviceType::kAuto);
  EXPECT_EQ(parse_backend_kind("nccl", "--backend"), BackendKind::kNccl);
  EXPECT_THROW(parse_device_type("gpu", "--device-type"), ConfigError);
  EXPECT_THROW(parse_backend_kind("mpi", "--backend"), ConfigError);
}

// On a machine without a GPU, init() binds the CPU and Gloo whichever libtorch this is; asking
// for CUDA there fails before any rendezvous.
TEST(Init, WithoutAGpuBindsTheCpu) {
  if (cuda::device_count() > 0) {
    GTEST_SKIP() << "this machine has a GPU (gpu_test covers it)";
  }
  auto ctx = init();
  EXPECT_EQ(ctx->device(), c10::Device(c10::kCPU));
  EXPECT_EQ(ctx->backend_kind(), BackendKind::kGloo);
  EXPECT_THROW(init({.device = DeviceType::kCuda}), ConfigError);
  EXPECT_THROW(init({.backend_kind = BackendKind::kNccl}), ConfigError);
}

}  // namespace
}  // namespace zeus::distributed
