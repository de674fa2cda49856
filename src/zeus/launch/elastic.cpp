#include "zeus/launch/elastic.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"

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
    *target = std::chrono::milliseconds(static_cast<int64_t>(*seconds * 1000));
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
    auto& env = w.env;
    env["RANK"] = std::to_string(w.rank);
    env["WORLD_SIZE"] = std::to_string(round.world_size);
    env["GROUP_RANK"] = std::to_string(round.node_rank);
    env["GROUP_WORLD_SIZE"] = std::to_string(round.nnodes);
    env["ROLE_RANK"] = std::to_string(w.rank);
    env["ROLE_WORLD_SIZE"] = std::to_string(round.world_size);
    env["MASTER_ADDR"] = round.master_addr;
    env["MASTER_PORT"] = std::to_string(round.master_port);
  }
}

}  // namespace zeus::launch
