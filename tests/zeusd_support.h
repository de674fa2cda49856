// zeusd's end-to-end tests: a real daemon process (as root) over the fake NVML machine, and
// clients run as unprivileged uids (support/as_uid.cpp), each in a directory they may reach.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
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
  // `launcher` comes before zeusd's own argv (own_pid_namespace(): zeusd in a PID namespace of
  // its own, as a DaemonSet without hostPID runs it).
  ZeusdProcess(const SharedDir& dir, std::vector<std::string> extra_flags = {},
               std::vector<std::string> launcher = {});
  ~ZeusdProcess();
  void start();
  // Kills it (SIGKILL: no chance to clean up) and reaps it.
  void kill9();
  const std::filesystem::path& socket() const { return socket_; }
  std::filesystem::path state_dir() const { return state_dir_; }
  std::map<std::string, std::string> client_env() const;
  // A client of this daemon in this (root) process, with the daemon's admin token: an
  // administrator's (its changes persist and end leases).
  device::zeusd::ZeusdReply call(const std::string& method, const std::string& target) const;
  // The same without the admin token: root, leased like any other process.
  device::zeusd::ZeusdReply call_as_root(const std::string& method,
                                         const std::string& target) const;
  // The daemon's admin token (its state directory's admin.token).
  std::string admin_token() const;
  int pid() const { return child_ ? child_->pid() : -1; }

 private:
  std::filesystem::path socket_;
  std::filesystem::path state_dir_;
  std::vector<std::string> flags_;
  std::vector<std::string> launcher_;
  std::unique_ptr<Child> child_;
};

// argv's prefix that runs a program as the first process of a new PID namespace (as a pod's
// container runs), with a /proc of its own where `own_proc`; SIGKILL of the returned process
// (unshare) kills that namespace's process too (--kill-child).
std::vector<std::string> own_pid_namespace(bool own_proc = false);

// SIGKILL of every process of the PID namespace that `launcher` (own_pid_namespace()'s unshare)
// made: its first process (the kernel then kills the rest), then the launcher; reaped. The
// launcher's --kill-child alone does not do it once the child changed its uid (the kernel
// clears a parent-death signal then).
void kill_pid_namespace(Child& launcher);

// How client_as starts the client.
struct ClientOptions {
  bool own_pid_namespace = false;  // a PID namespace of its own (a pod's container)
  // Joins this cgroup (its cgroup.procs file) before it drops to `uid`: a pod's (PodCgroup).
  std::filesystem::path cgroup_procs;
  std::map<std::string, std::string> env;  // on top of the daemon's client_env()
};

// A client process run as `uid`: zeus_test_zeusd_call with these (method, target) pairs.
// With hold, it stays (holding its leases) until killed; the returned child has printed "ready".
std::unique_ptr<Child> client_as(unsigned uid, const ZeusdProcess& daemon,
                                 const std::vector<std::string>& calls, bool hold,
                                 const ClientOptions& options = {});

// A process in its own pod: `argv` (run as `uid`) with `options`, started and waited for until it
// prints `ready`.
std::unique_ptr<Child> start_as(unsigned uid, const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& env,
                                const ClientOptions& options);

// A cgroup named as the kubelet names a pod's container's ("kubepods/besteffort/pod<UID>/<id>")
// in the first cgroup hierarchy this machine lets root write, removed when destroyed (after its
// processes ended). skip_reason() says why there is none.
class PodCgroup {
 public:
  explicit PodCgroup(std::string pod_uid);
  ~PodCgroup();
  PodCgroup(const PodCgroup&) = delete;
  PodCgroup& operator=(const PodCgroup&) = delete;
  const std::optional<std::string>& skip_reason() const { return skip_reason_; }
  std::filesystem::path procs() const { return dir_ / "cgroup.procs"; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path top_;  // the "kubepods" directory made here
  std::optional<std::string> skip_reason_;
};

// zeusd's path that sets GPU `gpu`'s limit to `mw` and answers once it is set.
std::string set_limit(int gpu, int64_t mw);

// `daemon`'s lease journal (leases.json in its state directory), parsed.
nlohmann::json journal(const ZeusdProcess& daemon);

// Runs `argv` as `uid` to completion.
ProcessResult run_as(unsigned uid, const std::vector<std::string>& argv,
                     const std::map<std::string, std::string>& env);

}  // namespace zeus::test
