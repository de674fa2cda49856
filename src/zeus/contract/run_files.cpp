#include "zeus/contract/run_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/power.h"
#include "zeus/common/units.h"

namespace zeus::contract {
namespace {

// `text` with `prefix` and `suffix` removed, if it has both (and something between).
std::optional<std::string_view> between(std::string_view text, std::string_view prefix,
                                        std::string_view suffix) {
  if (text.size() <= prefix.size() + suffix.size() || !text.starts_with(prefix) ||
      !text.ends_with(suffix)) {
    return std::nullopt;
  }
  return text.substr(prefix.size(), text.size() - prefix.size() - suffix.size());
}

// A decimal without sign or leading zeros (what the names are written with).
template <typename T>
std::optional<T> canonical_number(std::string_view text) {
  if (text.empty() || (text.size() > 1 && text[0] == '0') || text[0] == '-' || text[0] == '+') {
    return std::nullopt;
  }
  return parse_number<T>(text);
}

}  // namespace

std::string power_profile_name(int64_t global_batch_size) {
  return fmt::format("bs{}.power.json", global_batch_size);
}

std::optional<int64_t> parse_power_profile_name(std::string_view file_name) {
  const auto bs = between(file_name, "bs", ".power.json");
  return bs ? canonical_number<int64_t>(*bs) : std::nullopt;
}

std::string train_result_name(std::string_view job_id, int64_t global_batch_size) {
  return fmt::format("{}+bs{}.train.json", job_id, global_batch_size);
}

std::optional<TrainResultName> parse_train_result_name(std::string_view file_name) {
  constexpr std::string_view kSuffix = ".train.json";
  if (!file_name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  const std::string_view stem = file_name.substr(0, file_name.size() - kSuffix.size());
  const size_t at = stem.rfind("+bs");
  if (at == std::string_view::npos || at == 0) {
    return std::nullopt;
  }
  const auto bs = canonical_number<int64_t>(stem.substr(at + 3));
  if (!bs) {
    return std::nullopt;
  }
  return TrainResultName{std::string(stem.substr(0, at)), *bs};
}

std::string power_log_name(const PowerLogName& n) {
  return fmt::format("bs{}+e{}+gpu{}.power.log", n.global_batch_size, n.epoch, n.gpu);
}

std::optional<PowerLogName> parse_power_log_name(std::string_view file_name) {
  const auto body = between(file_name, "bs", ".power.log");
  if (!body) {
    return std::nullopt;
  }
  const size_t e = body->find("+e");
  const size_t g = body->find("+gpu");
  if (e == std::string_view::npos || g == std::string_view::npos || g < e) {
    return std::nullopt;
  }
  const auto bs = canonical_number<int64_t>(body->substr(0, e));
  const auto epoch = canonical_number<int>(body->substr(e + 2, g - e - 2));
  const auto gpu = canonical_number<int>(body->substr(g + 4));
  if (!bs || !epoch || !gpu) {
    return std::nullopt;
  }
  return PowerLogName{*bs, *epoch, *gpu};
}

std::string journal_name(int node_rank) {
  return node_rank == 0 ? std::string(kJournalName)
                        : fmt::format("power-limits.node{}.journal", node_rank);
}

std::optional<int> parse_journal_name(std::string_view file_name) {
  if (file_name == kJournalName) {
    return 0;
  }
  const auto node = between(file_name, "power-limits.node", ".journal");
  const auto n = node ? canonical_number<int>(*node) : std::nullopt;
  return n && *n > 0 ? n : std::nullopt;
}

std::string sim_state_name(int node_rank, int gpu_count, std::string_view gpu_model,
                           std::string_view device_spec) {
  return fmt::format(".sim-node{}-{}x{}-{}.state", node_rank, gpu_count, gpu_model,
                     std::hash<std::string_view>{}(device_spec) % 1000000);
}

RunDirListing list_run_dir(const std::filesystem::path& dir) {
  RunDirListing out;
  std::vector<std::filesystem::path> entries;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    entries.push_back(e.path());
  }
  std::sort(entries.begin(), entries.end());
  for (const auto& path : entries) {
    const std::string name = path.filename().string();
    if (const auto r = parse_train_result_name(name)) {
      out.train_results.emplace_back(path, *r);
    } else if (const auto p = parse_power_profile_name(name)) {
      out.power_profiles.emplace_back(path, *p);
    } else if (const auto l = parse_power_log_name(name)) {
      out.power_logs.emplace_back(path, *l);
    } else if (const auto j = parse_journal_name(name)) {
      out.journals.emplace_back(path, *j);
    } else if (name == kTuneOptionsName) {
      out.tune_options = path;
    } else if (name == kTuneTriesName) {
      out.tune_tries = path;
    }
  }
  return out;
}

void save_power_profile(const std::filesystem::path& path, const optimize::PowerProfile& profile) {
  write_file_atomic(path, optimize::to_json(profile));
}

std::optional<optimize::PowerProfile> load_power_profile(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return std::nullopt;
  }
  return optimize::power_profile_from_json(read_file(path), path.string());
}

std::vector<std::pair<int64_t, double>> read_power_log(const std::filesystem::path& path) {
  std::vector<std::pair<int64_t, double>> samples;
  const std::vector<std::string> lines = split(read_file(path), '\n');
  for (size_t line_no = 1; line_no <= lines.size(); ++line_no) {
    const std::string_view line = lines[line_no - 1];
    if (line.empty() || (line_no == 1 && kPowerLogHeader.starts_with(line))) {
      continue;
    }
    const auto row = parse_power_log_row(line);
    if (!row) {
      throw ConfigError(fmt::format("{}:{}: expected 'UTC time,power in mW', got '{}'",
                                    path.string(), line_no, line));
    }
    samples.emplace_back(row->first, mw_to_w(row->second));
  }
  return samples;
}

namespace {
constexpr std::string_view kProcessJournalPrefix = "gplo-";
constexpr std::string_view kJournalSuffix = ".journal";
}  // namespace

std::string process_journal_name(std::string_view host, int pid) {
  return fmt::format("{}{}-{}{}", kProcessJournalPrefix, host, pid, kJournalSuffix);
}

bool is_process_journal_name(std::string_view file_name) {
  return file_name.size() > kProcessJournalPrefix.size() + kJournalSuffix.size() &&
         file_name.starts_with(kProcessJournalPrefix) && file_name.ends_with(kJournalSuffix);
}

std::vector<std::filesystem::path> list_process_journals(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> journals;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code type_ec;
    if (entry.is_regular_file(type_ec) &&
        is_process_journal_name(entry.path().filename().native())) {
      journals.push_back(entry.path());
    }
  }
  std::sort(journals.begin(), journals.end());
  return journals;
}

std::vector<std::filesystem::path> list_journals(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> journals = list_process_journals(dir);
  for (auto& [path, node_rank] : list_run_dir(dir).journals) {
    journals.push_back(std::move(path));
  }
  std::sort(journals.begin(), journals.end());
  return journals;
}

std::filesystem::path run_journal_dir(const std::filesystem::path& log_dir,
                                      std::string_view run_key) {
  return log_dir / kRunJournalsDirName / run_key;
}

std::vector<std::filesystem::path> list_run_journal_dirs(const std::filesystem::path& log_dir) {
  std::vector<std::filesystem::path> dirs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(log_dir / kRunJournalsDirName, ec)) {
    std::error_code type_ec;
    if (entry.is_directory(type_ec)) {
      dirs.push_back(entry.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

}  // namespace zeus::contract
