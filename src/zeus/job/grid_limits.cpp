#include "zeus/job/grid_limits.h"

#include <fmt/format.h>

#include <algorithm>

#include "zeus/common/logging.h"
#include "zeus/common/power.h"
#include "zeus/grid/electricity_maps.h"
#include "zeus/grid/signal_trace.h"

namespace zeus::job {

std::unique_ptr<GridLimits> GridLimits::make(const ResolvedJobOptions& options,
                                             Collectives& collectives) {
  if (!options.grid) {
    return nullptr;
  }
  const ResolvedGrid& g = *options.grid;
  std::unique_ptr<grid::SignalPoller> poller;
  if (collectives.ranks().is_master()) {
    std::unique_ptr<grid::SignalProvider> provider;
    if (g.api) {
      grid::ElectricityMapsOptions em;
      em.base_url = g.source;
      em.latitude = g.latitude;
      em.longitude = g.longitude;
      em.token = g.token;
      provider = std::make_unique<grid::ElectricityMapsProvider>(em);
    } else {
      provider = std::make_unique<grid::TraceProvider>(g.source, g.kind);
    }
    grid::PollerOptions po;
    po.period = std::chrono::duration_cast<std::chrono::milliseconds>(g.poll);
    // The rule chooses for the interval ahead: a provider that knows it gives its mean.
    po.forecast_horizon = std::chrono::duration_cast<grid::Clock::duration>(g.interval);
    if (g.signal_max <= 0) {
      po.reference_window = grid::kReferenceWindow;  // the grid's own reference
    }
    poller = std::make_unique<grid::SignalPoller>(std::move(provider), po);
  }
  return std::unique_ptr<GridLimits>(new GridLimits(g, collectives, std::move(poller)));
}

GridLimits::GridLimits(const ResolvedGrid& grid, Collectives& collectives,
                       std::unique_ptr<grid::SignalPoller> poller)
    : grid_(grid), coll_(collectives), poller_(std::move(poller)) {
  source_ = grid_.api ? fmt::format("ElectricityMaps at {} ({},{})", grid_.source, grid_.latitude,
                                    grid_.longitude)
                      : grid_.source;
}

GridLimits::~GridLimits() = default;

void GridLimits::follow(std::vector<optimize::LimitMeasurement> profile, double eta,
                        double max_power_w) {
  optimize::GridFollowerOptions o;
  o.eta = eta;
  o.max_power_w = max_power_w;
  o.signal_max = grid_.signal_max;
  o.interval = grid_.interval;
  profile_ = profile;
  follower_ = std::make_unique<optimize::GridFollower>(std::move(profile), o);
  if (coll_.ranks().is_master()) {
    logger().info(
        "the power limit follows the {} ({}) from now on: chosen again on this profile every {} s "
        "or when it moves > 10%; at {} the choice is Zeus's ({} W)",
        grid::to_string(grid_.kind), source_, std::chrono::duration<double>(grid_.interval).count(),
        grid_.signal_max > 0 ? fmt::format("{:g} {}", grid_.signal_max, grid::unit(grid_.kind))
                             : std::string("the grid's mean over the last day"),
        mw_to_w(follower_->zeus_limit_mw()));
  }
}

bool GridLimits::step(int64_t limit_mw) {
  if (limit_mw != limit_since_read_ && steps_since_read_ > 0) {
    limit_since_read_ = 0;  // a stretch of mixed limits: left out of the estimate
  } else {
    limit_since_read_ = limit_mw;
  }
  ++steps_since_read_;
  ++steps_;
  return steps_since_read_ >= kGridCheckSteps;
}

namespace {

const optimize::LimitMeasurement* at_limit(const std::vector<optimize::LimitMeasurement>& profile,
                                           int64_t limit_mw) {
  const auto it = std::find_if(profile.begin(), profile.end(),
                               [&](const auto& m) { return m.power_limit_mw == limit_mw; });
  return it == profile.end() ? nullptr : &*it;
}

}  // namespace

std::optional<GridLimits::Change> GridLimits::read(std::chrono::nanoseconds job_now, int epoch) {
  // [known, value, rank 0's clock in s, provider failures, forecast known, forecast,
  //  reference known, the grid's reference]
  std::vector<double> v(8, 0.0);
  if (poller_) {
    if (const auto latest = poller_->latest()) {
      v[0] = 1;
      v[1] = latest->reading.value;
      v[4] = latest->reading.forecast ? 1 : 0;
      v[5] = latest->reading.forecast.value_or(0.0);
      v[6] = latest->reading.reference ? 1 : 0;
      v[7] = latest->reading.reference.value_or(0.0);
    }
    v[2] = std::chrono::duration<double>(job_now).count();
    v[3] = static_cast<double>(poller_->failures());
  }
  coll_.broadcast(v, 0);
  const auto now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(v[2]));
  failures_ = static_cast<int64_t>(v[3]);
  // The stretch since the last reading ran at the signal held then.
  if (held_ && read_once_) {
    const double s = std::max(0.0, std::chrono::duration<double>(now - last_read_).count());
    epoch_weighted_ += *held_ * s;
    epoch_known_s_ += s;
  }
  // What the stretch's steps saved against Zeus's fixed limit, at the signal then.
  if (follower_ && held_ && limit_since_read_ > 0) {
    const auto* zeus = at_limit(profile_, follower_->zeus_limit_mw());
    const auto* ran = at_limit(profile_, limit_since_read_);
    if (zeus != nullptr && ran != nullptr) {
      const auto n = static_cast<double>(steps_since_read_);
      const double joules =
          n * (zeus->power_w / zeus->throughput_ips - ran->power_w / ran->throughput_ips);
      saving_ += grid::amount_of(joules, *held_);
      saving_s_ += n * (1.0 / zeus->throughput_ips - 1.0 / ran->throughput_ips);
    }
  }
  steps_since_read_ = 0;
  last_read_ = now;
  read_once_ = true;
  if (v[0] == 0) {
    return std::nullopt;  // nothing read yet: the limit stays (the poller said why, once)
  }
  held_ = v[1];
  if (!follower_) {
    return std::nullopt;
  }
  const auto choice =
      follower_->observe(v[1], now, v[4] != 0 ? std::optional<double>(v[5]) : std::nullopt,
                         v[6] != 0 ? std::optional<double>(v[7]) : std::nullopt);
  if (!choice) {
    return std::nullopt;
  }
  choices_.push_back(
      {epoch, steps_, choice->signal, choice->limit_mw, choice->reason, choice->reference});
  if (coll_.ranks().is_master()) {
    logger().info("{} {:g} {} ({}): power limit {} W{} (Zeus's choice {} W)",
                  grid::to_string(grid_.kind), choice->signal, grid::unit(grid_.kind),
                  choice->reason, mw_to_w(choice->limit_mw), choice->changed ? "" : ", unchanged",
                  mw_to_w(follower_->zeus_limit_mw()));
  }
  return Change{choice->limit_mw, choice->changed,
                optimize::grid_eta(follower_->options().eta, choice->signal, choice->reference)};
}

