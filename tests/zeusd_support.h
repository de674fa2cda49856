// zeusd's end-to-end tests: a real daemon process (as root) over the fake NVML machine, and
// clients run as unprivileged uids (support/as_uid.cpp), each in a directory they may reach.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "zeus/device/zeusd/zeusd_client.h"

namespace zeus::test {

// Unprivileged uids the tests act as (no /etc/passwd entry needed).
inline constexpr unsigned kUserA = 61001;
inline constexpr unsigned kUserB = 61002;

// Why these tests cannot run here (not root: zeusd needs it, and so does becoming another
// uid), or std::nullopt.
std::optional<std::string> zeusd_skip_reason();

// Skips the test, saying why, where zeusd_skip_reason() says so.
#define ZEUSD_SKIP_UNLESS_ROOT()                \
  do {                                          \
    if (const auto why = zeusd_skip_reason()) { \
      GTEST_SKIP() << *why;                     \
    }                                           \
  } while (false)

// A temporary directory other uids can reach: the socket lives in it, and "scratch/" (mode
// 1777) takes what the clients write.
class SharedDir {
 public:
  SharedDir();
  std::filesystem::path operator/(const std::string& name) const { return dir_ / name; }
  const std::filesystem::path& path() const { return dir_.path(); }
  std::filesystem::path scratch() const { return dir_ / "scratch"; }

 private:
  TempDir dir_;
};

// `zeusd serve` on a Unix socket (or the given --mode tcp flags) with its state directory,
// started and ready (answers /discover) when constructed; SIGTERM and reaped when destroyed.
class ZeusdProcess {
 public:
  ZeusdProcess(const SharedDir& dir, std::vector<std::string> extra_flags = {});
  ~ZeusdProcess();
  void start();
  // Kills it (SIGKILL: no chance to clean up) and reaps it.
  void kill9();
  const std::filesystem::path& socket() const { return socket_; }
  std::filesystem::path state_dir() const { return state_dir_; }
  std::map<std::string, std::string> client_env() const;
  // A client of this daemon in this (root) process: an administrator's.
  device::zeusd::ZeusdReply call(const std::string& method, const std::string& target) const;
  int pid() const { return child_ ? child_->pid() : -1; }

 private:
  std::filesystem::path socket_;
  std::filesystem::path state_dir_;
  std::vector<std::string> flags_;
  std::unique_ptr<Child> child_;
};

// A client process run as `uid`: zeus_test_zeusd_call with these (method, target) pairs.
// With hold, it stays (holding its leases) until killed; the returned child has printed "ready".
std::unique_ptr<Child> client_as(unsigned uid, const ZeusdProcess& daemon,
                                 const std::vector<std::string>& calls, bool hold);

// Runs `argv` as `uid` to completion.
ProcessResult run_as(unsigned uid, const std::vector<std::string>& argv,
                     const std::map<std::string, std::string>& env);

}  // namespace zeus::test
