#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/device/discovery.h"
#include "zeus/device/rapl/rapl_cpu_set.h"

using ::testing::HasSubstr;

namespace zeus::device::rapl {
namespace {

using test::FakeRapl;

TEST(RaplCpuSet, ReadsPackagesAndDram) {
  FakeRapl fake;
  RaplCpuSet cpus({fake.root()});
  ASSERT_EQ(cpus.count(), 2);
  EXPECT_EQ(cpus.name(0), "package-0");
  EXPECT_EQ(cpus.name(1), "package-1");
  EXPECT_TRUE(cpus.has_dram(0));
  EXPECT_FALSE(cpus.has_dram(1));
  EXPECT_EQ(cpus.energy_uj(0), 0) << "energy counts from construction";
  fake.set("intel-rapl:0", 1600);
  EXPECT_EQ(cpus.energy_uj(0), 600);
  fake.set("intel-rapl:0/intel-rapl:0:1", 450);
  EXPECT_EQ(cpus.dram_energy_uj(0), 250);
  EXPECT_EQ(cpus.dram_energy_uj(1), std::nullopt);
  EXPECT_THROW(cpus.energy_uj(2), ConfigError);
}

TEST(RaplCpuSet, HandlesWraparound) {
  FakeRapl fake;
  RaplCpuSet cpus({fake.root()});
  fake.set("intel-rapl:0", 9'000);
  EXPECT_EQ(cpus.energy_uj(0), 8'000);
  fake.set("intel-rapl:0", 500);  // wrapped at 10'000
  EXPECT_EQ(cpus.energy_uj(0), 8'000 + 1'000 + 500);
  fake.set("intel-rapl:0", 700);
  EXPECT_EQ(cpus.energy_uj(0), 9'700);
}

TEST(RaplCpuSet, MissingTreeIsNotSupportedNamingRoot) {
  test::TempDir empty;
  try {
    RaplCpuSet cpus({empty.path()});
    FAIL();
  } catch (const NotSupported& e) {
    EXPECT_THAT(e.what(), HasSubstr(empty.path().string()));
    EXPECT_THAT(e.what(), HasSubstr("intel_rapl"));
  }
  test::ScopedEnv root("ZEUS_RAPL_ROOT", "/nonexistent/powercap");
  EXPECT_THROW(RaplCpuSet cpus, NotSupported);
}

// The CPUs come from the device registry too (issue #39): the first CPU backend that opens, its
// error when none does, and what each found for `zeus monitor --list`.
TEST(CpuRegistry, OpensTheMachinesPackagesOrSaysWhyNot) {
  ASSERT_FALSE(cpu_backends().empty());
  EXPECT_EQ(cpu_backends().front().name, "rapl");
  FakeRapl fake;
  const auto cpus = open_cpu_set({.rapl_root = fake.root()});
  ASSERT_EQ(cpus->count(), 2);
  EXPECT_TRUE(cpus->has_dram(0));
  test::ScopedEnv root("ZEUS_RAPL_ROOT", fake.root().string());
  EXPECT_EQ(open_cpu_set()->count(), 2) << "the variable, as RaplCpuSet reads it";
  EXPECT_TRUE(discover_cpu_backend().available);
  EXPECT_THAT(discover_cpu_backend().reason, HasSubstr("2 package(s)"));
  test::TempDir empty;
  EXPECT_THROW((void)open_cpu_set({.rapl_root = empty.path()}), NotSupported);
  test::ScopedEnv none("ZEUS_RAPL_ROOT", empty.path().string());
  EXPECT_FALSE(discover_cpu_backend().available);
  EXPECT_THAT(discover_cpu_backend().reason, HasSubstr(empty.path().string()));
}

TEST(RaplCpuSet, CorruptCounterNamesFile) {
  FakeRapl fake;
  std::ofstream(fake.root() / "intel-rapl:1/energy_uj") << "garbage\n";
  try {
    RaplCpuSet cpus({fake.root()});
    FAIL();
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("intel-rapl:1/energy_uj"));
    EXPECT_THAT(e.what(), HasSubstr("garbage"));
  }
}

// Root reads any file, so the check runs as `nobody` in a child when the test runs as root.
TEST(RaplCpuSet, UnreadableCounterIsPermissionErrorNamingPath) {
  FakeRapl fake;
  const auto path = fake.root() / "intel-rapl:0/energy_uj";
  std::filesystem::permissions(path, std::filesystem::perms::owner_write);
  std::filesystem::permissions(fake.root(), std::filesystem::perms::all,
                               std::filesystem::perm_options::add);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::geteuid() == 0 && ::setresuid(65534, 65534, 65534) != 0) {
      ::_exit(3);
    }
    try {
      RaplCpuSet cpus({fake.root()});
      ::_exit(1);
    } catch (const PermissionError& e) {
      const std::string msg = e.what();
      ::_exit(msg.find(path.string()) != std::string::npos &&
                      msg.find("readable only by root") != std::string::npos
                  ? 0
                  : 2);
    } catch (...) {
      ::_exit(4);
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: no error, 2: message lacks path/advice, 3: setuid, 4: wrong type";
}

}  // namespace
}  // namespace zeus::device::rapl
