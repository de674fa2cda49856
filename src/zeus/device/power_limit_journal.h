// The power-limit journal: the limits to put back if the process that changed them dies. Written
// atomically before any change, removed after a successful restore, read by
// `zeus restore-limits --journal FILE` (and by `zeus run` after a worker crash).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace zeus::device {

struct JournalEntry {
  int index = 0;     // index in the writer's GpuSet (for messages)
  std::string uuid;  // what restore matches on
  int64_t limit_mw = 0;
};

struct PowerLimitJournal {
  std::string locator;  // GpuSet::locator() of the writer
  std::string host;
  int64_t pid = 0;
  std::vector<JournalEntry> gpus;
};

inline constexpr const char* kJournalFileName = "power-limits.journal";

// kJournalFileName on node 0, `power-limits.node{N}.journal` on node N, so that nodes sharing a
// log directory keep separate journals (each node's `zeus run` restores its own).
std::string journal_file_name(int node_rank);

// Atomic write (temp, fsync, rename). Throws IoError naming the path.
void write_journal(const std::filesystem::path& path, const PowerLimitJournal& journal);
// Throws IoError when unreadable, ConfigError naming the path and the problem when corrupt.
PowerLimitJournal read_journal(const std::filesystem::path& path);

struct RestoreReport {
  int restored = 0;                // GPUs whose limit was set back
  std::vector<std::string> lines;  // one per GPU, for the user
};

// Restores every limit in the journal (matching GPUs by UUID over all of the machine's GPUs,
// ignoring CUDA_VISIBLE_DEVICES), then removes the journal. Throws ConfigError/IoError for a
// bad journal and DeviceError when a GPU cannot be restored (the journal is then kept).
RestoreReport restore_from_journal(const std::filesystem::path& path);

}  // namespace zeus::device
