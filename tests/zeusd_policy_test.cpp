// zeusd's policy toward other users: its state is for root's eyes only, its secrets are refused
// when others can read them, and one slow client or GPU does not hold up the others.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <future>
#include <memory>
#include <thread>

#include "support/raw_connection.h"
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

// Opens `n` connections to `socket` as `uid` and holds them, silent, until killed; "ready" once
// the server accepted them (the ones over the cap are closed at once: still counted as tried).
std::unique_ptr<Child> hold_connections(unsigned uid, const fs::path& socket, int n) {
  const std::string script = fmt::format(
      "import socket, sys, time\n"
      "held = []\n"
      "for _ in range({}):\n"
      "    s = socket.socket(socket.AF_UNIX)\n"
      "    s.connect('{}')\n"
      "    held.append(s)\n"
      "time.sleep(1)\n"
      "print('ready', flush=True)\n"
      "time.sleep(600)\n",
      n, socket.string());
  auto child =
      std::make_unique<Child>(std::vector<std::string>{ZEUS_AS_UID_PATH, std::to_string(uid),
                                                       "/usr/bin/python3", "-c", script},
                              std::map<std::string, std::string>{});
  EXPECT_TRUE(child->wait_for_output("ready", seconds(30)));
  return child;
}

// One user holding 300 idle connections (more than the daemon's 256) does not lock another
// out: its share is a quarter, and another user's request is answered within a second.
TEST(ZeusdPolicy, OneUsersIdleConnectionsDoNotLockAnotherOut) {
  ZEUSD_SKIP_UNLESS_ROOT();
  if (!fs::exists("/usr/bin/python3")) {
    GTEST_SKIP() << "/usr/bin/python3 is missing (Debian's python3 package)";
  }
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir);
  auto hog = hold_connections(kUserA, daemon.socket(), 300);
  const auto start = std::chrono::steady_clock::now();
  auto other = client_as(kUserB, daemon, {"GET", "/discover"}, false);
  const ProcessResult r = other->wait();
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_THAT(r.out, HasSubstr("status=200")) << r.err;
  EXPECT_LT(took_s, 1.0);
  hog->kill(SIGKILL);
  hog->wait();
}

// Event streams are exempt from the idle timeout, so they have caps of their own: a peer's
// 33rd stream (a quarter of 128) is answered 429 naming it, while the others keep streaming.
TEST(ZeusdPolicy, APeersStreamsAreCappedBelowTheTotal) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir);
  std::vector<std::unique_ptr<RawConnection>> streams;
  for (int i = 0; i < 32; ++i) {
    streams.push_back(std::make_unique<RawConnection>(daemon.socket()));
    streams.back()->send("GET /gpu/stream_power?gpu_ids=0 HTTP/1.1\r\nHost: zeusd\r\n\r\n");
    ASSERT_THAT(streams.back()->read_until("\r\n\r\n"), HasSubstr("200 OK")) << i;
  }
  RawConnection over(daemon.socket());
  over.send("GET /gpu/stream_power?gpu_ids=0 HTTP/1.1\r\nHost: zeusd\r\n\r\n");
  const std::string reply = over.read_until("}");
  EXPECT_THAT(reply, HasSubstr("429"));
  EXPECT_THAT(reply, HasSubstr("uid 0 has 32 event streams open"));
  streams.pop_back();  // one closes: a slot is free again
  EXPECT_TRUE(eventually(
      [&] {
        RawConnection again(daemon.socket());
        again.send("GET /gpu/stream_power?gpu_ids=0 HTTP/1.1\r\nHost: zeusd\r\n\r\n");
        return again.read_until("\r\n\r\n").find("200 OK") != std::string::npos;
      },
      seconds(5)));
}

}  // namespace
}  // namespace zeus::test
