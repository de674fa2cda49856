#include "support/etcd_cluster.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "support/http_client.h"

namespace zeus::test {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::string find_etcd() {
  for (const char* candidate : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (::access(candidate, X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

// Member data on tmpfs where there is one: etcd fsyncs every write.
fs::path scratch_dir() {
  const fs::path shm = "/dev/shm";
  const fs::path base = ::access(shm.c_str(), W_OK) == 0 ? shm : fs::temp_directory_path();
  return base / fmt::format("zeus-etcd-{}-{}", ::getpid(), std::rand());
}

}  // namespace

EtcdCluster::EtcdCluster(EtcdClusterOptions options) {
  up_ = start(options);
  if (!up_) {
    kill_all();
  }
}

EtcdCluster::~EtcdCluster() {
  kill_all();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

bool EtcdCluster::start(const EtcdClusterOptions& o) {
  const std::string etcd = find_etcd();
  if (etcd.empty()) {
    why_not_ = "etcd is not installed (Debian's etcd-server: scripts/install-deps.sh)";
    return false;
  }
  dir_ = scratch_dir();
  fs::create_directories(dir_);
  std::string initial;
  for (int i = 0; i < o.members; ++i) {
    auto m = std::make_unique<Member>();
    m->name = fmt::format("m{}", i);
    m->client_port = free_port();
    m->peer_port = free_port();
    m->data_dir = dir_ / m->name;
    m->log_path = dir_ / (m->name + ".log");
    initial +=
        fmt::format("{}{}=http://127.0.0.1:{}", initial.empty() ? "" : ",", m->name, m->peer_port);
    members_.push_back(std::move(m));
  }
  for (auto& m : members_) {
    std::vector<std::string> argv{etcd,
                                  "--name",
                                  m->name,
                                  "--data-dir",
                                  m->data_dir.string(),
                                  "--listen-client-urls",
                                  fmt::format("http://127.0.0.1:{}", m->client_port),
                                  "--advertise-client-urls",
                                  fmt::format("http://127.0.0.1:{}", m->client_port),
                                  "--listen-peer-urls",
                                  fmt::format("http://127.0.0.1:{}", m->peer_port),
                                  "--initial-advertise-peer-urls",
                                  fmt::format("http://127.0.0.1:{}", m->peer_port),
                                  "--initial-cluster",
                                  initial,
                                  "--initial-cluster-state",
                                  "new",
                                  "--initial-cluster-token",
                                  dir_.filename().string(),
                                  "--heartbeat-interval",
                                  std::to_string(o.heartbeat_ms),
                                  "--election-timeout",
                                  std::to_string(o.election_ms),
                                  "--log-level",
                                  "warn"};
    if (o.enable_v2) {
      argv.push_back("--enable-v2=true");
    }
    UniqueFd log(::open(m->log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    m->child = process::Child::start({.argv = argv,
                                      .stdin_fd = process::ChildFd::dev_null(),
                                      .stdout_fd = process::ChildFd::from(log.get()),
                                      .stderr_fd = process::ChildFd::from(log.get()),
                                      .what = "etcd member " + m->name});
  }
  const auto deadline = std::chrono::steady_clock::now() + o.start_timeout;
  for (int i = 0; i < size(); ++i) {
    while (!healthy(i)) {
      if (std::chrono::steady_clock::now() > deadline || !members_[i]->child.running()) {
        why_not_ = fmt::format("etcd member {} did not come up within {} s: {}", i,
                               o.start_timeout.count(), log(i).substr(0, 2000));
        return false;
      }
      std::this_thread::sleep_for(50ms);
    }
  }
  return true;
}

std::string EtcdCluster::endpoint(int member) const {
  return fmt::format("127.0.0.1:{}", members_.at(static_cast<size_t>(member))->client_port);
}

std::string EtcdCluster::endpoints() const {
  std::string out;
  for (int i = 0; i < size(); ++i) {
    out += (i == 0 ? "" : ",") + endpoint(i);
  }
  return out;
}

void EtcdCluster::kill(int member) {
  Member& m = *members_.at(static_cast<size_t>(member));
  m.child.signal(SIGKILL);
  m.child.wait();
}

void EtcdCluster::kill_all() {
  for (int i = 0; i < size(); ++i) {
    if (members_[static_cast<size_t>(i)]->child.running()) {
      kill(i);
    }
  }
}

bool EtcdCluster::healthy(int member) const {
  const HttpReply r = http_call("GET", fmt::format("http://{}/health", endpoint(member)));
  return r.status == 200 && r.body.find("\"true\"") != std::string::npos;
}

std::string EtcdCluster::log(int member) const {
  std::ifstream in(members_.at(static_cast<size_t>(member))->log_path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace zeus::test
