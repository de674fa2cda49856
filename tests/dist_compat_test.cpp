// Code written against the distributed runtime's old name builds and means the same: the
// headers under zeus/dist/ forward to zeus/distributed/, and zeus::dist is zeus::distributed.
#include <gtest/gtest.h>

#include <type_traits>

#include "zeus/common/errors.h"
#include "zeus/dist/context.h"
#include "zeus/dist/distributed_sampler.h"
#include "zeus/dist/gradient_sync.h"
#include "zeus/dist/spawn.h"
#include "zeus/dist/sync_model.h"

namespace {

static_assert(std::is_same_v<zeus::dist::Context, zeus::distributed::Context>);
static_assert(std::is_same_v<zeus::dist::SpawnOptions, zeus::distributed::SpawnOptions>);
static_assert(std::is_same_v<zeus::dist::GradientSync, zeus::distributed::GradientSync>);

TEST(DistCompat, TheOldNamespaceCallsTheRuntime) {
  EXPECT_EQ(zeus::dist::parse_device_type("cpu", "--device-type"),
            zeus::distributed::DeviceType::kCpu);
  EXPECT_THROW((void)zeus::dist::parse_device_type("tpu", "--device-type"), zeus::ConfigError);
}

}  // namespace
