// The environment a launcher gives its workers, as one type: torchrun's variables (so that
// PyTorch scripts run unchanged under `zeus run`) and zeus-cpp's own. Written with to_env() by
// `zeus run`, zeus::distributed::spawn and (through the binding) zeus_cpp; read with
// worker_env_from() by cluster::detect_env. The settings a launcher of recurring jobs passes a
// job (`zeus tune`) are JobEnv. Every variable either writes is declared in common/env.h.
//
// The journal handshake: a launcher sets journal_dir (ZEUS_JOURNAL_DIR) and settles exactly that
// directory after its workers; a job under it writes its power-limit journals there, whatever
// log dir the program chose in code (JobOptions::log_dir).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "zeus/common/env.h"

namespace zeus::contract {

using zeus::EnvLookup;

struct WorkerEnv {
  // torchrun's
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int group_rank = 0;  // the node
  int group_world_size = 1;
  std::string role_name = "default";  // ROLE_RANK and ROLE_WORLD_SIZE follow rank and world
  std::string master_addr;
  int master_port = 0;
  std::string run_id;
  int max_restarts = 0;
  int restart_count = 0;  // also ZEUS_RESTART_COUNT
  bool use_agent_store = false;
  // zeus-cpp's
  std::optional<std::filesystem::path> log_dir;      // ZEUS_LOG_DIR, when the launcher sets one
  std::optional<std::filesystem::path> journal_dir;  // ZEUS_JOURNAL_DIR

  std::map<std::string, std::string> to_env() const;
};

// The worker's environment when RANK, WORLD_SIZE and LOCAL_RANK are all set (torchrun, zeus run,
// zeus::distributed::spawn); std::nullopt otherwise. The other variables default as torchrun's
// readers do (LOCAL_WORLD_SIZE: the world; GROUP_RANK: rank / LOCAL_WORLD_SIZE). Throws ConfigError
// naming a variable that is not a number.
[[nodiscard]] std::optional<WorkerEnv> worker_env_from(const EnvLookup& lookup);

// Job settings a launcher of recurring jobs passes (each only when set).
struct JobEnv {
  std::optional<std::filesystem::path> log_dir;  // ZEUS_LOG_DIR
  std::optional<std::string> job_id;             // ZEUS_JOB_ID
  std::optional<double> eta;                     // ZEUS_ETA_KNOB
  std::optional<double> cost_threshold;          // ZEUS_COST_THRESH (infinity: "inf")
  std::optional<int> max_epochs;                 // ZEUS_MAX_EPOCHS
  std::optional<double> target_metric;           // ZEUS_TARGET_METRIC

  std::map<std::string, std::string> to_env() const;
};

}  // namespace zeus::contract
