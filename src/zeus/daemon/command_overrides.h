// `--gpu-command-overrides`: Zeus 0.16's TOML file of commands that replace NVML's setters, for
// GPUs or drivers whose NVML calls do not work (or where a site tool must make the change).
//
//   [set_power_limit]
//   commands = ["nvidia-smi -i {gpu_id} -pl {power_limit_w}"]
//   error_pattern = "(?i)error|failed"   # optional: a match in stdout+stderr fails the call
//                                         # (ECMAScript syntax; a leading (?i) as in Rust)
//   timeout_s = 30                        # per command; default 60, never 0
//
// Tables, any subset of: set_persistence_mode, set_power_limit, set_gpu_locked_clocks,
// reset_gpu_locked_clocks, set_mem_locked_clocks, reset_mem_locked_clocks, reset_locked_clocks;
// unknown tables and keys are refused. Commands are split as a POSIX shell splits words
// (quotes, backslashes; no expansion) and run without a shell, in order, stopping at the first
// failure. Placeholders: {gpu_id} everywhere; {power_limit_mw} and {power_limit_w} in
// set_power_limit; {min_clock_mhz} and {max_clock_mhz} in the set_*_locked_clocks tables;
// {enabled} (1 or 0) in set_persistence_mode; any other is refused when the file loads. The
// file must belong to root or to zeusd's user and must not be writable by others (it says what
// a privileged process runs).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/daemon/gpu_control.h"

namespace zeus::daemon {

struct CommandOverride {
  std::vector<std::vector<std::string>> commands;  // each already split into words
  std::optional<std::string> error_pattern;
  std::chrono::seconds timeout{60};
};

// Operation name (the table's) -> its override.
using CommandOverrides = std::map<std::string, CommandOverride>;

// Reads and checks the file. Throws ConfigError naming the path and what is wrong.
CommandOverrides load_command_overrides(const std::filesystem::path& path);

// POSIX shell word splitting without expansion (shell_words' rules). Throws ConfigError for an
// unterminated quote.
std::vector<std::string> split_words(const std::string& text);

// `inner` with the overridden setters replaced by their commands; reads and the others pass
// through. A failing command throws DeviceError (upstream answers 500) naming the command, its
// exit and the tail of its output.
std::unique_ptr<GpuControl> with_command_overrides(std::unique_ptr<GpuControl> inner,
                                                   CommandOverrides overrides);

}  // namespace zeus::daemon