std::optional<double> GridLimits::close_epoch(double energy_j) {
  std::optional<double> amount;
  if (epoch_known_s_ > 0) {
    amount = grid::amount_of(energy_j, epoch_weighted_ / epoch_known_s_);
  } else if (held_) {
    amount = grid::amount_of(energy_j, *held_);
  }
  epoch_amounts_.push_back(amount);
  epoch_weighted_ = 0;
  epoch_known_s_ = 0;
  return amount;
}

std::string_view GridLimits::unit() const {
  return grid_.kind == grid::SignalKind::kCarbonIntensity ? "gCO2eq" : "$";
}

void GridLimits::fill(contract::TrainResult& r) const {
  contract::GridSummary g;
  const bool carbon = grid_.kind == grid::SignalKind::kCarbonIntensity;
  g.signal = carbon ? "carbon_intensity" : "electricity_price";
  g.unit = unit();
  g.source = source_;
  g.signal_max = grid_.signal_max;
  for (size_t i = 0; i < epoch_amounts_.size() && i < r.epochs.size(); ++i) {
    r.epochs[i].grid_amount = epoch_amounts_[i];
    g.amount += epoch_amounts_[i].value_or(0.0);
  }
  g.estimated_saving = saving_;
  g.estimated_time_saving_s = saving_s_;
  g.provider_failures = failures_;
  g.followed = follower_ != nullptr;
  g.choices = choices_;
  r.grid = std::move(g);
}

}  // namespace zeus::job
