#include "zeus/launch/elastic.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <sstream>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"
#include "zeus/common/secret_file.h"
#include "zeus/launch/c10d/c10d_rendezvous.h"
#include "zeus/launch/etcd/etcd_rendezvous.h"
#include "zeus/launch/rendezvous_auth.h"

namespace zeus::launch {

namespace {

// "HOST[:PORT]" ("[V6]:PORT" for IPv6) with etcd's client port as the default.
std::string etcd_endpoint(const std::string& text) {
  std::string host = text;
  std::string port = "2379";
  if (text.starts_with("[")) {
    const size_t close = text.find(']');
    if (close == std::string::npos) {
      throw ConfigError(fmt::format("--rdzv-endpoint '{}': an IPv6 address needs its ']'", text));
    }
    host = text.substr(0, close + 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') {
        throw ConfigError(fmt::format("--rdzv-endpoint '{}' is not HOST[:PORT]", text));
      }
      port = text.substr(close + 2);
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  const auto number = parse_number<int>(port);
  if (host.empty() || host.find('/') != std::string::npos || !number || *number < 1 ||
      *number > 65535) {
    throw ConfigError(fmt::format(
        "--rdzv-endpoint '{}' is not HOST[:PORT] with a port in 1..65535 (etcd's client port, "
        "2379 by default); list several etcd members with commas",
        text));
  }
  return fmt::format("{}:{}", host, *number);
}

}  // namespace

std::vector<std::string> parse_etcd_endpoints(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (!item.empty()) {
      out.push_back(etcd_endpoint(item));
    }
  }
  if (out.empty()) {
    throw ConfigError(
        "--rdzv-backend etcd needs --rdzv-endpoint HOST:PORT[,HOST:PORT...]: etcd's client "
        "endpoints, the same on every node");
  }
  return out;
}

void apply_rdzv_conf(const std::string& conf, RendezvousOptions& options, bool etcd) {
  std::optional<std::filesystem::path> token_file;
  std::optional<std::filesystem::path> password_file;
  std::stringstream items(conf);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) {
      continue;
    }
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "token_file") {
      if (value.empty()) {
        throw ConfigError("--rdzv-conf token_file= needs the path of the token file");
      }
      token_file = value;
      continue;
    }
    static constexpr const char* kEtcdText[] = {"protocol", "cacert", "cert",
                                                "key",      "user",   "password_file"};
    if (std::find(std::begin(kEtcdText), std::end(kEtcdText), key) != std::end(kEtcdText)) {
      if (!etcd) {
        throw ConfigError(fmt::format(
            "--rdzv-conf {} is an etcd key: it goes with --rdzv-backend etcd, not c10d", key));
      }
      if (value.empty() || (key == "protocol" && value != "http" && value != "https")) {
        throw ConfigError(fmt::format("--rdzv-conf {}='{}': expected {}", key, value,
                                      key == "protocol" ? "http or https"
                                      : key == "user"   ? "etcd's user name"
                                                        : "a file's path"));
      }
      EtcdOptions& e = options.etcd;
      if (key == "protocol") {
        e.protocol = value;
      } else if (key == "cacert") {
        e.cacert = value;
      } else if (key == "cert") {
        e.cert = value;
      } else if (key == "key") {
        e.key = value;
      } else if (key == "user") {
        e.user = value;
      } else {
        password_file = value;
      }
      continue;
    }
    std::chrono::milliseconds* target = nullptr;
    if (key == "join_timeout" || (etcd && key == "timeout")) {
      target = &options.join_timeout;
    } else if (key == "last_call_timeout") {
      target = &options.last_call;
    } else if (key == "read_timeout") {
      target = &options.keep_alive;
    } else {
      throw ConfigError(fmt::format(
          "--rdzv-conf key '{}' is not supported; the supported keys are join_timeout, "
          "last_call_timeout and read_timeout (seconds), token_file{}",
          key,
          etcd ? ", and etcd's protocol, cacert, cert, key, user, password_file and timeout" : ""));
    }
    const auto seconds = parse_number<double>(value);
    if (!seconds || !(*seconds > 0) || *seconds > 1e6) {
      throw ConfigError(fmt::format(
          "--rdzv-conf {}='{}': expected a number of seconds > 0, e.g. {}=30", key, value, key));
    }
    *target = std::chrono::milliseconds(static_cast<int64_t>(*seconds * 1000.0));
  }
  // A node must beat several times within the silence that drops it.
  options.heartbeat = std::min(options.heartbeat, options.keep_alive / 4);
  if (!token_file) {
    if (auto from_env = get_env(kEnvRdzvTokenFile)) {
      token_file = *from_env;
    }
  }
  if (token_file) {
    options.token = read_secret_file(*token_file, "rendezvous token file");
    hmac_hex(*options.token, "");  // a build without OpenSSL says so now, not at the join
  }
  if (password_file) {
    if (options.etcd.user.empty()) {
      throw ConfigError("--rdzv-conf password_file goes with user=NAME (etcd's user)");
    }
    options.etcd.password = read_secret_file(*password_file, "etcd password file");
  } else if (!options.etcd.user.empty()) {
    throw ConfigError(
        fmt::format("--rdzv-conf user={} needs password_file=PATH (mode 600) with etcd's password",
                    options.etcd.user));
  }
  if ((options.etcd.cert.empty()) != (options.etcd.key.empty())) {
    throw ConfigError(
        "--rdzv-conf cert and key go together: etcd's client certificate and its key");
  }
  if (options.etcd.protocol == "http" &&
      (!options.etcd.cacert.empty() || !options.etcd.cert.empty())) {
    throw ConfigError(
        "--rdzv-conf cacert/cert/key are etcd's TLS files: add protocol=https (etcd's client URLs "
        "must be https then)");
  }
}

