#include "support/etcd_cluster.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

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
  if (o.tls) {
    scheme_ = "https";
    if (!make_certificates()) {
      return false;
    }
  }
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
                                  fmt::format("{}://127.0.0.1:{}", scheme_, m->client_port),
                                  "--advertise-client-urls",
                                  fmt::format("{}://127.0.0.1:{}", scheme_, m->client_port),
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
    if (o.tls) {
      argv.insert(argv.end(), {"--cert-file", (dir_ / "server.pem").string(), "--key-file",
                               (dir_ / "server.key").string(), "--trusted-ca-file",
                               (dir_ / "ca.pem").string(), "--client-cert-auth"});
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
  return !o.auth || enable_auth();
}

// A CA, a server certificate for 127.0.0.1 and a client certificate, with the openssl program.
bool EtcdCluster::make_certificates() {
  const std::string d = dir_.string();
  const std::string script = fmt::format(
      R"(set -e; cd '{}'
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' > ext.cnf
key() {{ openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1.key"; }}
key ca; openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj /CN=zeus-test-ca
for name in server client; do
  key $name; openssl req -new -key $name.key -out $name.csr -subj /CN=$name
  openssl x509 -req -in $name.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile ext.cnf -out $name.pem
done)",
      d);
  const ProcessResult r = run_process({"/bin/sh", "-c", script}, 60s);
  if (r.exit_code != 0) {
    why_not_ = "cannot make the test certificates (openssl): " + r.err.substr(0, 500);
    return false;
  }
  tls_ = {d + "/ca.pem", d + "/client.pem", d + "/client.key"};
  return true;
}

// Users root (etcd requires it before auth is on) and zeus, whose role may read and write the
// rendezvous's keys (/zeus/...) and nothing else; then authentication on.
bool EtcdCluster::enable_auth() {
  const std::string zeus = "L3pldXMv";      // base64 of "/zeus/"
  const std::string zeus_end = "L3pldXMw";  // "/zeus0"
  const std::vector<std::pair<std::string, std::string>> calls{
      {"auth/user/add", R"({"name":"root","password":"root-pw"})"},
      {"auth/role/add", R"({"name":"root"})"},
      {"auth/user/grant", R"({"user":"root","role":"root"})"},
      {"auth/role/add", R"({"name":"zeus-rdzv"})"},
      {"auth/role/grant",
       fmt::format(R"({{"name":"zeus-rdzv","perm":{{"permType":"READWRITE","key":"{}",)"
                   R"("range_end":"{}"}}}})",
                   zeus, zeus_end)},
      {"auth/user/add", fmt::format(R"({{"name":"{}","password":"{}"}})", kUser, kPassword)},
      {"auth/user/grant", fmt::format(R"({{"user":"{}","role":"zeus-rdzv"}})", kUser)},
      {"auth/enable", "{}"},
  };
  for (const auto& [path, body] : calls) {
    const HttpReply r = http_call("POST", url(0) + "/v3/" + path, body, {}, tls_);
    if (r.status != 200) {
      why_not_ = fmt::format("cannot turn etcd's authentication on ({}): HTTP {} {}", path,
                             r.status, r.body);
      return false;
    }
  }
  return true;
}

std::string EtcdCluster::url(int member) const {
  return fmt::format("{}://{}", scheme_, endpoint(member));
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
  const HttpReply r = http_call("GET", url(member) + "/health", "", {}, tls_);
  return r.status == 200 && r.body.find("\"true\"") != std::string::npos;
}

std::string EtcdCluster::log(int member) const {
  std::ifstream in(members_.at(static_cast<size_t>(member))->log_path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace zeus::test
