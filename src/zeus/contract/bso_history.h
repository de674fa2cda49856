// The history file of a recurring job's batch-size optimizer: one JSON line per try
// (optimize/batch_size_optimizer.h's to_json_line), which replays the optimizer to its state.
#pragma once

#include <filesystem>
#include <vector>

#include "zeus/optimize/batch_size_optimizer.h"

namespace zeus::contract {

// Adds a line with one O_APPEND write and fsync, so a crash leaves whole lines only.
void append_history(const std::filesystem::path& path, const optimize::BatchSizeObservation& obs);
// Throws ConfigError naming file:line for a malformed line; {} when the file is missing.
std::vector<optimize::BatchSizeObservation> read_history(const std::filesystem::path& path);

}  // namespace zeus::contract