void apply_round(LaunchPlan& plan, const RendezvousRound& round) {
  const int nproc = static_cast<int>(plan.workers.size());
  if (round.first_rank + nproc > round.world_size || round.node_rank >= round.nnodes) {
    throw InternalError(fmt::format(
        "round {}: node {} of {} with first rank {} cannot hold {} workers in a world of {}",
        round.round, round.node_rank, round.nnodes, round.first_rank, nproc, round.world_size));
  }
  plan.node_rank = round.node_rank;
  plan.nnodes = round.nnodes;
  plan.world_size = round.world_size;
  plan.master_addr = round.master_addr;
  plan.master_port = round.master_port;
  for (WorkerSpec& w : plan.workers) {
    w.rank = round.first_rank + w.local_rank;
    set_world_env(w, plan);
  }
}

bool is_this_host(const std::string& host) {
  if (host == "localhost" || host == host_name()) {
    return true;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) {
    return false;
  }
  // Numeric forms of what the name resolves to, and of this machine's interfaces.
  const auto numeric = [](const sockaddr* a) -> std::string {
    char text[INET6_ADDRSTRLEN] = {};
    if (a->sa_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, text, sizeof text);
    } else if (a->sa_family == AF_INET6) {
      ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, text,
                  sizeof text);
    }
    return text;
  };
  std::vector<std::string> targets;
  bool loopback = false;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    targets.push_back(numeric(a->ai_addr));
    loopback = loopback || targets.back().starts_with("127.") || targets.back() == "::1";
  }
  ::freeaddrinfo(found);
  if (loopback) {
    return true;
  }
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) {
    return false;
  }
  bool mine = false;
  for (ifaddrs* i = interfaces; i != nullptr && !mine; i = i->ifa_next) {
    if (i->ifa_addr != nullptr) {
      mine = std::find(targets.begin(), targets.end(), numeric(i->ifa_addr)) != targets.end();
    }
  }
  ::freeifaddrs(interfaces);
  return mine;
}

ElasticPlan resolve_elastic(const LaunchOptions& options, int min_nodes, int max_nodes) {
  ElasticPlan e;
  const bool etcd = is_etcd_backend(options.rdzv_backend);
  e.backend = etcd ? "etcd" : "c10d";
  e.node_host = options.local_addr.empty() ? host_name() : options.local_addr;
  e.rendezvous.run_id = options.run_id.empty() ? "none" : options.run_id;
  e.rendezvous.min_nodes = min_nodes;
  e.rendezvous.max_nodes = max_nodes;
  e.rendezvous.max_restarts = options.max_restarts;
  if (etcd) {
    e.rendezvous.etcd.endpoints = parse_etcd_endpoints(options.rdzv_endpoint);
  } else {
    e.endpoint_host = options.master_addr.value_or("127.0.0.1");
    e.endpoint_port = options.master_port.value_or(29400);
    if (e.endpoint_port < 1 || e.endpoint_port > 65535) {
      throw ConfigError(
          fmt::format("--rdzv-endpoint port must be in 1..65535, got {}", e.endpoint_port));
    }
    e.serve = is_this_host(e.endpoint_host);
  }
  apply_rdzv_conf(options.rdzv_conf, e.rendezvous, etcd);
  return e;
}

bool is_etcd_backend(const std::string& backend) {
  return backend == "etcd" || backend == "etcd-v2";
}

std::unique_ptr<Rendezvous> make_rendezvous(const ElasticPlan& plan, int nproc,
                                            std::function<void(const std::string&)> say) {
  const RendezvousNode node{plan.node_host, nproc};
  if (plan.backend == "etcd") {
    return std::make_unique<etcd::EtcdRendezvous>(
        etcd::EtcdRendezvousOptions{plan.rendezvous, node, std::move(say)});
  }
  return std::make_unique<c10d::C10dRendezvous>(c10d::C10dOptions{
      plan.endpoint_host, plan.endpoint_port, plan.serve, plan.rendezvous, node, std::move(say)});
}

}  // namespace zeus::launch
