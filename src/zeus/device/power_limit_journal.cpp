#include "zeus/device/power_limit_journal.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/common/json.h"
#include "zeus/common/posix.h"
#include "zeus/device/discovery.h"
#include "zeus/device/restore_rule.h"

namespace zeus::device {
namespace {

constexpr const char* kFormat = "zeus-power-limits-journal";
constexpr int kVersion = 1;

}  // namespace

void write_journal(const std::filesystem::path& path, const PowerLimitJournal& journal) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["locator"] = journal.locator;
  j["host"] = journal.host;
  j["pid"] = journal.pid;
  j["boot_id"] = journal.boot_id;
  if (journal.pid_start) {
    j["pid_start"] = *journal.pid_start;
  }
  j["gpus"] = nlohmann::json::array();
  for (const auto& entry : journal.gpus) {
    j["gpus"].push_back(
        {{"index", entry.index}, {"uuid", entry.uuid}, {"limit_mw", entry.limit_mw}});
  }
  write_file_atomic(path, j.dump(2) + "\n");
}

PowerLimitJournal read_journal(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.value("format", "") != kFormat) {
      throw ConfigError(
          fmt::format("'{}' is not a zeus power-limit journal (no \"format\": \"{}\")",
                      path.string(), kFormat));
    }
    if (j.at("version") != kVersion) {
      throw ConfigError(fmt::format("'{}': journal version {} is not supported (expected {})",
                                    path.string(), j.at("version").dump(), kVersion));
    }
    PowerLimitJournal journal;
    journal.locator = j.at("locator").get<std::string>();
    journal.host = j.value("host", "");
    journal.pid = j.contains("pid") ? json_int(j["pid"], "pid") : 0;
    journal.boot_id = j.value("boot_id", "");
    if (j.contains("pid_start") && j["pid_start"].is_number_unsigned()) {
      journal.pid_start = j["pid_start"].get<unsigned long long>();
    }
    for (const auto& g : j.at("gpus")) {
      const int64_t index = json_int(g.at("index"), "GPU index");
      JournalEntry entry{static_cast<int>(std::clamp<int64_t>(index, -1, 1 << 20)),
                         g.at("uuid").get<std::string>(), json_int(g.at("limit_mw"), "limit_mw")};
      if (entry.limit_mw <= 0 || entry.uuid.empty()) {
        throw ConfigError(
            fmt::format("'{}': GPU entry {} has an empty uuid or a non-positive limit",
                        path.string(), g.dump()));
      }
      journal.gpus.push_back(std::move(entry));
    }
    return journal;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(
        fmt::format("power-limit journal '{}' is corrupt ({}); restore the limits by "
                    "hand with nvidia-smi -pl, then delete the file",
                    path.string(), e.what()));
  }
}

RestoreReport restore_from_journal(const std::filesystem::path& path) {
  const PowerLimitJournal journal = read_journal(path);
  RestoreReport report;
  if (!journal.gpus.empty()) {
    OpenGpuSetOptions options;
    options.respect_visible_devices = false;
    const auto gpus = open_gpu_set(journal.locator, options);
    std::vector<std::string> failures;
    bool retryable = false;  // a failure that a later attempt may get past (not a GPU gone)
    for (const auto& entry : journal.gpus) {
      int found = -1;
      for (int i = 0; i < gpus->count(); ++i) {
        if (gpus->uuid(i) == entry.uuid) {
          found = i;
          break;
        }
      }
      if (found < 0) {
        failures.push_back(
            fmt::format("GPU {} ({}) is not on this machine", entry.index, entry.uuid));
        continue;
      }
      try {
        const int64_t before = gpus->power_limit_mw(found);
        gpus->set_power_limit_mw(found, entry.limit_mw);
        // The rule: an entry is back only when the GPU reads it back.
        if (const int64_t now_mw = gpus->power_limit_mw(found); now_mw != entry.limit_mw) {
          throw DeviceError(fmt::format("GPU {} ({}) reads back {} mW after the restore to {} mW",
                                        entry.index, entry.uuid, now_mw, entry.limit_mw));
        }
        report.lines.push_back(fmt::format("{} ({}): {} mW -> {} mW", entry.uuid, gpus->name(found),
                                           before, entry.limit_mw));
        ++report.restored;
      } catch (const Error& e) {
        retryable = retryable || !restore_target_gone(e);
        failures.push_back(e.what());
      }
    }
    if (!failures.empty() && !retryable) {
      throw DeviceLost(
          fmt::format("restoring limits from '{}' (written by pid {} on {}) failed: {}; the "
                      "journal is kept for when the GPUs are back",
                      path.string(), journal.pid, journal.host, fmt::join(failures, "; ")));
    }
    if (!failures.empty()) {
      throw DeviceError(
          fmt::format("restoring limits from '{}' (written by pid {} on {}) failed: "
                      "{}; the journal is kept so you can retry",
                      path.string(), journal.pid, journal.host, fmt::join(failures, "; ")));
    }
  }
  std::error_code ec;
  std::filesystem::remove(path, ec);
  return report;
}

