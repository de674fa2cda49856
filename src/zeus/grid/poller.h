// Reads a provider on a thread of its own, so that a provider that hangs, fails or answers
// garbage never holds up training: the reader gets the last good value and since when it is
// the last. A failure is logged once (and its recovery once), never thrown at the reader.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "zeus/grid/signal.h"

namespace zeus::grid {

struct PollerOptions {
  // Between two reads; the first read starts at once.
  std::chrono::milliseconds period{300'000};
  // The clock the provider is asked about (a trace's row of "now"); the wall by default. Tests
  // and replays pass their own.
  std::function<Clock::time_point()> now = [] { return Clock::now(); };
  // Each read also asks the provider's forecast of the mean over [now, now + this) (the rule's
  // interval); zero: none. A provider without one, or whose forecast fails (logged once), gives
  // readings without it.
  Clock::duration forecast_horizon{};
  // Each read also gives the grid's own reference (SignalReading::reference) over this window
  // (kReferenceWindow); zero: none.
  Clock::duration reference_window{};
};

struct PolledSignal {
  SignalReading reading;             // the last good one
  Clock::time_point read_at;         // when it was read (the poller's `now`)
  std::optional<std::string> error;  // set while the provider fails: what it said
  Clock::time_point failing_since;   // when it began to fail (with `error`)
};

// Contract: latest() and poll_once() are thread-safe; the destructor stops the thread (waiting at
// most for the read in flight, bounded by the provider's timeout).
class SignalPoller {
 public:
  // start = false: no thread; the owner calls poll_once() (tests, the simulator).
  SignalPoller(std::unique_ptr<SignalProvider> provider, PollerOptions options, bool start = true);
  ~SignalPoller();
  SignalPoller(const SignalPoller&) = delete;
  SignalPoller& operator=(const SignalPoller&) = delete;

  // The last good reading, or std::nullopt before the first one.
  std::optional<PolledSignal> latest() const;
  // Reads the provider now (on the caller's thread); false when it failed.
  bool poll_once();
  SignalKind kind() const { return kind_; }
  const std::string& describe() const { return describe_; }
  // Reads done and failed, for tests and the train result.
  int64_t reads() const;
  int64_t failures() const;

 private:
  void run();
  // Under provider_mu_.
  void read_forecast(SignalReading& reading, Clock::time_point now);
  // Under provider_mu_: the provider's history over the window, else its forecast of the next
  // one, else the mean of this poller's readings so far (each held until the next).
  void read_reference(SignalReading& reading, Clock::time_point now);

  std::unique_ptr<SignalProvider> provider_;
  PollerOptions options_;
  SignalKind kind_;
  std::string describe_;
  std::mutex provider_mu_;  // one read at a time
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<PolledSignal> latest_;
  std::optional<std::string> failing_;  // the error logged, while failing
  bool forecast_failing_ = false;       // its failure logged
  bool reference_failing_ = false;      // under provider_mu_: its failure logged
  // Under provider_mu_: the readings so far, each weighed by how long it held (the last one
  // counted until now), for the reference of a provider without history or forecast.
  std::optional<std::pair<Clock::time_point, double>> held_;
  double held_weighted_ = 0;
  double held_s_ = 0;
  Clock::time_point failing_since_{};
  int64_t reads_ = 0;
  int64_t failures_ = 0;
  std::thread thread_;
};

}  // namespace zeus::grid
