#include "zeus/common/env.h"

#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>

#include <charconv>
#include <cstdlib>

#include "zeus/cluster/env.h"
#include "zeus/cluster/slurm.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/contract/worker_env.h"

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

// Reads and parses an integer variable; nullopt when unset.
int require_int(const EnvLookup& lookup, std::string_view name, std::string_view why) {
  if (auto v = lookup_int(lookup, name)) {
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

// MASTER_ADDR/MASTER_PORT, which every source but Slurm needs from the environment.
void read_master(Env& env, const EnvLookup& lookup) {
  env.master_addr = lookup("MASTER_ADDR").value_or("");
  env.master_source = "MASTER_ADDR";
  env.master_port = lookup_int(lookup, "MASTER_PORT").value_or(kDefaultMasterPort);
}

// A task of a Slurm step: the step's own sizes and nodes (not the job's). False for the batch
// script's own shell when the job has a single task (then it is one process); a ConfigError
// saying what to do when the job has several (started without srun, it would wait forever for
// peers that were never started).
bool read_slurm_task(Env& env, const EnvLookup& lookup) {
  const std::optional<SlurmStep> step = read_slurm(lookup);
  if (!step) {
    return false;  // SLURM_PROCID without SLURM_JOB_ID: not Slurm's doing
  }
  if (!step->in_step()) {
    if (step->ntasks <= 1) {
      return false;
    }
    throw ConfigError(fmt::format(
        "this process runs in Slurm job {}'s batch script (SLURM_NTASKS={}, no SLURM_STEP_ID), "
        "not as one of the job's {} tasks: start it with `srun PROGRAM ...` (one task per GPU), "
        "or `srun --ntasks-per-node 1 zeus run --slurm --nproc-per-node N PROGRAM ...`",
        step->job_id, step->ntasks, step->ntasks));
  }
  env.rank = *step->procid;
  env.world_size = step->ntasks;
  env.local_rank = require_int(lookup, "SLURM_LOCALID", "SLURM_PROCID is");
  env.node_rank = require_int(lookup, "SLURM_NODEID", "SLURM_PROCID is");
  env.local_world_size = step->tasks_on_node(env.node_rank);
  if (auto addr = lookup("MASTER_ADDR")) {
    env.master_addr = *addr;
    env.master_source = "MASTER_ADDR";
  } else if (!step->nodes.empty()) {
    env.master_addr = step->nodes.front();
    env.master_source = "the first node of " + step->nodes_var;
  }
  env.master_port = lookup_int(lookup, "MASTER_PORT")
                        .value_or(slurm_default_port(step->job_id, step->step_id.value_or("")));
  return true;
}

}  // namespace

std::optional<std::string> process_env(std::string_view name) {
  return get_launcher_env(name);
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
  } else if (const auto worker = contract::worker_env_from(lookup)) {
    env.source = EnvSource::kTorchrun;
    env.rank = worker->rank;
    env.world_size = worker->world_size;
    env.local_rank = worker->local_rank;
    env.local_world_size = worker->local_world_size;
    env.node_rank = worker->group_rank;
    env.master_addr = worker->master_addr;
    env.master_source = "MASTER_ADDR";
    env.master_port = worker->master_port;
    env.agent_store = worker->use_agent_store;
    env.restart_count = worker->restart_count;
  } else if (options.legacy_local_rank) {
    env.source = EnvSource::kLegacyLocalRank;
    env.local_rank = *options.legacy_local_rank;
    env.rank = require_int(lookup, "RANK", "the process was given --local_rank");
    env.world_size = require_int(lookup, "WORLD_SIZE", "the process was given --local_rank");
    env.local_world_size = lookup_int(lookup, "LOCAL_WORLD_SIZE").value_or(env.world_size);
    env.node_rank = lookup_int(lookup, "GROUP_RANK").value_or(env.rank / env.local_world_size);
    read_master(env, lookup);
  } else if (lookup("SLURM_PROCID") && lookup("SLURM_NTASKS") && read_slurm_task(env, lookup)) {
    env.source = EnvSource::kSlurm;
  } else if (lookup("OMPI_COMM_WORLD_RANK") && lookup("OMPI_COMM_WORLD_SIZE")) {
    env.source = EnvSource::kOpenMpi;
    env.rank = *lookup_int(lookup, "OMPI_COMM_WORLD_RANK");
    env.world_size = *lookup_int(lookup, "OMPI_COMM_WORLD_SIZE");
    env.local_rank = lookup_int(lookup, "OMPI_COMM_WORLD_LOCAL_RANK").value_or(env.rank);
    env.local_world_size =
        lookup_int(lookup, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(env.world_size);
    env.node_rank =
        lookup_int(lookup, "OMPI_COMM_WORLD_NODE_RANK").value_or(env.rank / env.local_world_size);
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
    env.master_source = "the program's options";
  }
  if (options.master_port) {
    env.master_port = *options.master_port;
  }
  validate(env);
  return env;
}

std::optional<std::string> resolve_error(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    return std::string(::gai_strerror(rc));
  }
  ::freeaddrinfo(found);
  return std::nullopt;
}

std::optional<int> take_local_rank_arg(std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    for (const std::string_view flag : {"--local_rank", "--local-rank"}) {
      const std::string& arg = args[i];
      if (arg == flag) {
        if (i + 1 >= args.size()) {
          throw ConfigError(fmt::format("{} needs a value", flag));
        }
        const int value = parse_int_or_throw(args[i + 1], flag);
        args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
                   args.begin() + static_cast<std::ptrdiff_t>(i + 2));
        return value;
      }
      if (arg.size() > flag.size() && arg.compare(0, flag.size(), flag) == 0 &&
          arg[flag.size()] == '=') {
        const int value = parse_int_or_throw(std::string_view(arg).substr(flag.size() + 1), flag);
        args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
        return value;
      }
    }
  }
  return std::nullopt;
}

}  // namespace zeus::cluster
