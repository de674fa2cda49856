// Per-job energy accounting (zeus-cpp's, not in Zeus 0.16): what DCGM's `dcgmi stats --jstart /
// --jstop` gives, kept by zeusd. A Slurm prolog starts a job's record (each GPU's energy counter
// and the time), the epilog stops it; `zeus job-energy report` reads per GPU and total joules,
// time and average power. Records live in <state dir>/job_energy.json (written atomically at
// each start and stop), so a daemon restart loses none. With the kubelet's pod-resources API
// (`zeusd serve --kubelet-socket`) each record names the pods holding its GPUs at its start, and
// zeusd keeps a record of its own for each pod holding GPUs (pod_records.h).
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/daemon/gpu_control.h"
#include "zeus/daemon/pods.h"

namespace zeus::daemon {

struct JobEnergyOptions {
  std::filesystem::path file;
  size_t max_records = 10'000;  // beyond it, the oldest finished records are dropped
  PodOfGpu pod_of;              // names each GPU's pod at a record's start; empty: none
};

// Contract: thread-safe. Job ids are 1..330 characters of [A-Za-z0-9._:-] (ConfigError
// otherwise). A GPU without an energy counter is recorded without one and reported with a null
// energy and a note.
class JobEnergyBook {
 public:
  // Reads the file when it exists (a corrupt one: ConfigError naming it; move it away).
  JobEnergyBook(GpuControl& gpus, JobEnergyOptions options);

  // Starts the record of `job` on `gpus` (empty: every GPU). A job already running is a
  // ConfigError (its prolog ran twice?); a finished one under the same id is replaced. `pods`:
  // the GPUs' pods where the caller knows them; empty: asked of the options' pod_of.
  nlohmann::json start(const std::string& job, std::vector<int> gpus,
                       std::map<int, kube::DeviceOwner> pods = {});
  // Stops it: ConfigError for an unknown job, or one already stopped.
  nlohmann::json stop(const std::string& job);
  // The jobs' reports (empty: every record), oldest first; a running job's is so far. Unknown
  // ids: ConfigError naming them.
  nlohmann::json report(const std::vector<std::string>& jobs) const;
  // The ids of the running records that start with `prefix`.
  std::vector<std::string> running(std::string_view prefix) const;

 private:
  struct Record {
    std::string job;
    std::vector<int> gpus;
    double start_unix_s = 0;
    std::optional<double> end_unix_s;
    std::map<int, double> start_energy_j;  // GPUs with a counter
    std::map<int, double> end_energy_j;
    std::map<int, kube::DeviceOwner> pods;  // GPUs a pod held at the start
    uint64_t sequence = 0;                  // start order
  };
  std::map<int, double> read_counters(const std::vector<int>& gpus) const;
  nlohmann::json report_of(const Record& r) const;
  void save() const;
  static nlohmann::json to_json(const Record& r);
  static Record from_json(const nlohmann::json& j);

  GpuControl& gpus_;
  JobEnergyOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Record> records_;
  uint64_t next_sequence_ = 0;
};

// Throws ConfigError unless `job` is a valid job id (see JobEnergyBook).
void check_job_id(const std::string& job);

}  // namespace zeus::daemon
