#include "zeus/grid/poller.h"

#include <fmt/format.h>

#include <algorithm>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::grid {

SignalPoller::SignalPoller(std::unique_ptr<SignalProvider> provider, PollerOptions options,
                           bool start)
    : provider_(std::move(provider)),
      options_(std::move(options)),
      kind_(provider_->kind()),
      describe_(provider_->describe()) {
  if (start) {
    thread_ = std::thread([this] { run(); });
  }
}

SignalPoller::~SignalPoller() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

std::optional<PolledSignal> SignalPoller::latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

int64_t SignalPoller::reads() const {
  std::lock_guard lock(mu_);
  return reads_;
}

int64_t SignalPoller::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}

void SignalPoller::read_forecast(SignalReading& reading, Clock::time_point now) {
  try {
    reading.forecast = provider_->forecast(now, options_.forecast_horizon);
    forecast_failing_ = false;
  } catch (const Error& e) {
    if (!forecast_failing_) {
      logger().warn("{}: no forecast ({}); the rule goes by the value now", describe_, e.what());
      forecast_failing_ = true;
    }
  }
}

void SignalPoller::read_reference(SignalReading& reading, Clock::time_point now) {
  // The readings' own mean first (it needs this reading): offsets from the first value, so that
  // readings of one value average to it exactly.
  if (held_) {
    const double s = std::max(0.0, std::chrono::duration<double>(now - held_->first).count());
    held_weighted_ += held_->second * s;
    held_s_ += s;
  }
  held_ = {now, reading.value};
  std::optional<double> ref;
  try {
    ref = provider_->history_mean(now, options_.reference_window);
    if (!ref) {
      ref = provider_->forecast(now, options_.reference_window);
    }
    reference_failing_ = false;
  } catch (const Error& e) {
    if (!reference_failing_) {
      logger().warn(
          "{}: no history or forecast for the grid's reference ({}); the mean of the "
          "readings so far serves",
          describe_, e.what());
      reference_failing_ = true;
    }
  }
  reading.reference = ref ? *ref : held_s_ > 0 ? held_weighted_ / held_s_ : reading.value;
}

bool SignalPoller::poll_once() {
  const Clock::time_point now = options_.now();
  std::optional<SignalReading> reading;
  std::string error;
  {
    std::lock_guard provider_lock(provider_mu_);
    try {
      reading = provider_->read(now);
      if (options_.forecast_horizon > Clock::duration::zero()) {
        read_forecast(*reading, now);
      }
      if (options_.reference_window > Clock::duration::zero()) {
        read_reference(*reading, now);
      }
    } catch (const Error& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = fmt::format("unexpected error: {}", e.what());
    }
  }
  std::lock_guard lock(mu_);
  ++reads_;
  if (reading) {
    if (failing_) {
      logger().info("{} answers again ({} {} now)", describe_, reading->value, unit(kind_));
      failing_.reset();
    }
    latest_ = PolledSignal{*reading, now, std::nullopt, {}};
    return true;
  }
  ++failures_;
  if (!failing_) {
    failing_ = error;
    failing_since_ = now;
    if (latest_) {
      logger().warn(
          "{} failed: {}; training goes on with the last value, {} {} read at {}, until it "
          "answers again",
          describe_, error, latest_->reading.value, unit(kind_), format_iso8601(latest_->read_at));
    } else {
      logger().warn(
          "{} failed: {}; training goes on without a {} (Zeus's fixed choice) until it "
          "answers",
          describe_, error, to_string(kind_));
    }
  }
  if (latest_) {
    latest_->error = error;
    latest_->failing_since = failing_since_;
  }
  return false;
}

void SignalPoller::run() {
  while (true) {
    poll_once();
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, options_.period, [this] { return stop_; })) {
      return;
    }
  }
}

}  // namespace zeus::grid
