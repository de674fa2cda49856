#include "zeus/cluster/env.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"

namespace zeus::cluster {
namespace {

std::string_view source_name(EnvSource source) {
  switch (source) {
    case EnvSource::kExplicit:
      return "explicit options";
    case EnvSource::kTorchrun:
      return "torchrun/zeus run variables";
    case EnvSource::kLegacyLocalRank:
      return "--local_rank argument";
    case EnvSource::kSlurm:
      return "Slurm";
    case EnvSource::kOpenMpi:
      return "Open MPI";
    case EnvSource::kSingle:
      return "no launcher (single process)";
  }
  return "?";
}

int parse_int(std::string_view text, std::string_view what) {
  const auto value = parse_number<int>(text);
  if (!value) {
    throw ConfigError(fmt::format("{}='{}' is not an integer", what, text));
  }
  return *value;
}

// Reads and parses an integer variable; nullopt when unset.
std::optional<int> env_int(const EnvLookup& lookup, std::string_view name) {
  if (auto value = lookup(name)) {
    return parse_int(*value, name);
  }
  return std::nullopt;
}

int require_int(const EnvLookup& lookup, std::string_view name, std::string_view why) {
  if (auto v = env_int(lookup, name)) {
    return *v;
  }
  throw ConfigError(
      fmt::format("{} is not set, but {}; set it, or launch with torchrun/zeus run", name, why));
}

void validate(const Env& env) {
  const auto bad = [&](std::string_view what) {
    return ConfigError(fmt::format("inconsistent distributed environment from {}: {} ({})",
                                   source_name(env.source), what, env.describe()));
  };
  if (env.world_size < 1) {
    throw bad(fmt::format("world size {} must be at least 1", env.world_size));
  }
  if (env.rank < 0 || env.rank >= env.world_size) {
    throw bad(fmt::format("rank {} is outside 0-{}", env.rank, env.world_size - 1));
  }
  if (env.local_world_size < 1 || env.local_world_size > env.world_size) {
    throw bad(
        fmt::format("local world size {} must be in 1-{}", env.local_world_size, env.world_size));
  }
  if (env.local_rank < 0 || env.local_rank >= env.local_world_size) {
    throw bad(
        fmt::format("local rank {} is outside 0-{}", env.local_rank, env.local_world_size - 1));
  }
  if (env.node_rank < 0) {
    throw bad(fmt::format("node rank {} is negative", env.node_rank));
  }
  if (env.world_size > 1 && env.master_addr.empty()) {
    throw bad("no master address for a job of several processes: set MASTER_ADDR");
  }
  if (env.world_size > 1 && (env.master_port < 1 || env.master_port > 65535)) {
    throw bad(fmt::format("master port {} is outside 1-65535 (MASTER_PORT)", env.master_port));
  }
}

std::optional<std::string> first_set(const EnvLookup& lookup, std::string_view a,
                                     std::string_view b) {
  auto value = lookup(a);
  return value ? value : lookup(b);
}

// MASTER_ADDR/MASTER_PORT, which every source but Slurm needs from the environment.
void read_master(Env& env, const EnvLookup& lookup) {
  env.master_addr = lookup("MASTER_ADDR").value_or("");
  env.master_port = env_int(lookup, "MASTER_PORT").value_or(kDefaultMasterPort);
}

}  // namespace

std::optional<std::string> process_env(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

std::string Env::describe() const {
  std::string out = fmt::format("rank {}/{} (local {}/{}, node {}) from {}", rank, world_size,
                                local_rank, local_world_size, node_rank, source_name(source));
  if (!master_addr.empty()) {
    out += fmt::format(", master {}:{}", master_addr, master_port);
  }
  return out;
}

Env detect_env(const EnvOptions& options, const EnvLookup& lookup) {
  Env env;
  if (options.rank && options.world_size) {
    env.source = EnvSource::kExplicit;
    env.rank = *options.rank;
    env.world_size = *options.world_size;
    env.local_world_size = options.local_world_size.value_or(env.world_size);
    env.local_rank = options.local_rank.value_or(env.rank % env.local_world_size);
    env.node_rank = options.node_rank.value_or(env.rank / env.local_world_size);
    read_master(env, lookup);
  } else if (lookup("RANK") && lookup("WORLD_SIZE") && lookup("LOCAL_RANK")) {
    env.source = EnvSource::kTorchrun;
    env.rank = *env_int(lookup, "RANK");
    env.world_size = *env_int(lookup, "WORLD_SIZE");
    env.local_rank = *env_int(lookup, "LOCAL_RANK");
    env.local_world_size = env_int(lookup, "LOCAL_WORLD_SIZE").value_or(env.world_size);
    env.node_rank = env_int(lookup, "GROUP_RANK").value_or(env.rank / env.local_world_size);
    read_master(env, lookup);
    // torchrun >= 2.0 serves the store from its agent on MASTER_PORT and says so here.
    const auto agent = lookup("TORCHELASTIC_USE_AGENT_STORE");
    env.agent_store = agent && (*agent == "True" || *agent == "true" || *agent == "1");
    env.restart_count = env_int(lookup, "TORCHELASTIC_RESTART_COUNT").value_or(0);
  } else if (options.legacy_local_rank) {
    env.source = EnvSource::kLegacyLocalRank;
    env.local_rank = *options.legacy_local_rank;
    env.rank = require_int(lookup, "RANK", "the process was given --local_rank");
    env.world_size = require_int(lookup, "WORLD_SIZE", "the process was given --local_rank");
    env.local_world_size = env_int(lookup, "LOCAL_WORLD_SIZE").value_or(env.world_size);
    env.node_rank = env_int(lookup, "GROUP_RANK").value_or(env.rank / env.local_world_size);
    read_master(env, lookup);
  } else if (lookup("SLURM_PROCID") && lookup("SLURM_NTASKS")) {
    env.source = EnvSource::kSlurm;
    env.rank = *env_int(lookup, "SLURM_PROCID");
    env.world_size = *env_int(lookup, "SLURM_NTASKS");
    env.local_rank = require_int(lookup, "SLURM_LOCALID", "SLURM_PROCID is");
    env.node_rank = require_int(lookup, "SLURM_NODEID", "SLURM_PROCID is");
    const auto per_node = first_set(lookup, "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE");
    env.local_world_size = env.world_size;
    if (per_node) {
      const auto counts = expand_slurm_tasks_per_node(*per_node);
      env.local_world_size =
          counts.size() == 1
              ? counts[0]
              : counts.at(std::min<size_t>(static_cast<size_t>(env.node_rank), counts.size() - 1));
    }
    if (auto addr = lookup("MASTER_ADDR")) {
      env.master_addr = *addr;
    } else if (auto nodes = first_set(lookup, "SLURM_JOB_NODELIST", "SLURM_NODELIST")) {
      env.master_addr = expand_slurm_nodelist(*nodes).front();
    }
    env.master_port = env_int(lookup, "MASTER_PORT")
                          .value_or(slurm_default_port(lookup("SLURM_JOB_ID").value_or("0")));
  } else if (lookup("OMPI_COMM_WORLD_RANK") && lookup("OMPI_COMM_WORLD_SIZE")) {
    env.source = EnvSource::kOpenMpi;
    env.rank = *env_int(lookup, "OMPI_COMM_WORLD_RANK");
    env.world_size = *env_int(lookup, "OMPI_COMM_WORLD_SIZE");
    env.local_rank = env_int(lookup, "OMPI_COMM_WORLD_LOCAL_RANK").value_or(env.rank);
    env.local_world_size = env_int(lookup, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(env.world_size);
    env.node_rank =
        env_int(lookup, "OMPI_COMM_WORLD_NODE_RANK").value_or(env.rank / env.local_world_size);
    read_master(env, lookup);
  } else {
    env.source = EnvSource::kSingle;
  }
  // Explicit fields override whatever the environment said.
  if (env.source != EnvSource::kExplicit) {
    if (options.local_rank) {
      env.local_rank = *options.local_rank;
    }
    if (options.node_rank) {
      env.node_rank = *options.node_rank;
    }
  }
  if (options.master_addr) {
    env.master_addr = *options.master_addr;
  }
  if (options.master_port) {
    env.master_port = *options.master_port;
  }
  validate(env);
  return env;
}

std::optional<int> take_local_rank_arg(std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    for (const std::string_view flag : {"--local_rank", "--local-rank"}) {
      const std::string& arg = args[i];
      if (arg == flag) {
        if (i + 1 >= args.size()) {
          throw ConfigError(fmt::format("{} needs a value", flag));
        }
        const int value = parse_int(args[i + 1], flag);
        args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
                   args.begin() + static_cast<std::ptrdiff_t>(i + 2));
        return value;
      }
      if (arg.size() > flag.size() && arg.compare(0, flag.size(), flag) == 0 &&
          arg[flag.size()] == '=') {
        const int value = parse_int(std::string_view(arg).substr(flag.size() + 1), flag);
        args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
        return value;
      }
    }
  }
  return std::nullopt;
}

namespace {

// Splits at commas that are not inside brackets.
std::vector<std::string_view> split_top_level(std::string_view list) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == '[') {
      ++depth;
    } else if (list[i] == ']') {
      --depth;
    } else if (list[i] == ',' && depth == 0) {
      out.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(list.substr(start));
  return out;
}

void expand_host(std::string_view host, std::string_view whole, std::vector<std::string>& out) {
  const size_t open = host.find('[');
  if (open == std::string_view::npos) {
    if (host.find(']') != std::string_view::npos || host.empty()) {
      throw ConfigError(fmt::format("Slurm node list '{}': bad host '{}'", whole, host));
    }
    out.emplace_back(host);
    return;
  }
  const size_t close = host.find(']', open);
  if (close == std::string_view::npos) {
    throw ConfigError(fmt::format("Slurm node list '{}': '[' without ']'", whole));
  }
  const std::string_view prefix = host.substr(0, open);
  const std::string_view ranges = host.substr(open + 1, close - open - 1);
  const std::string_view suffix = host.substr(close + 1);
  size_t start = 0;
  while (start <= ranges.size()) {
    const size_t comma = std::min(ranges.find(',', start), ranges.size());
    const std::string_view range = ranges.substr(start, comma - start);
    const size_t dash = range.find('-');
    const std::string_view lo_text = range.substr(0, dash);
    const std::string_view hi_text =
        dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
    const int lo = parse_int(lo_text, "Slurm node list range");
    const int hi = parse_int(hi_text, "Slurm node list range");
    if (lo < 0 || hi < lo || hi - lo > 100'000) {
      throw ConfigError(fmt::format("Slurm node list '{}': bad range '{}'", whole, range));
    }
    for (int n = lo; n <= hi; ++n) {
      // Zero padding follows the width of the lower bound ("01-04").
      expand_host(fmt::format("{}{:0{}}{}", prefix, n, lo_text.size(), suffix), whole, out);
    }
    start = comma + 1;
  }
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(std::string_view list) {
  std::vector<std::string> out;
  for (const std::string_view host : split_top_level(list)) {
    expand_host(host, list, out);
  }
  return out;
}

std::vector<int> expand_slurm_tasks_per_node(std::string_view list) {
  std::vector<int> out;
  for (const std::string_view item : split_top_level(list)) {
    const size_t paren = item.find("(x");
    if (paren == std::string_view::npos) {
      out.push_back(parse_int(item, "SLURM_NTASKS_PER_NODE"));
      continue;
    }
    if (item.back() != ')') {
      throw ConfigError(fmt::format("SLURM_NTASKS_PER_NODE='{}': '{}' lacks ')'", list, item));
    }
    const int count = parse_int(item.substr(0, paren), "SLURM_NTASKS_PER_NODE");
    const int repeat =
        parse_int(item.substr(paren + 2, item.size() - paren - 3), "SLURM_NTASKS_PER_NODE");
    if (repeat < 1 || repeat > 100'000) {
      throw ConfigError(fmt::format("SLURM_NTASKS_PER_NODE='{}': bad repeat in '{}'", list, item));
    }
    out.insert(out.end(), static_cast<size_t>(repeat), count);
  }
  return out;
}

int slurm_default_port(std::string_view job_id) {
  // A non-numeric id (none seen in practice) maps to 15000, as before.
  const uint64_t id = parse_number<uint64_t>(job_id).value_or(0);
  return 15000 + static_cast<int>(id % 20000);
}

}  // namespace zeus::cluster
