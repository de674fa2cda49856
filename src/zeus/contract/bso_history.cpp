#include "zeus/contract/bso_history.h"

#include "zeus/common/atomic_file.h"

namespace zeus::contract {

void append_history(const std::filesystem::path& path, const optimize::BatchSizeObservation& obs) {
  append_line_durable(path, optimize::to_json_line(obs), "batch-size history");
}

std::vector<optimize::BatchSizeObservation> read_history(const std::filesystem::path& path) {
  std::vector<optimize::BatchSizeObservation> out;
  for_each_line(path, [&](std::string_view line, const std::string& where) {
    out.push_back(optimize::observation_from_json_line(line, where));
  });
  return out;
}

}  // namespace zeus::contract
