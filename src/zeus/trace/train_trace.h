// summary_train.csv of the Zeus traces: for each training run (dataset, network, batch size,
// optimizer, learning rate, run) and target metric level, the epoch at which the target was first
// reached, or "nan" when it never was.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::trace {

struct TrainTraceRow {
  std::string dataset;
  std::string network;
  std::string optimizer;
  int64_t batch_size = 0;
  std::string learning_rate;
  int64_t run = 0;
  double target_metric = 0;
  std::optional<int64_t> target_epoch;  // nullopt: never reached
};

class TrainTrace {
 public:
  // Throws IoError when missing, ConfigError naming path:line and column for malformed rows.
  static TrainTrace load(const std::filesystem::path& csv_path);
  // The same from text; `source` names it in messages.
  static TrainTrace parse(std::string_view text, std::string_view source);
  static TrainTrace load_default();  // summary_train.csv in trace_dir()

  const std::vector<TrainTraceRow>& rows() const { return rows_; }
  // Target epochs of every run of (dataset, network, optimizer, batch size) at this target
  // level; names compare case-insensitively.
  std::vector<std::optional<int64_t>> target_epochs(std::string_view dataset,
                                                    std::string_view network,
                                                    std::string_view optimizer, int64_t batch_size,
                                                    double target_metric) const;
  // Batch sizes with at least one run at this target level, ascending.
  std::vector<int64_t> batch_sizes(std::string_view dataset, std::string_view network,
                                   std::string_view optimizer, double target_metric) const;

 private:
  std::string source_;
  std::vector<TrainTraceRow> rows_;
};

}  // namespace zeus::trace
