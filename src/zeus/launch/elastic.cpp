#include "zeus/launch/elastic.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"

namespace zeus::launch {

void apply_rdzv_conf(const std::string& conf, RendezvousOptions& options) {
  std::stringstream items(conf);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) {
      continue;
    }
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    std::chrono::milliseconds* target = nullptr;
    if (key == "join_timeout") {
      target = &options.join_timeout;
    } else if (key == "last_call_timeout") {
      target = &options.last_call;
    } else if (key == "read_timeout") {
      target = &options.keep_alive;
    } else {
      throw ConfigError(
          fmt::format("--rdzv-conf key '{}' is not supported; the supported keys are join_timeout, "
                      "last_call_timeout and read_timeout (seconds)",
                      key));
    }
    const auto seconds = parse_number<double>(value);
    if (!seconds || !(*seconds > 0)) {
      throw ConfigError(fmt::format(
          "--rdzv-conf {}='{}': expected a number of seconds > 0, e.g. {}=30", key, value, key));
    }
    *target = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(*seconds));
  }
  // A node must beat several times within the silence that drops it.
  options.heartbeat = std::min(options.heartbeat, options.keep_alive / 4);
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
  e.endpoint_host = options.master_addr.value_or("127.0.0.1");
  e.endpoint_port = options.master_port.value_or(29400);
  if (e.endpoint_port < 1 || e.endpoint_port > 65535) {
    throw ConfigError(
        fmt::format("--rdzv-endpoint port must be in 1..65535, got {}", e.endpoint_port));
  }
  e.serve = is_this_host(e.endpoint_host);
  e.node_host = options.local_addr.empty() ? host_name() : options.local_addr;
  e.rendezvous.run_id = options.run_id.empty() ? "none" : options.run_id;
  e.rendezvous.min_nodes = min_nodes;
  e.rendezvous.max_nodes = max_nodes;
  e.rendezvous.max_restarts = options.max_restarts;
  apply_rdzv_conf(options.rdzv_conf, e.rendezvous);
  return e;
}

}  // namespace zeus::launch
