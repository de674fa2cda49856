// zeusd's policy toward other users: its state is for root's eyes only, its secrets are refused
// when others can read them, and one slow client or GPU does not hold up the others.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <future>

#include "zeusd_support.h"

namespace zeus::test {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
using std::chrono::seconds;

unsigned mode_of(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(ZeusdPolicy, TheStateDirectoryAndItsFilesAreTheOwnersAlone) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir);
  auto user =
      client_as(kUserA, daemon,
                {"POST", "/gpu/set_power_limit?gpu_ids=0&block=true&power_limit_mw=200000"}, false);
  EXPECT_THAT(user->wait().out, HasSubstr("status=200"));
  EXPECT_EQ(mode_of(daemon.state_dir()), 0700u) << "the audit says which uid changed what";
  EXPECT_EQ(mode_of(daemon.state_dir() / "audit.jsonl") & 077, 0u);
  EXPECT_EQ(mode_of(daemon.state_dir() / "leases.json") & 077, 0u);
}

TEST(ZeusdPolicy, ASigningKeyOthersCanReadIsRefused) {
  ZEUSD_SKIP_UNLESS_ROOT();
  SharedDir dir;
  const fs::path key = dir / "key";
  std::ofstream(key) << "0123456789abcdef0123456789abcdef";
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                           fs::perms::others_read);
  const ProcessResult r =
      run_process({ZEUSD_PATH, "serve", "--socket-path", (dir / "s.sock").string(), "--state-dir",
                   (dir / "state").string(), "--signing-key-path", key.string()},
                  seconds(20));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr(key.string()));
  EXPECT_THAT(r.err, HasSubstr("chmod 600"));
  EXPECT_FALSE(fs::exists(dir / "s.sock"));

  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);
  const ProcessResult issued =
      run_process({ZEUSD_PATH, "token", "issue", "--signing-key-path", key.string(), "--user",
                   "alice", "--scope", "gpu-read"});
  EXPECT_EQ(issued.exit_code, 0) << issued.err;
}

// A command override that takes seconds on GPU 0 holds GPU 0's changes only: a change to GPU 1
// is answered meanwhile (the book's lock is not held while a command runs).
TEST(ZeusdPolicy, ASlowOverrideOnOneGpuDoesNotHoldUpAnother) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  SharedDir dir;
  const fs::path file = dir / "overrides.toml";
  std::ofstream(file) << "[set_power_limit]\n"
                      << "commands = [\"/bin/sh -c 'test {gpu_id} != 0 || sleep 4'\"]\n"
                      << "timeout_s = 20\n";
  ZeusdProcess daemon(dir, {"--gpu-command-overrides", file.string()});
  auto slow = std::async(std::launch::async, [&] {
    return client_as(kUserA, daemon,
                     {"POST", "/gpu/set_power_limit?gpu_ids=0&block=true&power_limit_mw=200000"},
                     false)
        ->wait();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // GPU 0's command is running
  const auto start = std::chrono::steady_clock::now();
  auto fast =
      client_as(kUserB, daemon,
                {"POST", "/gpu/set_power_limit?gpu_ids=1&block=true&power_limit_mw=200000"}, false);
  EXPECT_THAT(fast->wait().out, HasSubstr("status=200"));
  const double fast_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_THAT(slow.get().out, HasSubstr("status=200"));
  EXPECT_LT(fast_s, 2.5) << "GPU 1's change waited for GPU 0's command";
}

}  // namespace
}  // namespace zeus::test
