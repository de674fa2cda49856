#include "zeusd_support.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

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

ZeusdProcess::ZeusdProcess(const SharedDir& dir, std::vector<std::string> extra_flags)
    : socket_(dir / "zeusd.sock"), state_dir_(dir / "state"), flags_(std::move(extra_flags)) {
  start();
}

ZeusdProcess::~ZeusdProcess() {
  if (child_) {
    child_->kill(SIGTERM);
    child_->wait();
  }
}

void ZeusdProcess::start() {
  std::vector<std::string> argv{ZEUSD_PATH,       "serve",       "--socket-path",
                                socket_.string(), "--state-dir", state_dir_.string()};
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
  child_->kill(SIGKILL);
  child_->wait();
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

device::zeusd::ZeusdReply ZeusdProcess::call(const std::string& method,
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

std::unique_ptr<Child> client_as(unsigned uid, const ZeusdProcess& daemon,
                                 const std::vector<std::string>& calls, bool hold) {
  std::vector<std::string> argv{ZEUS_AS_UID_PATH, std::to_string(uid), ZEUS_ZEUSD_CALL_PATH};
  if (hold) {
    argv.emplace_back("--hold");
  }
  argv.insert(argv.end(), calls.begin(), calls.end());
  auto child = std::make_unique<Child>(argv, daemon.client_env());
  if (!child->wait_for_output("ready", std::chrono::seconds(20))) {
    throw std::runtime_error("the client as uid " + std::to_string(uid) + " did not get ready");
  }
  return child;
}

ProcessResult run_as(unsigned uid, const std::vector<std::string>& argv,
                     const std::map<std::string, std::string>& env) {
  std::vector<std::string> full{ZEUS_AS_UID_PATH, std::to_string(uid)};
  full.insert(full.end(), argv.begin(), argv.end());
  Child child(full, env);
  return child.wait();
}

}  // namespace zeus::test
