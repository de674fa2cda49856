// Who am I in a distributed job: rank, local rank, world size, node and master address, detected
// from whatever launched the process (torchrun / `zeus run`, the legacy launcher's --local_rank,
// Slurm, Open MPI, or nothing). zeus_core, no libtorch: the launcher and the distributed runtime
// (zeus_torch dist/) share this one detection.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/common/env.h"

namespace zeus::cluster {

enum class EnvSource { kExplicit, kTorchrun, kLegacyLocalRank, kSlurm, kOpenMpi, kSingle };

// PyTorch's default MASTER_PORT, used when neither a flag nor the environment gives one.
inline constexpr int kDefaultMasterPort = 29500;

struct Env {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr;    // empty for a single process
  std::string master_source;  // where master_addr came from, for messages
  int master_port = 0;
  // The launcher (torchrun >= 2.0) already serves its own store on master_port
  // (TORCHELASTIC_USE_AGENT_STORE); zeus::distributed then rendezvouses on master_port + 1.
  bool agent_store = false;
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT
  EnvSource source = EnvSource::kSingle;

  bool is_master() const { return rank == 0; }
  bool is_local_master() const { return local_rank == 0; }
  // e.g. "rank 3/8 (local 1/4, node 1) from Slurm, master gpu01:29500".
  std::string describe() const;
};

// What a program states itself (highest precedence); unset fields come from the environment.
struct EnvOptions {
  std::optional<int> rank;
  std::optional<int> local_rank;
  std::optional<int> world_size;
  std::optional<int> local_world_size;
  std::optional<int> node_rank;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
  // The legacy launcher's --local_rank value (see take_local_rank_arg).
  std::optional<int> legacy_local_rank;
};

// Reads one environment variable (common/env.h); the default reads the process environment.
using zeus::EnvLookup;
std::optional<std::string> process_env(std::string_view name);

// Detects in order: explicit options, torchrun variables, --local_rank, Slurm, Open MPI, single
// process. Throws ConfigError naming the variable and its value for non-numeric or inconsistent
// values (rank >= world size, no master address for world size > 1, ...).
Env detect_env(const EnvOptions& options = {}, const EnvLookup& lookup = process_env);

// std::nullopt when `host` resolves (getaddrinfo), else the resolver's reason.
std::optional<std::string> resolve_error(const std::string& host);

// Finds and removes `--local_rank=N`, `--local_rank N`, `--local-rank=N` or `--local-rank N`
// from args (what torch.distributed.launch passes). Throws ConfigError for a bad value.
std::optional<int> take_local_rank_arg(std::vector<std::string>& args);

}  // namespace zeus::cluster
