#include "zeus/contract/worker_env.h"

#include <fmt/format.h>

#include <cmath>

#include "zeus/common/env.h"
#include "zeus/common/parse.h"

namespace zeus::contract {
namespace {

std::string key(const EnvVar& var) {
  return std::string(var.name);
}

std::optional<int> read_int(const EnvLookup& lookup, const EnvVar& var) {
  return lookup_int(lookup, var.name);
}

}  // namespace

std::map<std::string, std::string> WorkerEnv::to_env() const {
  std::map<std::string, std::string> env{
      {key(kEnvRank), std::to_string(rank)},
      {key(kEnvLocalRank), std::to_string(local_rank)},
      {key(kEnvWorldSize), std::to_string(world_size)},
      {key(kEnvLocalWorldSize), std::to_string(local_world_size)},
      {key(kEnvGroupRank), std::to_string(group_rank)},
      {key(kEnvGroupWorldSize), std::to_string(group_world_size)},
      {key(kEnvRoleName), role_name},
      {key(kEnvRoleRank), std::to_string(rank)},
      {key(kEnvRoleWorldSize), std::to_string(world_size)},
      {key(kEnvMasterAddr), master_addr},
      {key(kEnvMasterPort), std::to_string(master_port)},
      {key(kEnvTorchelasticRunId), run_id},
      {key(kEnvTorchelasticMaxRestarts), std::to_string(max_restarts)},
      {key(kEnvTorchelasticRestartCount), std::to_string(restart_count)},
      {key(kEnvRestartCount), std::to_string(restart_count)},
      {key(kEnvTorchelasticUseAgentStore), use_agent_store ? "True" : "False"}};
  if (log_dir) {
    env[key(kEnvLogDir)] = log_dir->string();
  }
  if (journal_dir) {
    env[key(kEnvJournalDir)] = journal_dir->string();
  }
  return env;
}

std::optional<WorkerEnv> worker_env_from(const EnvLookup& lookup) {
  if (!lookup(kEnvRank.name) || !lookup(kEnvWorldSize.name) || !lookup(kEnvLocalRank.name)) {
    return std::nullopt;
  }
  WorkerEnv w;
  w.rank = *read_int(lookup, kEnvRank);
  w.world_size = *read_int(lookup, kEnvWorldSize);
  w.local_rank = *read_int(lookup, kEnvLocalRank);
  w.local_world_size = read_int(lookup, kEnvLocalWorldSize).value_or(w.world_size);
  w.group_rank = read_int(lookup, kEnvGroupRank)
                     .value_or(w.local_world_size > 0 ? w.rank / w.local_world_size : 0);
  w.group_world_size = read_int(lookup, kEnvGroupWorldSize).value_or(1);
  w.role_name = lookup(kEnvRoleName.name).value_or(std::string(kEnvRoleName.default_value));
  w.master_addr = lookup(kEnvMasterAddr.name).value_or("");
  w.master_port =
      read_int(lookup, kEnvMasterPort).value_or(*parse_number<int>(kEnvMasterPort.default_value));
  w.run_id = lookup(kEnvTorchelasticRunId.name).value_or("");
  w.max_restarts = read_int(lookup, kEnvTorchelasticMaxRestarts).value_or(0);
  w.restart_count = read_int(lookup, kEnvTorchelasticRestartCount).value_or(0);
  // torchrun >= 2.0 serves the store from its agent on MASTER_PORT and says so here.
  const auto agent = lookup(kEnvTorchelasticUseAgentStore.name);
  w.use_agent_store = agent && (*agent == "True" || *agent == "true" || *agent == "1");
  if (auto dir = lookup(kEnvLogDir.name)) {
    w.log_dir = *dir;
  }
  if (auto dir = lookup(kEnvJournalDir.name)) {
    w.journal_dir = *dir;
  }
  return w;
}

std::map<std::string, std::string> JobEnv::to_env() const {
  std::map<std::string, std::string> env;
  if (log_dir) {
    env[key(kEnvLogDir)] = log_dir->string();
  }
  if (job_id) {
    env[key(kEnvJobId)] = *job_id;
  }
  if (eta) {
    env[key(kEnvEtaKnob)] = fmt::format("{}", *eta);
  }
  if (cost_threshold) {
    env[key(kEnvCostThresh)] =
        std::isfinite(*cost_threshold) ? fmt::format("{}", *cost_threshold) : "inf";
  }
  if (max_epochs) {
    env[key(kEnvMaxEpochs)] = std::to_string(*max_epochs);
  }
  if (target_metric) {
    env[key(kEnvTargetMetric)] = fmt::format("{}", *target_metric);
  }
  return env;
}

}  // namespace zeus::contract
