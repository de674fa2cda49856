#include "zeus/daemon/command_overrides.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <regex>
#include <set>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/process/child.h"

namespace zeus::daemon {

namespace {

// Each table and the placeholders its commands may use (besides {gpu_id}).
const std::map<std::string, std::set<std::string>>& operations() {
  static const std::map<std::string, std::set<std::string>> ops = {
      {"set_persistence_mode", {"enabled"}},
      {"set_power_limit", {"power_limit_mw", "power_limit_w"}},
      {"set_gpu_locked_clocks", {"min_clock_mhz", "max_clock_mhz"}},
      {"reset_gpu_locked_clocks", {}},
      {"set_mem_locked_clocks", {"min_clock_mhz", "max_clock_mhz"}},
      {"reset_mem_locked_clocks", {}},
      {"reset_locked_clocks", {}},
  };
  return ops;
}

// The {names} in `word`, in order. Throws ConfigError for an unclosed brace.
std::vector<std::string> placeholders(const std::string& word) {
  std::vector<std::string> names;
  for (size_t at = word.find('{'); at != std::string::npos; at = word.find('{', at + 1)) {
    const size_t end = word.find('}', at);
    if (end == std::string::npos) {
      throw ConfigError(
          fmt::format("'{}' opens a placeholder with '{{' and never closes it", word));
    }
    names.push_back(word.substr(at + 1, end - at - 1));
    at = end;
  }
  return names;
}

std::string substitute(std::string word, const std::map<std::string, std::string>& values) {
  for (const auto& [name, value] : values) {
    const std::string key = "{" + name + "}";
    for (size_t at = word.find(key); at != std::string::npos;
         at = word.find(key, at + value.size())) {
      word.replace(at, key.size(), value);
    }
  }
  return word;
}

void check_file_trust(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw ConfigError(fmt::format("--gpu-command-overrides {}: cannot read it", path.string()));
  }
  if ((st.st_uid != 0 && st.st_uid != ::geteuid()) || (st.st_mode & S_IWOTH) != 0) {
    throw ConfigError(fmt::format(
        "--gpu-command-overrides {}: owned by uid {} with mode {:o}; it says what zeusd runs, so "
        "it must belong to root or zeusd's user and not be writable by others",
        path.string(), st.st_uid, st.st_mode & 07777));
  }
}

// error_pattern as std::regex (ECMAScript) reads it; upstream's are Rust regexes, whose common
// leading "(?i)" (case-insensitive) ECMAScript lacks, so it becomes the icase flag.
std::regex make_regex(const std::string& pattern) {
  if (pattern.starts_with("(?i)")) {
    return std::regex(pattern.substr(4), std::regex::ECMAScript | std::regex::icase);
  }
  return std::regex(pattern);
}

// Runs argv without a shell, up to `timeout`; its exit status and output (stdout + stderr).
struct RunResult {
  process::ExitStatus status;
  std::string output;
  bool timed_out = false;
};

RunResult run_command(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw IoError("pipe2 failed for a GPU command override");
  }
  UniqueFd read_end(fds[0]);
  process::ChildSpec spec;
  spec.argv = argv;
  spec.search_path = true;
  spec.stdin_fd = process::ChildFd::dev_null();
  spec.stdout_fd = process::ChildFd::from(fds[1]);
  spec.stderr_fd = process::ChildFd::from(fds[1]);
  spec.what = "a GPU command override";
  process::Child child;
  try {
    child = process::Child::start(spec);
  } catch (...) {
    ::close(fds[1]);
    throw;
  }
  ::close(fds[1]);
  RunResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd pfd{read_end.get(), POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) {
      continue;
    }
    const ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n <= 0) {
      break;  // EOF: the command (and whatever kept the pipe) is done writing
    }
    if (r.output.size() < 64 * 1024) {
      r.output.append(buf, static_cast<size_t>(n));
    }
  }
  if (r.timed_out) {
    r.status = child.stop(std::chrono::seconds(2));
  } else {
    const auto left = deadline - std::chrono::steady_clock::now();
    const auto st = child.wait_for(std::max(left, std::chrono::steady_clock::duration::zero()));
    if (st) {
      r.status = *st;
    } else {
      r.timed_out = true;
      r.status = child.stop(std::chrono::seconds(2));
    }
  }
  return r;
}

