// A real etcd cluster for the tests (Debian's etcd-server 3.4): N members on free loopback ports,
// started by the fixture and torn down with it; members can be killed one by one. Where etcd is
// not installed or does not come up, up() is false and why_not() says why (the test skips).
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/test_support.h"
#include "zeus/process/child.h"

namespace zeus::test {

struct EtcdClusterOptions {
  int members = 1;
  // Quicker elections than etcd's defaults (100 ms / 1000 ms), so that losing the leader costs
  // the tests about a second.
  int heartbeat_ms = 50;
  int election_ms = 500;
  bool enable_v2 = false;  // etcd's v2 API as well (torchrun's etcd backend speaks it)
  // Clients over https with a certificate of the fixture's CA (etcd's --client-cert-auth).
  bool tls = false;
  // etcd's authentication on: users root and zeus (read-write on /zeus/ only).
  bool auth = false;
  std::chrono::seconds start_timeout{30};
};

class EtcdCluster {
 public:
  explicit EtcdCluster(EtcdClusterOptions options = {});
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  bool up() const { return up_; }
  const std::string& why_not() const { return why_not_; }
  // "127.0.0.1:P1,127.0.0.1:P2,..." (--rdzv-endpoint), and one member's.
  std::string endpoints() const;
  std::string endpoint(int member) const;
  int size() const { return static_cast<int>(members_.size()); }
  // SIGKILL, as a machine that dies.
  void kill(int member);
  void kill_all();
  // Whether the member answers /health with a leader.
  bool healthy(int member) const;
  // The member's log (etcd writes to stderr), for a failure message.
  std::string log(int member) const;
  // With tls: the CA, and a client certificate and key (PEM files).
  const HttpTls& client_tls() const { return tls_; }
  // With auth: a user that may read and write /zeus/ only, and its password.
  static constexpr const char* kUser = "zeus";
  static constexpr const char* kPassword = "zeus-pw";

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::filesystem::path data_dir;
    std::filesystem::path log_path;
    process::Child child;
  };
  bool start(const EtcdClusterOptions& o);
  bool make_certificates();
  bool enable_auth();
  std::string url(int member) const;

  std::filesystem::path dir_;
  std::vector<std::unique_ptr<Member>> members_;
  bool up_ = false;
  std::string why_not_;
  std::string scheme_ = "http";
  HttpTls tls_;
};

}  // namespace zeus::test

// In a TEST: skips it, saying why, where the cluster did not come up.
#define ZEUS_SKIP_WITHOUT_ETCD(cluster)                                    \
  do {                                                                     \
    if (!(cluster).up()) {                                                 \
      ZEUS_SKIP_WITHOUT_SERVER("no etcd cluster: " + (cluster).why_not()); \
    }                                                                      \
  } while (0)
