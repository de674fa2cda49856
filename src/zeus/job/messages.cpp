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

std::vector<double> GrantMessage::encode() const {
  return {static_cast<double>(global_batch_size), cost_threshold.value_or(std::nan("")),
          static_cast<double>(epoch_cap.value_or(0))};
}

GrantMessage GrantMessage::decode(std::span<const double> v) {
  check_size(v, kSize, "the batch-size grant message");
  GrantMessage m;
  m.global_batch_size = static_cast<int64_t>(v[0]);
  if (!std::isnan(v[1])) {
    m.cost_threshold = v[1];
  }
  if (v[2] > 0) {
    m.epoch_cap = static_cast<int64_t>(v[2]);
  }
  return m;
}

WindowMessage::Part WindowMessage::gather(double elapsed_s, double own_s,
                                          std::span<const double> gpu_j,
                                          std::span<const int> gpu_ranks) {
  Part part{elapsed_s, own_s};
  for (size_t k = 0; k < gpu_j.size(); ++k) {
    part.node_energy_j += gpu_j[k];
    if (k < gpu_ranks.size()) {
      part.gpu_energy_j.emplace_back(gpu_ranks[k], gpu_j[k]);
    }
  }
  return part;
}

std::vector<double> WindowMessage::contribution(const RankInfo& ranks, const Part& part) {
  const auto w = static_cast<size_t>(ranks.world_size);
  std::vector<double> v(3 * w + 1, 0.0);
  v[static_cast<size_t>(ranks.rank)] = part.elapsed_s;
  v[w + 1 + static_cast<size_t>(ranks.rank)] = part.own_s;
  if (ranks.is_local_master()) {
    v[w] = part.node_energy_j;
    for (const auto& [rank, j] : part.gpu_energy_j) {
      if (rank >= 0 && static_cast<size_t>(rank) < w) {
        v[2 * w + 1 + static_cast<size_t>(rank)] = j;
      }
    }
  }
  return v;
}

WindowMessage WindowMessage::decode(std::span<const double> v, int world_size) {
  const auto w = static_cast<size_t>(world_size);
  check_size(v, 3 * w + 1, "the window message");
  const auto own = v.subspan(w + 1, w);
  const auto gpu = v.subspan(2 * w + 1, w);
  return {max_of(v.first(w)), v[w], {own.begin(), own.end()}, {gpu.begin(), gpu.end()}};
}

std::vector<double> per_rank_slots(const RankInfo& ranks) {
  return std::vector<double>(static_cast<size_t>(ranks.world_size), 0.0);
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
  return {static_cast<double>(code),
          forecast.next_time_s,
          forecast.next_energy_j,
          forecast.cost_so_far,
          forecast.predicted_cost,
          metric.value_or(std::nan("")),
          threshold};
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
  d.threshold = v[6];
  return d;
}

std::vector<double> ProfileHeader::encode() const {
  return {limits ? static_cast<double>(*limits) : -1.0};
}

ProfileHeader ProfileHeader::decode(std::span<const double> v) {
  check_size(v, kSize, "the profile header");
  if (v[0] < 0) {
    return {};
  }
  return {static_cast<size_t>(v[0])};
}

std::vector<double> ProfileMessage::encode(const optimize::PowerProfile& profile) {
  std::vector<double> v;
  v.reserve(size(profile.train.size()));
  for (const auto& [mw, m] : profile.train) {
    v.push_back(static_cast<double>(mw));
    v.push_back(m.throughput_ips);
    v.push_back(m.power_w);
  }
  v.push_back(profile.eval_throughput_ips.value_or(std::nan("")));
  v.push_back(profile.eval_power_w.value_or(std::nan("")));
  return v;
}

optimize::PowerProfile ProfileMessage::decode(std::span<const double> v, size_t limits,
                                              int64_t global_batch_size) {
  check_size(v, size(limits), "the profile message");
  optimize::PowerProfile p;
  p.global_batch_size = global_batch_size;
  for (size_t i = 0; i < limits; ++i) {
    const std::span<const double> limit = v.subspan(kPerLimit * i, kPerLimit);
    const auto mw = static_cast<int64_t>(limit[0]);
    p.train[mw] = {mw, limit[1], limit[2]};
  }
  const std::span<const double> eval = v.subspan(kPerLimit * limits, 2);
  if (!std::isnan(eval[0])) {
    p.eval_throughput_ips = eval[0];
    p.eval_power_w = eval[1];
  }
  return p;
}

std::vector<double> CurvesMessage::header(std::span<const optimize::GpuCurve> curves) {
  size_t points = 0;
  for (const auto& c : curves) {
    points += c.points.size();
  }
  return {static_cast<double>(curves.size()), static_cast<double>(points)};
}

size_t CurvesMessage::size(std::span<const double> header) {
  check_size(header, kHeaderSize, "the curves header");
  return 3 * static_cast<size_t>(header[0]) + 3 * static_cast<size_t>(header[1]);
}

std::vector<double> CurvesMessage::encode(std::span<const optimize::GpuCurve> curves) {
  std::vector<double> v;
  for (const auto& c : curves) {
    v.push_back(c.idle_power_w);
    v.push_back(static_cast<double>(c.max_limit_mw));
    v.push_back(static_cast<double>(c.points.size()));
    for (const auto& p : c.points) {
      v.push_back(static_cast<double>(p.limit_mw));
      v.push_back(p.time_s);
      v.push_back(p.power_w);
    }
  }
  return v;
}

std::vector<optimize::GpuCurve> CurvesMessage::decode(std::span<const double> header,
                                                      std::span<const double> v) {
  check_size(v, size(header), "the curves message");
  std::vector<optimize::GpuCurve> curves(static_cast<size_t>(header[0]));
  size_t at = 0;
  for (auto& c : curves) {
    if (at + 3 > v.size()) {
      throw DistError("the curves message ends inside a curve");
    }
    c.idle_power_w = v[at];
    c.max_limit_mw = static_cast<int64_t>(v[at + 1]);
    const auto n = static_cast<size_t>(v[at + 2]);
    at += 3;
    if (at + 3 * n > v.size()) {
      throw DistError("the curves message ends inside a curve's points");
    }
    for (size_t i = 0; i < n; ++i, at += 3) {
      c.points.push_back({static_cast<int64_t>(v[at]), v[at + 1], v[at + 2]});
    }
  }
  return curves;
}

void write_text(std::vector<double>& v, size_t slot, std::string_view text) {
  for (size_t i = 0; i < text.size() && i < kTextSlot; ++i) {
    v.at(slot * kTextSlot + i) = static_cast<unsigned char>(text[i]);
  }
}

std::string read_text(std::span<const double> v, size_t slot) {
  std::string out;
  for (size_t i = 0; i < kTextSlot && v[slot * kTextSlot + i] != 0; ++i) {
    out.push_back(static_cast<char>(static_cast<unsigned char>(v[slot * kTextSlot + i])));
  }
  return out;
}

}  // namespace zeus::job