class OverridingGpuControl : public GpuControl {
 public:
  OverridingGpuControl(std::unique_ptr<GpuControl> inner, CommandOverrides overrides)
      : inner_(std::move(inner)), overrides_(std::move(overrides)) {}

  int count() const override { return inner_->count(); }
  GpuIdentity identity(int gpu) const override { return inner_->identity(gpu); }
  uint64_t energy_mj(int gpu) override { return inner_->energy_mj(gpu); }
  uint32_t power_mw(int gpu) override { return inner_->power_mw(gpu); }
  uint32_t power_limit_mw(int gpu) override { return inner_->power_limit_mw(gpu); }
  PowerLimitRange power_limit_constraints_mw(int gpu) override {
    return inner_->power_limit_constraints_mw(gpu);
  }
  bool persistence_mode(int gpu) override { return inner_->persistence_mode(gpu); }
  std::vector<pid_t> compute_pids(int gpu) override { return inner_->compute_pids(gpu); }

  void set_power_limit_mw(int gpu, uint32_t mw) override {
    if (!run("set_power_limit", gpu,
             {{"power_limit_mw", std::to_string(mw)},
              {"power_limit_w", std::to_string(mw / 1000)}})) {
      inner_->set_power_limit_mw(gpu, mw);
    }
  }
  void set_persistence_mode(int gpu, bool on) override {
    if (!run("set_persistence_mode", gpu, {{"enabled", on ? "1" : "0"}})) {
      inner_->set_persistence_mode(gpu, on);
    }
  }
  void set_gpu_locked_clocks(int gpu, uint32_t lo, uint32_t hi) override {
    if (!run("set_gpu_locked_clocks", gpu, clocks(lo, hi))) {
      inner_->set_gpu_locked_clocks(gpu, lo, hi);
    }
  }
  void reset_gpu_locked_clocks(int gpu) override {
    if (!run("reset_gpu_locked_clocks", gpu, {})) {
      inner_->reset_gpu_locked_clocks(gpu);
    }
  }
  void set_mem_locked_clocks(int gpu, uint32_t lo, uint32_t hi) override {
    if (!run("set_mem_locked_clocks", gpu, clocks(lo, hi))) {
      inner_->set_mem_locked_clocks(gpu, lo, hi);
    }
  }
  void reset_mem_locked_clocks(int gpu) override {
    if (!run("reset_mem_locked_clocks", gpu, {})) {
      inner_->reset_mem_locked_clocks(gpu);
    }
  }
  void reset_locked_clocks(int gpu) override {
    if (!run("reset_locked_clocks", gpu, {})) {
      GpuControl::reset_locked_clocks(gpu);
    }
  }

 private:
  static std::map<std::string, std::string> clocks(uint32_t lo, uint32_t hi) {
    return {{"min_clock_mhz", std::to_string(lo)}, {"max_clock_mhz", std::to_string(hi)}};
  }

  // Runs the override of `op` for `gpu`: false when there is none. Throws DeviceError.
  bool run(const std::string& op, int gpu, std::map<std::string, std::string> values) {
    const auto it = overrides_.find(op);
    if (it == overrides_.end()) {
      return false;
    }
    values["gpu_id"] = std::to_string(gpu);
    const CommandOverride& o = it->second;
    for (const auto& words : o.commands) {
      std::vector<std::string> argv;
      for (const auto& w : words) {
        argv.push_back(substitute(w, values));
      }
      const std::string shown = fmt::format("{}", fmt::join(argv, " "));
      const RunResult r = run_command(argv, o.timeout);
      const std::string tail =
          r.output.size() > 500 ? "..." + r.output.substr(r.output.size() - 500) : r.output;
      if (r.timed_out) {
        throw DeviceError(fmt::format("GPU {} {}: override command '{}' ran past {} s: {}", gpu, op,
                                      shown, o.timeout.count(), tail));
      }
      if (!r.status.ok()) {
        throw DeviceError(fmt::format("GPU {} {}: override command '{}' {}: {}", gpu, op, shown,
                                      r.status.describe(), tail));
      }
      if (o.error_pattern && std::regex_search(r.output, make_regex(*o.error_pattern))) {
        throw DeviceError(fmt::format(
            "GPU {} {}: override command '{}' printed what error_pattern '{}' matches: {}", gpu, op,
            shown, *o.error_pattern, tail));
      }
      logger().info("zeusd: GPU {} {}: ran '{}'", gpu, op, shown);
    }
    return true;
  }

