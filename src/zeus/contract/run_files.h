// Every file a run writes into its log directory, and reads back: named and parsed here, both
// ways, so that the writers (the job, the launcher, `zeus tune`) and the readers (`zeus
// report`, `zeus tune`, the launcher's journal settling) agree by construction.
//   bs{B}.power.json                 the power profile of global batch size B (Zeus's format)
//   {job_id}+bs{B}.train.json        a job's train result (contract/train_result.h)
//   bs{B}+e{E}+gpu{G}.power.log      CSV `Time,Power` (UTC ns, mW) of GPU G in epoch E
//   power-limits.journal             the limits node 0 must restore (node N: .node{N}.journal)
//   gplo-{host}-{pid}.journal        the limits one Python optimizer process must restore
//   tune.json, tune-tries.jsonl      `zeus tune`'s options and its history of tries
//   .sim-node{N}-...state            the simulated GPUs' shared state (device/sim)
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zeus/optimize/power_profile.h"

namespace zeus::contract {

// --- names, both ways (a parse takes a file name, not a path, and rejects any other name) ---

std::string power_profile_name(int64_t global_batch_size);
std::optional<int64_t> parse_power_profile_name(std::string_view file_name);

struct TrainResultName {
  std::string job_id;
  int64_t global_batch_size = 0;
};
std::string train_result_name(std::string_view job_id, int64_t global_batch_size);
// The job id is everything before the last "+bs": a job id may itself hold "+bs".
std::optional<TrainResultName> parse_train_result_name(std::string_view file_name);

struct PowerLogName {
  int64_t global_batch_size = 0;
  int epoch = 0;
  int gpu = 0;
};
std::string power_log_name(const PowerLogName& name);
std::optional<PowerLogName> parse_power_log_name(std::string_view file_name);

// kJournalName on node 0, `power-limits.node{N}.journal` on node N, so that nodes sharing a log
// directory keep separate journals (each node's `zeus run` restores its own).
inline constexpr std::string_view kJournalName = "power-limits.journal";
std::string journal_name(int node_rank);
std::optional<int> parse_journal_name(std::string_view file_name);

// A process's own journal: the Python GlobalPowerLimitOptimizer's `gplo-<host>-<pid>.journal`
// in ZEUS_JOURNAL_DIR (python/zeus_cpp/optimizer/power_limit.py names it through these), one per
// process, so that several optimizers of one node never share one. A launcher settles those
// whose owner is gone in the directories it settles, as it settles the node journals.
std::string process_journal_name(std::string_view host, int pid);
bool is_process_journal_name(std::string_view file_name);
// The process journals in `dir`, sorted (none when it has none or does not exist).
std::vector<std::filesystem::path> list_process_journals(const std::filesystem::path& dir);
// Every journal in `dir` a job may have left, sorted: each node's, whatever its node rank (the
// next job on a host may run there as another node of another run), and the process journals.
std::vector<std::filesystem::path> list_journals(const std::filesystem::path& dir);

// A launcher given no log dir (no --log-dir, no ZEUS_LOG_DIR) has its workers journal in a
// directory of the run's own, DEFAULT_LOG_DIR/.journals/<run key>/, so that runs started at the
// same time in one working directory, each program with the log dir it chose in code, keep
// apart; each run settles its own, and the next run there settles every one whose owner died.
inline constexpr std::string_view kRunJournalsDirName = ".journals";
std::filesystem::path run_journal_dir(const std::filesystem::path& log_dir,
                                      std::string_view run_key);
// The run journal directories under `log_dir` (sorted; none when it has none).
std::vector<std::filesystem::path> list_run_journal_dirs(const std::filesystem::path& log_dir);

// The state the simulated GPUs of one node share (hidden; one per node and device spec).
std::string sim_state_name(int node_rank, int gpu_count, std::string_view gpu_model,
                           std::string_view device_spec);

inline constexpr std::string_view kTuneOptionsName = "tune.json";
inline constexpr std::string_view kTuneTriesName = "tune-tries.jsonl";

// --- paths in a log directory ---

inline std::filesystem::path power_profile_path(const std::filesystem::path& dir, int64_t bs) {
  return dir / power_profile_name(bs);
}
inline std::filesystem::path train_result_path(const std::filesystem::path& dir,
                                               std::string_view job_id, int64_t bs) {
  return dir / train_result_name(job_id, bs);
}
inline std::filesystem::path journal_path(const std::filesystem::path& dir, int node_rank) {
  return dir / journal_name(node_rank);
}

// What a log directory holds, by kind, each list sorted by file name. Files of no kind are
// ignored; a missing directory is an empty listing.
struct RunDirListing {
  std::vector<std::pair<std::filesystem::path, TrainResultName>> train_results;
  std::vector<std::pair<std::filesystem::path, int64_t>> power_profiles;
  std::vector<std::pair<std::filesystem::path, PowerLogName>> power_logs;
  std::vector<std::pair<std::filesystem::path, int>> journals;
  std::optional<std::filesystem::path> tune_options;
  std::optional<std::filesystem::path> tune_tries;
};
RunDirListing list_run_dir(const std::filesystem::path& dir);

// --- contents ---

// Atomic write (temp, fsync, rename) of optimize::to_json(profile).
void save_power_profile(const std::filesystem::path& path, const optimize::PowerProfile& profile);
// std::nullopt when the file does not exist; ConfigError naming the path when it is corrupt (a
// corrupt profile is never silently re-profiled: delete it to profile again).
[[nodiscard]] std::optional<optimize::PowerProfile> load_power_profile(
    const std::filesystem::path& path);

// A power log's samples: (UTC ns since the Unix epoch, W). The file is written a whole row at a
// time by monitor::PowerMonitor (its CSV); ConfigError naming the file and line when malformed.
std::vector<std::pair<int64_t, double>> read_power_log(const std::filesystem::path& path);

}  // namespace zeus::contract
