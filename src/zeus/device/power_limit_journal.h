// The power-limit journal: the limits to put back if the process that changed them dies. Written
// atomically before any change, removed after a successful restore, read by
// `zeus restore-limits --journal FILE` (and by `zeus run` after a worker crash).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
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
  std::string boot_id;                          // the writer's boot (empty in older journals)
  std::optional<unsigned long long> pid_start;  // the writer's start time (process_start_ticks)
  std::vector<JournalEntry> gpus;
};

// A journal for this process's GPUs as they are now (host, pid, boot, start time filled in).
PowerLimitJournal journal_of_this_process(std::string locator);

// Where journals go and what they are called: contract/run_files.h (journal_path).

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

// Whose a journal is, seen from this process.
enum class JournalOwner {
  kThisProcess,  // written by this process
  kAlive,        // by a process that still runs on this host: its job holds those GPUs
  kGone,         // by a process of this host and boot that ended without restoring: restore it
  kOtherBoot,    // before this machine's last boot: the driver reset those limits since
  kOtherHost,    // on another machine (a log dir shared across nodes): that machine's to restore
};
JournalOwner journal_owner(const PowerLimitJournal& journal);
// "pid 4121 on gpu07, which is gone", for messages.
std::string describe_owner(const PowerLimitJournal& journal, JournalOwner owner);

// Before a process takes GPUs whose journal lives at `path`: what an earlier job left there is
// settled first. A journal whose owner is gone is restored (and removed once every limit is
// back); one from a previous boot is renamed to `<path>.previous-boot` (the reboot restored its
// limits); one whose owner still runs, or that another host wrote, is left alone and is a
// ConfigError saying whose it is and what to do. A journal is never removed or overwritten
// before its limits are back. Returns what was done, for the log, or std::nullopt when there was
// no journal. Restore failures throw DeviceError (the journal is kept).
std::optional<std::string> settle_stale_journal(const std::filesystem::path& path);

// settle_stale_journal for each of `paths` whose owner is gone or that a previous boot wrote,
// telling `say` what was done; one of a live process or of another host is left to it. Failures
// are said, not thrown. Returns how many journals are left that another attempt may restore (a
// GPU that is gone is not counted: Note [restore rule]).
int settle_gone_journals(std::span<const std::filesystem::path> paths,
                         const std::function<void(const std::string&)>& say);

}  // namespace zeus::device
