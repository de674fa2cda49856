// The real NVML backend (dlopen, symbol table, return-code checking) against the fake library.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/device/discovery.h"
#include "zeus/device/nvml/nvml_gpu_set.h"

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace zeus::device::nvml {
namespace {

NvmlGpuSetOptions visible(std::optional<std::string> cvd) {
  NvmlGpuSetOptions options;
  options.visible_devices = std::move(cvd);
  return options;
}

const std::vector<std::string> kUuids = {"GPU-aaaa-1111", "GPU-bbbb-2222", "GPU-abcd-3333",
                                         "GPU-cccc-4444"};

TEST(MapVisibleDevices, FollowsCudaRules) {
  EXPECT_THAT(map_visible_devices(std::nullopt, kUuids), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(map_visible_devices("", kUuids), ElementsAre());
  EXPECT_THAT(map_visible_devices("2,0", kUuids), ElementsAre(2, 0));
  EXPECT_THAT(map_visible_devices(" 3 , 1 ", kUuids), ElementsAre(3, 1));
  EXPECT_THAT(map_visible_devices("GPU-bbbb-2222,GPU-cccc", kUuids), ElementsAre(1, 3));
  EXPECT_THAT(map_visible_devices("cccc-4444", kUuids), ElementsAre(3));
  // CUDA stops at the first invalid entry.
  std::vector<std::string> ignored;
  EXPECT_THAT(map_visible_devices("1,7,2", kUuids, &ignored), ElementsAre(1));
  EXPECT_THAT(ignored, ElementsAre(HasSubstr("'7'"), HasSubstr("'2'")));
  EXPECT_THAT(map_visible_devices("0,0,1", kUuids), ElementsAre(0));
  EXPECT_THAT(map_visible_devices("GPU-a,1", kUuids), ElementsAre()) << "ambiguous prefix";
  EXPECT_THAT(map_visible_devices("-1", kUuids), ElementsAre());
}

// A MIG slice has no power limit of its own: an entry naming one stands for the GPU that holds
// it. The legacy "MIG-GPU-<uuid>/<gi>/<ci>" spelling names that GPU; the current "MIG-<uuid>"
// needs NVML's lookup.
TEST(MapVisibleDevices, MigInstancesStandForTheirGpu) {
  EXPECT_THAT(map_visible_devices("MIG-GPU-bbbb-2222/1/0", kUuids), ElementsAre(1));
  const MigParentLookup lookup = [](std::string_view mig) -> std::optional<std::string> {
    if (mig == "MIG-1234") {
      return "GPU-cccc-4444";
    }
    return std::nullopt;
  };
  EXPECT_THAT(map_visible_devices("MIG-1234,0", kUuids, nullptr, lookup), ElementsAre(3, 0));
  std::vector<std::string> ignored;
  EXPECT_THAT(map_visible_devices("2,MIG-9999,0", kUuids, &ignored, lookup), ElementsAre(2));
  EXPECT_THAT(ignored, ElementsAre(HasSubstr("no GPU holds this MIG instance"), HasSubstr("'0'")));
  EXPECT_THAT(map_visible_devices("MIG-1234", kUuids), ElementsAre()) << "no lookup";
}

std::vector<MachineGpuIdentity> identities(const std::vector<std::string>& names) {
  std::vector<MachineGpuIdentity> out;
  for (size_t i = 0; i < names.size(); ++i) {
    out.push_back({kUuids[i], names[i]});
  }
  return out;
}

TEST(MatchCudaDevice, TheRuntimeUuidDecides) {
  const auto gpus = identities({"A40", "A40", "A40", "A40"});
  // CUDA_VISIBLE_DEVICES would say otherwise: the runtime's UUID wins.
  const auto m = match_cuda_device(
      {.runtime_uuid = "GPU-abcd-3333", .index = 0, .visible_devices = "1"}, gpus);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->machine_index, 2);
  EXPECT_THAT(m->how, HasSubstr("UUID"));
  EXPECT_FALSE(m->note);
  EXPECT_THROW(match_cuda_device({.runtime_uuid = "GPU-ffff", .index = 0}, gpus), ConfigError);
  // A MIG instance: CUDA reports the instance's UUID; its GPU is found through NVML.
  const MigParentLookup lookup = [](std::string_view mig) -> std::optional<std::string> {
    return mig == "MIG-5678" ? std::optional<std::string>("GPU-bbbb-2222") : std::nullopt;
  };
  const auto mig = match_cuda_device({.runtime_uuid = "GPU-5678", .index = 0}, gpus, lookup);
  ASSERT_TRUE(mig);
  EXPECT_EQ(mig->machine_index, 1);
  EXPECT_THAT(*mig->note, HasSubstr("MIG instance"));
}

TEST(MatchCudaDevice, WithoutARuntimeFollowsTheVariables) {
  const auto same = identities({"A40", "A40", "A40", "A40"});
  // Permuted indices: CUDA device 1 is NVML GPU 0.
  EXPECT_EQ(match_cuda_device({.index = 1, .visible_devices = "3,0,2"}, same)->machine_index, 0);
  // UUID entries, and a prefix.
  EXPECT_EQ(match_cuda_device({.index = 0, .visible_devices = "GPU-cccc-4444,GPU-aaaa"}, same)
                ->machine_index,
            3);
  EXPECT_EQ(match_cuda_device({.index = 1, .visible_devices = "GPU-cccc-4444,GPU-aaaa"}, same)
                ->machine_index,
            0);
  EXPECT_EQ(match_cuda_device({.index = 2}, same)->machine_index, 2) << "unset: every GPU";
  EXPECT_FALSE(match_cuda_device({.index = 2, .visible_devices = "3,0"}, same)) << "no device 2";
  EXPECT_FALSE(match_cuda_device({.index = 0, .visible_devices = ""}, same));
  // Different GPUs and CUDA's default (fastest first) order: indices are a guess, said so.
  const auto mixed = identities({"A40", "V100", "A40", "V100"});
  const auto guess = match_cuda_device({.index = 0, .visible_devices = "1,2"}, mixed);
  ASSERT_TRUE(guess && guess->note);
  EXPECT_EQ(guess->machine_index, 1);
  EXPECT_THAT(*guess->note, HasSubstr("CUDA_DEVICE_ORDER=PCI_BUS_ID"));
  EXPECT_FALSE(
      match_cuda_device({.index = 0, .visible_devices = "1,2", .device_order = "PCI_BUS_ID"}, mixed)
          ->note);
  EXPECT_FALSE(match_cuda_device({.index = 0, .visible_devices = "GPU-bbbb"}, mixed)->note)
      << "a UUID is exact";
}

TEST(NvmlGpuSet, FindsTheGpuOfAMigInstanceAndOpensChosenIndices) {
  auto spec = test::four_a40s();
  spec[2].mig_uuids = {"MIG-aaaaaaaa-0000-0000-0000-000000000001",
                       "MIG-aaaaaaaa-0000-0000-0000-000000000002"};
  test::FakeNvml fake(spec);
  NvmlGpuSet all(visible(std::nullopt));
  EXPECT_EQ(all.mig_parent_uuid("MIG-aaaaaaaa-0000-0000-0000-000000000002"), spec[2].uuid);
  EXPECT_EQ(all.mig_parent_uuid("MIG-bbbbbbbb-0000-0000-0000-000000000002"), std::nullopt);
  EXPECT_EQ(all.mig_parent_uuid(spec[1].uuid), std::nullopt) << "a GPU, not a MIG instance";
  ASSERT_EQ(all.count(), 4);
  // CUDA_VISIBLE_DEVICES with a MIG UUID shows its GPU.
  NvmlGpuSet mig(visible("MIG-aaaaaaaa-0000-0000-0000-000000000001"));
  ASSERT_EQ(mig.count(), 1);
  EXPECT_EQ(mig.uuid(0), spec[2].uuid);
  // Exactly the chosen NVML GPUs, whatever CUDA_VISIBLE_DEVICES says.
  auto chosen = visible("0");
  chosen.nvml_indices = std::vector<int>{3, 1};
  NvmlGpuSet node(chosen);
  ASSERT_EQ(node.count(), 2);
  EXPECT_EQ(node.uuid(0), spec[3].uuid);
  EXPECT_EQ(node.machine_index(1), 1);
  chosen.nvml_indices = std::vector<int>{4};
  EXPECT_THROW(NvmlGpuSet{chosen}, ConfigError);
}

TEST(NvmlGpuSet, EnumeratesNamesUuidsAndReadings) {
  test::FakeNvml fake(test::four_a40s());
  NvmlGpuSet gpus(visible(std::nullopt));
  ASSERT_EQ(gpus.count(), 4);
  EXPECT_EQ(gpus.locator(), "nvml");
  EXPECT_EQ(gpus.name(2), "NVIDIA A40");
  EXPECT_EQ(gpus.uuid(2), "GPU-00000000-0000-0000-0000-000000000002");
  // The instant field (fake: averaged + 1 W) is preferred when present.
  EXPECT_EQ(gpus.power_mw(1), 111'000);
  EXPECT_THAT(gpus.describe(1), HasSubstr("instantaneous"));
  EXPECT_TRUE(gpus.has_energy_counter(0));
  const auto e0 = gpus.energy_mj(0);
  ASSERT_TRUE(e0.has_value());
  EXPECT_GE(*e0, 1'000'000);
  std::this_thread::sleep_for(50ms);
  EXPECT_GT(*gpus.energy_mj(0), *e0) << "energy counter must grow at 100 W";
  EXPECT_EQ(gpus.power_limit_mw(0), 300'000);
  EXPECT_EQ(gpus.default_power_limit_mw(0), 300'000);
  const auto range = gpus.power_limit_constraints_mw(0);
  EXPECT_EQ(range.min_mw, 100'000);
  EXPECT_EQ(range.max_mw, 300'000);
}

TEST(NvmlGpuSet, CudaVisibleDevicesReordersByUuid) {
  test::FakeNvml fake(test::four_a40s());
  test::ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "GPU-00000000-0000-0000-0000-000000000003,1");
  NvmlGpuSet gpus;
  ASSERT_EQ(gpus.count(), 2);
  EXPECT_EQ(gpus.uuid(0), "GPU-00000000-0000-0000-0000-000000000003");
  EXPECT_EQ(gpus.uuid(1), "GPU-00000000-0000-0000-0000-000000000001");
  EXPECT_EQ(gpus.power_mw(0), 131'000);
  // Setting visible GPU 0 changes NVML device 3.
  gpus.set_power_limit_mw(0, 200'000);
  EXPECT_EQ(fake.limit_mw(3), 200'000);
  EXPECT_EQ(fake.limit_mw(0), 300'000);
  // Out of range index names the count and the variable.
  try {
    gpus.power_mw(2);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("2 GPU(s)"));
    EXPECT_THAT(e.what(), HasSubstr("CUDA_VISIBLE_DEVICES"));
  }
  NvmlGpuSetOptions all;
  all.respect_visible_devices = false;
  EXPECT_EQ(NvmlGpuSet(all).count(), 4);
}

TEST(NvmlGpuSet, SetsLimitsAndRecordsThem) {
  test::FakeNvml fake(test::four_a40s());
  NvmlGpuSet gpus(visible(std::nullopt));
  gpus.set_power_limit_mw(1, 150'000);
  gpus.set_power_limit_mw(1, 300'000);
  EXPECT_EQ(gpus.power_limit_mw(1), 300'000);
  EXPECT_THAT(fake.limit_history(),
              ElementsAre(std::pair{1, int64_t{150'000}}, std::pair{1, int64_t{300'000}}));
}

TEST(NvmlGpuSet, OutOfRangeLimitIsConfigErrorWithRange) {
  test::FakeNvml fake(test::four_a40s());
  NvmlGpuSet gpus(visible(std::nullopt));
  try {
    gpus.set_power_limit_mw(0, 450'000);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("450000 mW"));
    EXPECT_THAT(e.what(), HasSubstr("100000-300000 mW"));
    EXPECT_THAT(e.what(), HasSubstr("NVIDIA A40"));
  }
  EXPECT_TRUE(fake.limit_history().empty());
}

TEST(NvmlGpuSet, PermissionDeniedSaysWhatToDo) {
  test::FakeNvml fake(test::four_a40s());
  fake.set_fault("set_no_permission", true);
  NvmlGpuSet gpus(visible(std::nullopt));
  try {
    gpus.set_power_limit_mw(2, 200'000);
    FAIL();
  } catch (const PermissionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nvmlDeviceSetPowerManagementLimit"));
    EXPECT_THAT(e.what(), HasSubstr("GPU 2"));
    EXPECT_THAT(e.what(), HasSubstr("GPU-00000000-0000-0000-0000-000000000002"));
    EXPECT_THAT(e.what(), HasSubstr("Insufficient Permissions"));
    EXPECT_THAT(e.what(), HasSubstr("root or CAP_SYS_ADMIN"));
  }
  EXPECT_EQ(fake.limit_mw(2), 300'000);
}

TEST(NvmlGpuSet, GpuLostMidRunIsDeviceLost) {
  test::FakeNvml fake(test::four_a40s());
  // Construction makes 16 device calls (name, uuid and two probes per GPU); a few reads later
  // the GPU falls off the bus.
  fake.set_fault("lost_after_calls", 20);
  NvmlGpuSet gpus(visible(std::nullopt));
  bool lost = false;
  for (int i = 0; i < 50 && !lost; ++i) {
    try {
      gpus.power_mw(0);
    } catch (const DeviceLost& e) {
      lost = true;
      EXPECT_THAT(e.what(), HasSubstr("GPU is lost"));
      EXPECT_THAT(e.what(), HasSubstr("nvidia-smi"));
    }
  }
  EXPECT_TRUE(lost);
}

TEST(NvmlGpuSet, MissingOptionalSymbolsFallBack) {
  auto gpus_spec = test::four_a40s();
  test::FakeNvml fake(gpus_spec, /*minimal_library=*/true);
  NvmlGpuSet gpus(visible(std::nullopt));
  EXPECT_THAT(
      gpus.library().missing_optional(),
      ElementsAre("nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetFieldValues",
                  "nvmlDeviceGetHandleByUUID", "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
                  // zeusd's (the minimal library has none of them either)
                  "nvmlDeviceGetPersistenceMode", "nvmlDeviceSetPersistenceMode",
                  "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetComputeRunningProcesses_v3",
                  "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks",
                  "nvmlDeviceSetMemoryLockedClocks", "nvmlDeviceResetMemoryLockedClocks",
                  // the metrics exporter's
                  "nvmlDeviceGetTemperature", "nvmlDeviceGetClockInfo"));
  EXPECT_EQ(gpus.count(), 4) << "unversioned nvmlInit/GetCount/GetHandleByIndex must be used";
  EXPECT_FALSE(gpus.has_energy_counter(0));
  EXPECT_EQ(gpus.energy_mj(0), std::nullopt);
  EXPECT_EQ(gpus.power_mw(0), 100'000) << "falls back to nvmlDeviceGetPowerUsage";
  EXPECT_THAT(gpus.describe(0), HasSubstr("nvmlDeviceGetPowerUsage"));
}

TEST(NvmlGpuSet, UnsupportedCounterOnOldGpuIsAbsent) {
  auto spec = test::four_a40s();
  spec[1].energy_counter = false;
  spec[1].instant_power = false;
  test::FakeNvml fake(spec);
  NvmlGpuSet gpus(visible(std::nullopt));
  EXPECT_TRUE(gpus.has_energy_counter(0));
  EXPECT_FALSE(gpus.has_energy_counter(1));
  EXPECT_EQ(gpus.energy_mj(1), std::nullopt);
  EXPECT_EQ(gpus.power_mw(1), 110'000);
}

TEST(NvmlGpuSet, MissingLibraryIsNotSupportedWithDlerror) {
  test::ScopedEnv lib("ZEUS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
  try {
    NvmlGpuSet gpus;
    FAIL();
  } catch (const NotSupported& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/libnvidia-ml.so.1"));
    EXPECT_THAT(e.what(), HasSubstr("cannot open shared object file"));
    EXPECT_THAT(e.what(), HasSubstr("sim:"));
  }
  const auto backends = discover_gpu_backends();
  ASSERT_EQ(backends.size(), 3u);
  EXPECT_EQ(backends[0].backend, "nvml");
  EXPECT_FALSE(backends[0].available);
  EXPECT_THAT(backends[0].reason, HasSubstr("cannot open shared object file"));
  EXPECT_EQ(backends[1].backend, "amdsmi");
  EXPECT_TRUE(backends[2].available) << backends[2].reason;
  EXPECT_THROW(open_gpu_set("auto", {}), ConfigError);
}

TEST(NvmlGpuSet, InitFailureAndNonNvmlLibraryAreExplained) {
  test::FakeNvml fake(test::four_a40s());
  fake.set_fault("init_error", 9);
  try {
    NvmlGpuSet gpus;
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nvmlInit_v2"));
    EXPECT_THAT(e.what(), HasSubstr("Driver Not Loaded"));
  }
  // A library that is not NVML at all: libz has none of the symbols.
  test::ScopedEnv lib("ZEUS_NVML_LIBRARY", "libz.so.1");
  try {
    NvmlGpuSet gpus;
    FAIL();
  } catch (const DeviceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("lacks required function"));
  }
}

TEST(Discovery, FakeNvmlIsListedWithItsGpus) {
  test::FakeNvml fake(test::four_a40s());
  const auto backends = discover_gpu_backends();
  EXPECT_TRUE(backends[0].available);
  EXPECT_THAT(backends[0].reason, HasSubstr("4 GPU(s)"));
  EXPECT_THAT(backends[0].reason, HasSubstr("GPU-00000000-0000-0000-0000-000000000003"));
  EXPECT_THROW(open_gpu_set("cuda", {}), ConfigError);
}

// The device layer's registry (issue #39): each backend once, "auto" tries only the machine's,
// and a locator reaches the backend its first word names, without the caller naming it.
TEST(Registry, EachBackendOnceAndAutoOpensOnlyTheMachinesGpus) {
  std::set<std::string> names;
  for (const GpuBackend& b : gpu_backends()) {
    EXPECT_TRUE(names.insert(b.name).second) << b.name << " is registered twice";
    EXPECT_TRUE(b.probe && b.open) << b.name;
  }
  ASSERT_NE(find_gpu_backend("nvml"), nullptr);
  EXPECT_TRUE(find_gpu_backend("nvml")->machine);
  ASSERT_NE(find_gpu_backend("sim:v100:imagenet"), nullptr);
  EXPECT_EQ(find_gpu_backend("sim:v100:imagenet")->name, "sim");
  EXPECT_FALSE(find_gpu_backend("sim")->machine) << "auto never simulates";
  EXPECT_EQ(find_gpu_backend("cuda"), nullptr);
  try {
    (void)open_gpu_set("cuda", {});
    FAIL() << "an unknown locator opened";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sim:<gpu>")) << "the registered forms are listed";
    EXPECT_THAT(e.what(), HasSubstr("nvml"));
  }
  test::FakeNvml fake(test::four_a40s());
  test::ScopedEnv cvd("CUDA_VISIBLE_DEVICES", "2,0");
  const auto visible = open_gpu_set("auto", {.zeusd_from_env = false});
  EXPECT_EQ(visible->locator(), "nvml");
  ASSERT_EQ(visible->count(), 2);
  EXPECT_EQ(visible->machine_index(0), 2);
  const auto chosen = open_gpu_set("auto", {.machine_indices = std::vector<int>{3}});
  ASSERT_EQ(chosen->count(), 1);
  EXPECT_EQ(chosen->uuid(0), test::four_a40s()[3].uuid);
  EXPECT_EQ(open_gpu_set("nvml", {.respect_visible_devices = false})->count(), 4);
}

// What each GPU can do is probed once and said: the full fake has every reading, an old
// driver's library (the minimal fake) the required ones only.
TEST(NvmlGpuSet, SaysWhatEachGpuCanDo) {
  {
    test::FakeNvml fake(test::four_a40s());
    fake.set_gpu_value(1, "energy_counter", false);
    fake.set_gpu_value(0, "throttle_power_ns", 5);
    const NvmlGpuSet gpus(visible(std::nullopt));
    const GpuCapabilities a = gpus.capabilities(0);
    EXPECT_TRUE(a.instant_power && a.energy_counter && a.power_limit && a.clocks && a.persistence &&
                a.temperature && a.throttle_counters);
    EXPECT_FALSE(gpus.capabilities(1).energy_counter);
    EXPECT_FALSE(gpus.capabilities(1).throttle_counters);
    EXPECT_EQ(gpus.pci_address(0), "0000:01:00.0");
  }
  test::FakeNvml old(test::four_a40s(), /*minimal_library=*/true);
  const NvmlGpuSet gpus(visible(std::nullopt));
  const GpuCapabilities c = gpus.capabilities(0);
  EXPECT_TRUE(c.power_limit);
  EXPECT_FALSE(c.instant_power || c.energy_counter || c.clocks || c.persistence || c.temperature ||
               c.throttle_counters);
  EXPECT_EQ(gpus.pci_address(0), "") << "no PCI call in this library";
  EXPECT_THROW(gpus.capabilities(4), ConfigError);
}

}  // namespace
}  // namespace zeus::device::nvml
