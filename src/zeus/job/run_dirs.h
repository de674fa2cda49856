// The roles of the directories a job writes in, as its errors name them (common/directories.h):
// each says where the path came from, so that the user knows what to change.
#pragma once

#include <string_view>

namespace zeus::job {

inline constexpr std::string_view kLogDirRole =
    "job's log directory (JobOptions::log_dir, such as a program's --log-dir, else ZEUS_LOG_DIR, "
    "else zeus_log)";
inline constexpr std::string_view kJournalDirRole =
    "power-limit journal directory (ZEUS_JOURNAL_DIR from the launcher: its --log-dir, its "
    "ZEUS_LOG_DIR or zeus_log/.journals/; without a launcher the job's log directory)";

}  // namespace zeus::job
