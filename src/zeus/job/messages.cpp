#include "zeus/job/messages.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "zeus/common/errors.h"

namespace zeus::job {

namespace {

void check_size(std::span<const double> v, size_t want, const char* what) {
  ZEUS_ASSERT(v.size() == want, "{} has {} values, expected {}", what, v.size(), want);
}

double max_of(std::span<const double> v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

}  // namespace

std::vector<double> LimitRangeMessage::encode() const {
  return {static_cast<double>(range.min_mw), static_cast<double>(range.max_mw),
          static_cast<double>(current_limit_mw)};
}

LimitRangeMessage LimitRangeMessage::decode(std::span<const double> v) {
  check_size(v, kSize, "the limit-range message");
  return {{static_cast<int64_t>(v[0]), static_cast<int64_t>(v[1])}, static_cast<int64_t>(v[2])};
}

std::vector<double> WindowMessage::contribution(const RankInfo& ranks, double elapsed_s,
                                                double node_energy_j) {
  std::vector<double> v(static_cast<size_t>(ranks.world_size) + 1, 0.0);
  v[static_cast<size_t>(ranks.rank)] = elapsed_s;
  if (ranks.is_local_master()) {
    v.back() = node_energy_j;
  }
  return v;
}

WindowMessage WindowMessage::decode(std::span<const double> v, int world_size) {
  const auto w = static_cast<size_t>(world_size);
  check_size(v, w + 1, "the window message");
  return {max_of(v.first(w)), v[w]};
}

std::vector<double> EpochMessage::contribution(const RankInfo& ranks, const Part& part) {
  const auto w = static_cast<size_t>(ranks.world_size);
  const auto r = static_cast<size_t>(ranks.rank);
  std::vector<double> v(2 * w + 3, 0.0);
  v[r] = part.train_s;
  v[w + r] = part.eval_s;
  if (ranks.is_local_master()) {
    v[2 * w] = part.node_train_j;
    v[2 * w + 1] = part.node_eval_j;
  }
  if (ranks.is_master()) {
    v[2 * w + 2] = static_cast<double>(part.limit_mw);
  }
  return v;
}

EpochMessage EpochMessage::decode(std::span<const double> v, int world_size) {
  const auto w = static_cast<size_t>(world_size);
  check_size(v, 2 * w + 3, "the epoch message");
  return {max_of(v.first(w)), max_of(v.subspan(w, w)), v[2 * w], v[2 * w + 1],
          static_cast<int64_t>(v[2 * w + 2])};
}

std::vector<double> DecisionMessage::encode() const {
  return {static_cast<double>(code), forecast.next_time_s,    forecast.next_energy_j,
          forecast.cost_so_far,      forecast.predicted_cost, metric.value_or(std::nan(""))};
}

DecisionMessage DecisionMessage::decode(std::span<const double> v) {
  check_size(v, kSize, "the decision message");
  const int code = static_cast<int>(v[0]);
  if (v[0] != code || code < 0 || code > static_cast<int>(Code::kCostThreshold)) {
    throw DistError(
        fmt::format("rank 0's epoch decision holds code {}, which no rank sends: the process group "
                    "delivered a corrupted broadcast",
                    v[0]));
  }
  DecisionMessage d;
  d.code = static_cast<Code>(code);
  d.forecast = {v[1], v[2], v[3], v[4]};
  if (!std::isnan(v[5])) {
    d.metric = v[5];
  }
  return d;
}

}  // namespace zeus::job
