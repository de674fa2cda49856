// What Slurm tells a process about its job and step, read once for both who-am-I detection
// (cluster::detect_env) and `zeus run --slurm`. In a step (srun), SLURM_NNODES,
// SLURM_NODEID and SLURM_TASKS_PER_NODE are the step's, while SLURM_NTASKS_PER_NODE and
// SLURM_JOB_NODELIST stay the job's: a step on part of an allocation must use the former.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/cluster/env.h"

namespace zeus::cluster {

// Slurm's compressed host lists: "gpu[01-04,07],cpu3" -> gpu01 gpu02 gpu03 gpu04 gpu07 cpu3;
// several bracket groups multiply ("r[1-2]n[1-2]"). Throws ConfigError for a malformed list.
std::vector<std::string> expand_slurm_nodelist(std::string_view list);
// SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE: "4(x2),3" -> 4 4 3.
std::vector<int> expand_slurm_tasks_per_node(std::string_view list);

// The rendezvous port a Slurm step uses when MASTER_PORT is unset: derived from the job and step
// ids, so every task of the step agrees without talking and two steps of one job running at once
// on a node do not collide (in 15000-34999).
int slurm_default_port(std::string_view job_id, std::string_view step_id = "");

struct SlurmStep {
  std::string job_id;
  // Unset: this process is the batch script itself (sbatch runs it with the job's SLURM_NTASKS
  // and SLURM_PROCID=0), not a task of a step that srun started.
  std::optional<std::string> step_id;
  std::optional<int> procid;   // the task's rank in the step
  std::optional<int> localid;  // its rank on its node
  std::optional<int> nodeid;   // its node's index in the step
  int ntasks = 1;
  int nnodes = 1;
  std::vector<int> tasks_per_node;  // per node of the step
  std::string tasks_per_node_var;   // the variable they came from
  std::vector<std::string> nodes;   // the step's nodes (else the job's)
  std::string nodes_var;

  bool in_step() const { return step_id.has_value(); }
  // Tasks on node `node` of the step (the last entry repeats, as Slurm's lists are read).
  int tasks_on_node(int node) const;
};

// std::nullopt outside Slurm (SLURM_JOB_ID unset). Throws ConfigError for malformed values.
std::optional<SlurmStep> read_slurm(const EnvLookup& lookup);

}  // namespace zeus::cluster