  std::unique_ptr<GpuControl> inner_;
  CommandOverrides overrides_;
};

}  // namespace

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) {
        words.push_back(word);
        word.clear();
        in_word = false;
      }
    } else if (c == '\'') {
      const size_t end = text.find('\'', i + 1);
      if (end == std::string::npos) {
        throw ConfigError(fmt::format("unterminated ' in command '{}'", text));
      }
      word += text.substr(i + 1, end - i - 1);
      in_word = true;
      i = end;
    } else if (c == '"') {
      in_word = true;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size() &&
            std::string_view("$`\"\\\n").find(text[i + 1]) != std::string_view::npos) {
          ++i;
        }
        word += text[i];
      }
      if (i >= text.size()) {
        throw ConfigError(fmt::format("unterminated \" in command '{}'", text));
      }
    } else if (c == '\\') {
      if (i + 1 < text.size()) {
        word += text[++i];
      }
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) {
    words.push_back(word);
  }
  return words;
}

CommandOverrides load_command_overrides(const std::filesystem::path& path) {
  check_file_trust(path);
  const auto where = [&](const std::string& what) {
    return ConfigError(fmt::format("--gpu-command-overrides {}: {}", path.string(), what));
  };
  toml::table doc;
  try {
    doc = toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    throw where(fmt::format("not TOML: {} (line {})", e.description(), e.source().begin.line));
  }
  CommandOverrides out;
  for (const auto& [key, node] : doc) {
    const std::string op(key.str());
    const auto op_it = operations().find(op);
    if (op_it == operations().end()) {
      throw where(fmt::format("unknown table [{}]", op));
    }
    const toml::table* t = node.as_table();
    if (t == nullptr) {
      throw where(fmt::format("'{}' must be a table", op));
    }
    CommandOverride o;
    for (const auto& [k, v] : *t) {
      const std::string name(k.str());
      if (name == "commands") {
        const toml::array* a = v.as_array();
        if (a == nullptr || a->empty()) {
          throw where(fmt::format("[{}] commands must be a non-empty array of strings", op));
        }
        for (const auto& c : *a) {
          const auto s = c.value<std::string>();
          if (!s || s->empty()) {
            throw where(fmt::format("[{}] commands must be non-empty strings", op));
          }
          std::vector<std::string> words;
          try {
            words = split_words(*s);
          } catch (const ConfigError& e) {
            throw where(fmt::format("[{}] {}", op, e.what()));
          }
          if (words.empty()) {
            throw where(fmt::format("[{}] a command has no words", op));
          }
          for (const auto& w : words) {
            std::vector<std::string> names;
            try {
              names = placeholders(w);
            } catch (const ConfigError& e) {
              throw where(fmt::format("[{}] {}", op, e.what()));
            }
            for (const auto& p : names) {
              if (p != "gpu_id" && !op_it->second.contains(p)) {
                throw where(fmt::format("[{}] unknown placeholder {{{}}} in '{}'", op, p, *s));
              }
            }
          }
          o.commands.push_back(std::move(words));
        }
      } else if (name == "error_pattern") {
        const auto s = v.value<std::string>();
        if (!s) {
          throw where(fmt::format("[{}] error_pattern must be a string", op));
        }
        try {
          (void)make_regex(*s);
        } catch (const std::regex_error& e) {
          throw where(fmt::format("[{}] error_pattern '{}' is not a regular expression: {}", op, *s,
                                  e.what()));
        }
        o.error_pattern = *s;
      } else if (name == "timeout_s") {
        const auto n = v.value<int64_t>();
        if (!n || *n <= 0) {
          throw where(fmt::format("[{}] timeout_s must be a positive integer", op));
        }
        o.timeout = std::chrono::seconds(*n);
      } else {
        throw where(
            fmt::format("[{}] unknown key '{}' (commands, error_pattern, timeout_s)", op, name));
      }
    }
    if (o.commands.empty()) {
      throw where(fmt::format("[{}] has no commands", op));
    }
    out.emplace(op, std::move(o));
  }
  return out;
}

std::unique_ptr<GpuControl> with_command_overrides(std::unique_ptr<GpuControl> inner,
                                                   CommandOverrides overrides) {
  return std::make_unique<OverridingGpuControl>(std::move(inner), std::move(overrides));
}

}  // namespace zeus::daemon
