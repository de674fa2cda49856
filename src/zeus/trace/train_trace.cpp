#include "zeus/trace/train_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "zeus/common/atomic_file.h"
#include "zeus/common/csv.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/trace/power_trace.h"

namespace zeus::trace {

TrainTrace TrainTrace::load(const std::filesystem::path& csv_path) {
  return parse(read_file(csv_path), csv_path.string());
}

TrainTrace TrainTrace::parse(std::string_view text, std::string_view source) {
  const CsvTable table = CsvTable::parse(text, source);
  const size_t c_dataset = table.column("dataset");
  const size_t c_network = table.column("network");
  const size_t c_bs = table.column("batch_size");
  const size_t c_opt = table.column("optimizer");
  const size_t c_lr = table.column("learning_rate");
  const size_t c_run = table.column("run");
  const size_t c_target = table.column("target_metric");
  const size_t c_epoch = table.column("target_epoch");
  TrainTrace trace;
  trace.source_ = std::string(source);
  trace.rows_.reserve(table.rows().size());
  for (size_t i = 0; i < table.rows().size(); ++i) {
    const auto& r = table.rows()[i];
    TrainTraceRow row{r[c_dataset],
                      r[c_network],
                      r[c_opt],
                      table.as_int(i, c_bs),
                      r[c_lr],
                      table.as_int(i, c_run),
                      table.as_double(i, c_target),
                      std::nullopt};
    const std::string& epoch = r[c_epoch];
    if (!epoch.empty() && !iequals(epoch, "nan")) {
      const double e = table.as_double(i, c_epoch);
      if (e < 0 || e > 1e6 || e != std::floor(e)) {
        throw ConfigError(
            fmt::format("{}: row {}: target_epoch '{}' must be a whole number >= 0 "
                        "or nan",
                        trace.source_, i + 2, epoch));
      }
      row.target_epoch = static_cast<int64_t>(e);
    }
    if (row.batch_size <= 0) {
      throw ConfigError(fmt::format("{}: row {}: batch_size {} must be positive", trace.source_,
                                    i + 2, row.batch_size));
    }
    trace.rows_.push_back(std::move(row));
  }
  if (trace.rows_.empty()) {
    throw ConfigError(fmt::format("{}: no training runs", trace.source_));
  }
  return trace;
}

TrainTrace TrainTrace::load_default() {
  return load(trace_dir() / "summary_train.csv");
}

std::vector<std::optional<int64_t>> TrainTrace::target_epochs(std::string_view dataset,
                                                              std::string_view network,
                                                              std::string_view optimizer,
                                                              int64_t batch_size,
                                                              double target_metric) const {
  std::vector<std::optional<int64_t>> out;
  for (const auto& row : rows_) {
    if (row.batch_size == batch_size && row.target_metric == target_metric &&
        iequals(row.dataset, dataset) && iequals(row.network, network) &&
        iequals(row.optimizer, optimizer)) {
      out.push_back(row.target_epoch);
    }
  }
  return out;
}

std::vector<int64_t> TrainTrace::batch_sizes(std::string_view dataset, std::string_view network,
                                             std::string_view optimizer,
                                             double target_metric) const {
  std::set<int64_t> sizes;
  for (const auto& row : rows_) {
    if (row.target_metric == target_metric && iequals(row.dataset, dataset) &&
        iequals(row.network, network) && iequals(row.optimizer, optimizer)) {
      sizes.insert(row.batch_size);
    }
  }
  return {sizes.begin(), sizes.end()};
}

}  // namespace zeus::trace