PowerLimitJournal journal_of_this_process(std::string locator) {
  PowerLimitJournal journal;
  journal.locator = std::move(locator);
  journal.host = host_name();
  journal.pid = ::getpid();
  journal.boot_id = boot_id();
  journal.pid_start = process_start_ticks(::getpid());
  return journal;
}

JournalOwner journal_owner(const PowerLimitJournal& journal) {
  if (!journal.host.empty() && journal.host != host_name()) {
    return JournalOwner::kOtherHost;
  }
  if (!journal.boot_id.empty() && journal.boot_id != boot_id()) {
    return JournalOwner::kOtherBoot;
  }
  if (journal.pid == ::getpid() &&
      (!journal.pid_start || journal.pid_start == process_start_ticks(::getpid()))) {
    return JournalOwner::kThisProcess;
  }
  return process_alive(static_cast<int>(journal.pid), journal.pid_start) ? JournalOwner::kAlive
                                                                         : JournalOwner::kGone;
}

std::string describe_owner(const PowerLimitJournal& journal, JournalOwner owner) {
  const std::string who = fmt::format("pid {} on {}", journal.pid, journal.host);
  switch (owner) {
    case JournalOwner::kThisProcess:
      return who + " (this process)";
    case JournalOwner::kAlive:
      return who + ", which is still running";
    case JournalOwner::kGone:
      return who + ", which ended without restoring them";
    case JournalOwner::kOtherBoot:
      return who + ", before this machine's last boot";
    case JournalOwner::kOtherHost:
      return who + ", another machine";
  }
  return who;
}

std::optional<std::string> settle_stale_journal(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return std::nullopt;
  }
  const PowerLimitJournal journal = read_journal(path);  // corrupt: ConfigError, file kept
  const JournalOwner owner = journal_owner(journal);
  switch (owner) {
    case JournalOwner::kGone: {
      const RestoreReport report = restore_from_journal(path);
      return fmt::format("restored the power limits that {} left in {} first: {}",
                         describe_owner(journal, owner), path.string(),
                         fmt::join(report.lines, "; "));
    }
    case JournalOwner::kOtherBoot: {
      const auto aside = path.string() + ".previous-boot";
      std::filesystem::rename(path, aside, ec);
      if (ec) {
        throw_posix_error("set aside a journal of a previous boot", path.string(), ec.value());
      }
      return fmt::format(
          "{} was written by {}: the driver reset those limits at the reboot, so it was not "
          "applied; moved it to {}",
          path.string(), describe_owner(journal, owner), aside);
    }
    case JournalOwner::kAlive:
    case JournalOwner::kThisProcess:
      throw ConfigError(fmt::format(
          "the GPUs' power limits in {} are held by {}: another job on this node controls them "
          "from this log dir; wait for it to finish, or give this job its own log dir "
          "(ZEUS_LOG_DIR)",
          path.string(), describe_owner(journal, owner)));
    case JournalOwner::kOtherHost:
      throw ConfigError(fmt::format(
          "{} was written by {}: nodes that share a log dir need distinct node ranks (each has "
          "its own journal); check the node ranks, or give each node its own log dir",
          path.string(), describe_owner(journal, owner)));
  }
  return std::nullopt;
}

int settle_gone_journals(std::span<const std::filesystem::path> paths,
                         const std::function<void(const std::string&)>& say) {
  int left = 0;
  for (const auto& path : paths) {
    try {
      const PowerLimitJournal journal = read_journal(path);
      const JournalOwner owner = journal_owner(journal);
      if (owner != JournalOwner::kGone && owner != JournalOwner::kOtherBoot) {
        continue;  // a live job's (it restores them itself), or another node's on a shared dir
      }
      if (const auto settled = settle_stale_journal(path)) {
        say(*settled);
      }
    } catch (const Error& e) {
      if (std::error_code ec; !std::filesystem::exists(path, ec)) {
        continue;  // settled meanwhile by its owner's watchdog: nothing left to do
      }
      left += restore_target_gone(e) ? 0 : 1;
      say(fmt::format(
          "could not restore the power limits in {}: {}; run `zeus restore-limits --journal {}` "
          "once the GPUs are reachable",
          path.string(), e.what(), path.string()));
    }
  }
  return left;
}

}  // namespace zeus::device
