#include "zeusd_support.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "zeus/common/atomic_file.h"

namespace zeus::test {

namespace fs = std::filesystem;

std::optional<std::string> zeusd_skip_reason() {
  if (::geteuid() != 0) {
    return "zeusd's end-to-end tests run the daemon as root and its clients as other uids; "
           "run the suite as root (CI does)";
  }
  return std::nullopt;
}

SharedDir::SharedDir() {
  fs::permissions(dir_.path(), fs::perms::owner_all | fs::perms::group_read |
                                   fs::perms::group_exec | fs::perms::others_read |
                                   fs::perms::others_exec);
  fs::create_directories(scratch());
  fs::permissions(scratch(), fs::perms::all | fs::perms::sticky_bit);
}

ZeusdProcess::ZeusdProcess(const SharedDir& dir, std::vector<std::string> extra_flags,
                           std::vector<std::string> launcher)
    : socket_(dir / "zeusd.sock"),
      state_dir_(dir / "state"),
      flags_(std::move(extra_flags)),
      launcher_(std::move(launcher)) {
  start();
}

ZeusdProcess::~ZeusdProcess() {
  if (child_) {
    // SIGTERM to zeusd itself (under a launcher, its one child): it keeps its journal.
    std::ifstream children(fmt::format("/proc/{0}/task/{0}/children", child_->pid()));
    int first = 0;
    if (launcher_.empty() || !(children >> first)) {
      first = child_->pid();
    }
    ::kill(first, SIGTERM);
    child_->wait();
  }
}

void ZeusdProcess::start() {
  std::vector<std::string> argv = launcher_;
  argv.insert(argv.end(), {ZEUSD_PATH, "serve", "--socket-path", socket_.string(), "--state-dir",
                           state_dir_.string()});
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  child_ = std::make_unique<Child>(argv);
  const bool tcp = std::find(flags_.begin(), flags_.end(), "tcp") != flags_.end();
  const bool ready = eventually(
      [&] {
        if (!tcp && !fs::exists(socket_)) {
          return false;
        }
        try {
          return call("GET", "/discover").status == 200;
        } catch (const std::exception&) {
          return false;
        }
      },
      std::chrono::seconds(15));
  if (!ready) {
    throw std::runtime_error("zeusd did not start answering within 15 s");
  }
}

void ZeusdProcess::kill9() {
  kill_pid_namespace(*child_);  // zeusd itself, or every process of its own namespace
  child_.reset();
}

std::map<std::string, std::string> ZeusdProcess::client_env() const {
  std::map<std::string, std::string> env{{"ZEUSD_SOCK_PATH", socket_.string()}};
  for (size_t i = 0; i + 1 < flags_.size(); ++i) {
    if (flags_[i] == "--tcp-bind-address") {
      env = {{"ZEUSD_HOST_PORT", flags_[i + 1]}, {"ZEUSD_SOCK_PATH", ""}};
    }
  }
  return env;
}

std::string ZeusdProcess::admin_token() const {
  std::ifstream in(state_dir_ / "admin.token");
  std::string token;
  std::getline(in, token);
  return token;
}

device::zeusd::ZeusdReply ZeusdProcess::call(const std::string& method,
                                             const std::string& target) const {
  device::zeusd::ZeusdEndpoint e;
  const auto env = client_env();
  if (const auto it = env.find("ZEUSD_HOST_PORT"); it != env.end()) {
    e.host_port = it->second;
  } else {
    e.socket_path = socket_.string();
    e.admin_token = admin_token();
  }
  device::zeusd::ZeusdClient client(e);
  return client.request(method, target);
}

device::zeusd::ZeusdReply ZeusdProcess::call_as_root(const std::string& method,
                                                     const std::string& target) const {
  device::zeusd::ZeusdEndpoint e;
  const auto env = client_env();
  if (const auto it = env.find("ZEUSD_HOST_PORT"); it != env.end()) {
    e.host_port = it->second;
  } else {
    e.socket_path = socket_.string();
  }
  device::zeusd::ZeusdClient client(e);
  return client.request(method, target);
}

std::vector<std::string> own_pid_namespace(bool own_proc) {
  std::vector<std::string> argv{"/usr/bin/unshare", "--pid", "--fork", "--kill-child"};
  if (own_proc) {
    argv.emplace_back("--mount-proc");
  }
  return argv;
}

void kill_pid_namespace(Child& launcher) {
  std::ifstream children(fmt::format("/proc/{0}/task/{0}/children", launcher.pid()));
  int first = 0;
  while (children >> first) {
    ::kill(first, SIGKILL);
  }
  launcher.kill(SIGKILL);
  launcher.wait();
}

std::unique_ptr<Child> start_as(unsigned uid, const std::vector<std::string>& argv,
                                const std::map<std::string, std::string>& env,
                                const ClientOptions& options) {
  std::vector<std::string> full;
  if (options.own_pid_namespace) {
    full = own_pid_namespace();
  }
  if (!options.cgroup_procs.empty()) {
    // The shell joins the pod's cgroup while still root ("$$" is its pid in its own namespace,
    // which is how cgroup.procs reads a pid), then becomes the client.
    full.insert(full.end(), {"/bin/sh", "-c", "echo $$ > \"$0\" && exec \"$@\"",
                             options.cgroup_procs.string()});
  }
  full.insert(full.end(), {ZEUS_AS_UID_PATH, std::to_string(uid)});
  full.insert(full.end(), argv.begin(), argv.end());
  auto with = env;
  if (options.own_pid_namespace) {
    with["ZEUS_TEST_DIE_WITH_PARENT"] = "1";  // a test that ends early leaves no pod behind
  }
  auto child = std::make_unique<Child>(full, with);
  if (!child->wait_for_output("ready", std::chrono::seconds(20))) {
    throw std::runtime_error("the client as uid " + std::to_string(uid) + " did not get ready");
  }
  return child;
}

std::unique_ptr<Child> client_as(unsigned uid, const ZeusdProcess& daemon,
                                 const std::vector<std::string>& calls, bool hold,
                                 const ClientOptions& options) {
  std::vector<std::string> argv{ZEUS_ZEUSD_CALL_PATH};
  if (hold) {
    argv.emplace_back("--hold");
  }
  argv.insert(argv.end(), calls.begin(), calls.end());
  auto env = daemon.client_env();
  for (const auto& [k, v] : options.env) {
    env[k] = v;
  }
  return start_as(uid, argv, env, options);
}

PodCgroup::PodCgroup(std::string pod_uid) {
  // A v1 hierarchy (pids, the named systemd one) or v2's unified one, wherever root may make a
  // directory and move a process into it.
  for (const fs::path root : {"/sys/fs/cgroup/pids", "/sys/fs/cgroup/systemd",
                              "/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    std::error_code ec;
    const fs::path top = root / ("kubepods-test-" + std::to_string(::getpid()));
    const fs::path dir = top / "kubepods" / "besteffort" / ("pod" + pod_uid) / "0123456789ab";
    if (!fs::exists(root / "cgroup.procs", ec) || !fs::create_directories(dir, ec)) {
      continue;
    }
    top_ = top;
    dir_ = dir;
    return;
  }
  skip_reason_ = "no cgroup hierarchy here lets root make a pod's cgroup";
}

PodCgroup::~PodCgroup() {
  if (top_.empty()) {
    return;
  }
  // Deepest first; a cgroup whose processes just ended may need a moment to empty.
  for (int attempt = 0; attempt < 50; ++attempt) {
    bool removed = true;
    for (fs::path d = dir_; d != top_.parent_path(); d = d.parent_path()) {
      if (fs::exists(d) && ::rmdir(d.c_str()) != 0) {
        removed = false;
        break;
      }
    }
    if (removed) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

ProcessResult run_as(unsigned uid, const std::vector<std::string>& argv,
                     const std::map<std::string, std::string>& env) {
  std::vector<std::string> full{ZEUS_AS_UID_PATH, std::to_string(uid)};
  full.insert(full.end(), argv.begin(), argv.end());
  Child child(full, env);
  return child.wait();
}

std::string set_limit(int gpu, int64_t mw) {
  return fmt::format("/gpu/set_power_limit?gpu_ids={}&block=true&power_limit_mw={}", gpu, mw);
}

nlohmann::json journal(const ZeusdProcess& daemon) {
  return nlohmann::json::parse(read_file(daemon.state_dir() / "leases.json"));
}

}  // namespace zeus::test
