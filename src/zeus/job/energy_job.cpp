#include "zeus/job/energy_job.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/units.h"
#include "zeus/device/discovery.h"
#include "zeus/device/power_limit_guard.h"
#include "zeus/device/power_limit_journal.h"
#include "zeus/device/sim/sim_gpu_set.h"
#include "zeus/monitor/energy_monitor.h"
#include "zeus/monitor/power_monitor.h"
#include "zeus/optimize/early_stop.h"
#include "zeus/optimize/power_limit_profiler.h"

namespace zeus::job {

using Clock = std::chrono::steady_clock;
namespace ps = optimize::profiler_state;

namespace {

int64_t unix_ns_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One line on stderr, redrawn in place at most every 200 ms (global master, TTY only).
class ProgressBar {
 public:
  void step(int epoch, int max_epochs, std::string_view split, int64_t done, int64_t total,
            int64_t samples_per_step, const std::function<double()>& power_w,
            const std::function<std::string()>& phase) {
    const auto now = Clock::now();
    if (done != total && now - last_draw_ < std::chrono::milliseconds(200)) {
      return;
    }
    if (done == 1 || rate_t0_ == Clock::time_point{}) {
      rate_t0_ = now;
      rate_done0_ = done;
    }
    last_draw_ = now;
    const double dt = std::chrono::duration<double>(now - rate_t0_).count();
    const double rate =
        dt > 0 ? static_cast<double>((done - rate_done0_) * samples_per_step) / dt : 0;
    const int width = 24;
    const int filled = total > 0 ? static_cast<int>(width * done / total) : 0;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r\033[Kepoch %d/%d %s [%s] %lld/%lld  %.0f samples/s  %.0f W  %s",
                 epoch + 1, max_epochs, std::string(split).c_str(), bar.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total), rate, power_w(),
                 phase().c_str());
    if (done == total) {
      std::fputc('\n', stderr);
      rate_t0_ = {};
    }
  }

 private:
  Clock::time_point last_draw_{};
  Clock::time_point rate_t0_{};
  int64_t rate_done0_ = 0;
};

}  // namespace

class EnergyJob::Impl final : public optimize::ProfilerHost {
 public:
  Impl(ResolvedJobOptions options, Collectives& collectives)
      : o_(std::move(options)), coll_(collectives), ranks_(collectives.ranks()) {
    agree("opening the GPUs", [&] { open_devices(); });
    // The master's view of the limit range decides the candidates on every rank.
    std::vector<double> range{0, 0};
    if (ranks_.is_master()) {
      range = {static_cast<double>(range_.min_mw), static_cast<double>(range_.max_mw)};
    }
    coll_.broadcast(range, 0);
    range_ = {static_cast<int64_t>(range[0]), static_cast<int64_t>(range[1])};
    current_limit_mw_ = range_.max_mw;
    cost_.emplace(o_.eta, static_cast<double>(range_.max_mw) / 1000.0 * ranks_.world_size);
    optimize::ProfilerOptions popts;
    popts.warmup_iters = o_.warmup_iters;
    popts.profile_iters = o_.profile_iters;
    popts.step_mw = o_.power_limit_step_mw;
    popts.selector = o_.selector;
    popts.use_optimal_limit = !o_.observer_mode;
    profiler_ = std::make_unique<optimize::PowerLimitProfiler>(range_, *cost_, popts, *this);
    load_saved_profile();
    if (ranks_.is_master()) {
      if (profile_loaded_) {
        logger().info(
            "loaded {}: optimal limit {} W; profiling skipped (delete the file to profile again)",
            optimize::power_profile_path(o_.log_dir, o_.global_batch_size).string(),
            *profiler_->optimal_limit_mw() / 1000);
      } else {
        logger().info(
            "will profile {} power limits ({}..{} W), {} warmup + {} profiling iterations each, "
            "global batch size {} on {} rank(s)",
            profiler_->candidates_mw().size(), range_.max_mw / 1000, range_.min_mw / 1000,
            o_.warmup_iters, o_.profile_iters, o_.global_batch_size, ranks_.world_size);
      }
    }
    progress_on_ = o_.progress_bar && ranks_.is_master();
  }

  // --- ProfilerHost (called on every rank at the same step) ---
  void set_power_limit_mw(int64_t limit_mw) override {
    current_limit_mw_ = limit_mw;
    if (guard_) {
      for (int gpu : owned_) {
        guard_->set_power_limit_mw(gpu, limit_mw);
      }
    }
  }

  void begin_window() override {
    sync_point([&] {
      window_t0_ = now();
      window_begin_unix_ns_ = unix_ns_now();
      if (energy_) {
        energy_->begin_window("profile");
      }
    });
  }

  optimize::WindowMeasurement end_window() override {
    barrier();
    std::vector<double> v(static_cast<size_t>(ranks_.world_size) + 1, 0.0);
    v[static_cast<size_t>(ranks_.rank)] = to_seconds(now() - window_t0_);
    if (energy_) {
      v.back() = energy_->end_window("profile").total_energy_j();
    }
    coll_.all_reduce_sum(v);  // also keeps every rank out of its next step until all have read
    const double elapsed = *std::max_element(v.begin(), v.end() - 1);
    if (!profiler_->done()) {  // a train profiling window, not the eval one at the optimum
      windows_.push_back({epoch_, current_limit_mw_, window_begin_unix_ns_, unix_ns_now()});
    }
    if (ranks_.is_master()) {
      logger().debug("window at {} W: {:.3f} s, {:.1f} J", current_limit_mw_ / 1000, elapsed,
                     v.back());
    }
    return {std::chrono::duration<double>(elapsed), v.back()};
  }

  // --- the epoch protocol ---
  std::optional<int> next_epoch() {
    if (result_) {
      return std::nullopt;
    }
    close_open_phases();
    if (epoch_ >= 0) {
      aggregate_epoch();
    }
    // The master decides; everyone obeys the broadcast.
    enum Code { kContinue = 0, kTarget = 1, kMax = 2, kCost = 3 };
    std::vector<double> d(6, 0.0);
    optimize::EpochForecast forecast;
    if (ranks_.is_master()) {
      d[0] = kContinue;
      if (reached()) {
        d[0] = kTarget;
      } else if (epoch_ + 1 >= o_.max_epochs) {
        d[0] = kMax;
      } else if (epoch_ >= 0 && profiler_->done()) {
        forecast = optimize::forecast_next_epoch(*cost_, forecast_inputs());
        if (forecast.predicted_cost >= o_.cost_threshold) {
          d[0] = kCost;
        }
      }
      d[1] = forecast.next_time_s;
      d[2] = forecast.next_energy_j;
      d[3] = forecast.cost_so_far;
      d[4] = forecast.predicted_cost;
      d[5] = metric_.value_or(std::nan(""));
    }
    coll_.broadcast(d, 0);
    if (!records_.empty() && !std::isnan(d[5])) {
      records_.back().metric = d[5];
    }
    const int code = static_cast<int>(d[0]);
    if (code == kContinue) {
      ++epoch_;
      metric_.reset();
      return epoch_;
    }
    forecast = {d[1], d[2], d[3], d[4]};
    finish(code == kTarget ? StopReason::kTargetReached
           : code == kMax  ? StopReason::kMaxEpochs
                           : StopReason::kCostThreshold);
    if (code == kCost) {
      throw optimize::CostThresholdExceeded(forecast, total_energy_j_, total_time_s_,
                                            o_.cost_threshold);
    }
    return std::nullopt;
  }

  void begin_train_epoch(int64_t iterations) {
    close_open_phases();
    if (epoch_ < 0) {
      throw ConfigError(
          "a train epoch began outside epochs(): iterate the train loader inside `for (int "
          "epoch : train_loader.epochs())`");
    }
    open_loop(train_, Phase::kTrain, iterations);
    profiler_->on_epoch_begin(iterations);
  }

  void train_step_begin() { profiler_->on_step_begin(); }

  void train_step_end() {
    if (sim_) {
      sim_->run_iterations(ranks_.local_rank, 1);
    }
    ++train_.done;
    if (profiler_->done()) {
      ++iters_after_profiling_;
    }
    profiler_->on_step_end();
    if (progress_on_) {
      draw_progress("train", train_);
    }
  }

  void end_train_epoch() {
    if (phase_ != Phase::kTrain) {
      return;
    }
    profiler_->on_epoch_end();
    close_loop(train_);
  }

  void begin_eval_epoch(int64_t iterations) {
    close_open_phases();
    if (epoch_ < 0) {
      return;  // evaluating before training: not part of the job
    }
    open_loop(eval_, Phase::kEval, iterations);
    profiler_->on_eval_begin();
  }

  void eval_step_end() {
    if (phase_ != Phase::kEval) {
      return;
    }
    if (sim_) {
      sim_->run_iterations(ranks_.local_rank, 1);
    }
    ++eval_.done;
    if (progress_on_) {
      draw_progress("eval ", eval_);
    }
  }

  void end_eval_epoch() {
    if (phase_ != Phase::kEval) {
      return;
    }
    profiler_->on_eval_end(eval_.done);
    close_loop(eval_);
    save_profile(/*need_eval=*/true);
  }

  void report_metric(double metric) { metric_ = metric; }

  const ResolvedJobOptions& options() const { return o_; }
  RankInfo ranks() const { return ranks_; }
  bool profiling_done() const { return profiler_->done(); }
  std::optional<int64_t> optimal_power_limit_mw() const { return profiler_->optimal_limit_mw(); }
  int64_t current_power_limit_mw() const { return current_limit_mw_; }
  const std::optional<TrainResult>& result() const { return result_; }

 private:
  enum class Phase { kBetween, kTrain, kEval };

  // The train or the eval loops of the current epoch: the loop in progress (steps done of
  // total), and over the epoch's loops this rank's time and, on the local master, the node's
  // energy.
  struct LoopTally {
    const char* window;  // the EnergyMonitor window
    int64_t total = 0;
    int64_t done = 0;
    std::chrono::nanoseconds t0{0};
    double elapsed_s = 0;
    double energy_j = 0;
    int64_t iterations = 0;
  };

  void open_loop(LoopTally& loop, Phase phase, int64_t iterations) {
    if (!epoch_log_) {
      start_epoch_log();
    }
    sync_point([&] {
      set_sim_busy(true);
      loop.t0 = now();
      if (energy_) {
        energy_->begin_window(loop.window);
      }
    });
    phase_ = phase;
    loop.total = iterations;
    loop.done = 0;
  }

  void close_loop(LoopTally& loop) {
    sync_point([&] {
      loop.elapsed_s += to_seconds(now() - loop.t0);
      set_sim_busy(false);
      if (energy_) {
        loop.energy_j += energy_->end_window(loop.window).total_energy_j();
      }
    });
    loop.iterations += loop.done;
    phase_ = Phase::kBetween;
  }

  // The rank's clock: its simulated GPU's virtual time, or the machine's monotonic clock.
  std::chrono::nanoseconds now() {
    if (sim_ && o_.sim_clock == device::sim::SimClock::kVirtual) {
      return sim_->now(ranks_.local_rank);
    }
    return Clock::now().time_since_epoch();
  }

  // A simulated GPU draws the trace's power at its limit while its rank is inside a train or
  // eval loop, so the per-epoch power logs show what a real GPU's would (virtual time advances
  // only per step; the sampler runs on the machine's clock).
  void set_sim_busy(bool busy) {
    if (sim_) {
      sim_->set_busy(ranks_.local_rank, busy);
    }
  }

  void barrier() {
    std::vector<double> one{0.0};
    coll_.all_reduce_sum(one);
  }

  // Every rank finished its preceding work before `read` runs, and none starts new work before
  // every rank's `read` ran (so a window's energy holds exactly its steps).
  void sync_point(const std::function<void()>& read) {
    barrier();
    read();
    barrier();
  }

  // Runs `step` on every rank; if it failed anywhere, every rank throws (the failing rank its own
  // error), so no rank is left waiting in a collective.
  void agree(std::string_view what, const std::function<void()>& step) {
    std::exception_ptr error;
    try {
      step();
    } catch (...) {
      error = std::current_exception();
    }
    std::vector<double> failed(static_cast<size_t>(ranks_.world_size), 0.0);
    failed[static_cast<size_t>(ranks_.rank)] = error ? 1.0 : 0.0;
    coll_.all_reduce_sum(failed);
    if (error) {
      std::rethrow_exception(error);
    }
    for (int r = 0; r < ranks_.world_size; ++r) {
      if (failed[static_cast<size_t>(r)] != 0) {
        throw ConfigError(fmt::format(
            "{} failed on rank {} (its error is in its output); stopping before training", what,
            r));
      }
    }
  }

  void open_devices() {
    const bool is_sim = o_.device.rfind("sim:", 0) == 0;
    if (is_sim) {
      device::sim::SimGpuSetOptions so = device::sim::parse_sim_spec(o_.device);
      so.clock = o_.sim_clock;
      so.gpu_count = std::max(so.gpu_count, ranks_.local_world_size);
      so.gpu_count_from_state = false;
      if (so.state_path.empty()) {
        // One state per node and spec, so that ranks share their GPUs' limits and energy.
        so.state_path =
            o_.log_dir / fmt::format(".sim-node{}-{}x{}-{}.state", ranks_.node_rank, so.gpu_count,
                                     so.gpu_model, std::hash<std::string>{}(o_.device) % 1000000);
      }
      std::filesystem::create_directories(so.state_path.parent_path());
      auto sim = std::make_unique<device::sim::SimGpuSet>(std::move(so));
      sim_ = sim.get();
      gpus_ = std::move(sim);
    } else if (ranks_.is_local_master()) {
      gpus_ = device::open_gpu_set(o_.device, {});
    }
    if (!ranks_.is_local_master()) {
      return;  // only the node's local master controls and measures its GPUs
    }
    const int owned = std::min(gpus_->count(), ranks_.local_world_size);
    if (owned < ranks_.local_world_size) {
      logger().warn(
          "this node runs {} ranks but its local master sees {} GPU(s) (CUDA_VISIBLE_DEVICES?); "
          "only those are measured and limited",
          ranks_.local_world_size, gpus_->count());
    }
    for (int g = 0; g < owned; ++g) {
      owned_.push_back(g);
    }
    range_ = gpus_->power_limit_constraints_mw(0);
    for (int g : owned_) {
      const auto r = gpus_->power_limit_constraints_mw(g);
      if (r.min_mw != range_.min_mw || r.max_mw != range_.max_mw) {
        throw ConfigError(fmt::format(
            "GPU {} ({}) has power-limit range {}-{} W but GPU 0 has {}-{} W; zeus::DataLoader "
            "needs identical GPUs on a node",
            g, gpus_->name(g), r.min_mw / 1000, r.max_mw / 1000, range_.min_mw / 1000,
            range_.max_mw / 1000));
      }
    }
    std::filesystem::create_directories(o_.log_dir);
    guard_ = std::make_unique<device::PowerLimitGuard>(
        *gpus_, device::PowerLimitGuardOptions{
                    .journal_path = o_.log_dir / device::journal_file_name(ranks_.node_rank)});
    monitor::EnergyMonitorOptions energy_options{.gpus = owned_};
    if (sim_ != nullptr) {
      energy_options.counter_resolution = std::chrono::nanoseconds(0);  // exact, not 100 ms steps
    }
    energy_ = std::make_unique<monitor::EnergyMonitor>(*gpus_, energy_options);
  }

  // The master loads bs{B}.power.json and shares it; a corrupt file stops every rank.
  void load_saved_profile() {
    std::optional<optimize::PowerProfile> profile;
    agree("loading the saved power profile", [&] {
      if (ranks_.is_master()) {
        profile = optimize::load_power_profile(
            optimize::power_profile_path(o_.log_dir, o_.global_batch_size));
        if (profile && profile->global_batch_size != o_.global_batch_size) {
          throw ConfigError(
              fmt::format("{} is for global batch size {}, not {}; delete it to profile again",
                          optimize::power_profile_path(o_.log_dir, o_.global_batch_size).string(),
                          profile->global_batch_size, o_.global_batch_size));
        }
      }
    });
    // Flattened: count, (limit, throughput, power) per limit, eval throughput and power (NaN
    // when absent).
    std::vector<double> head{profile ? static_cast<double>(profile->train.size()) : -1.0};
    coll_.broadcast(head, 0);
    if (head[0] < 0) {
      return;
    }
    const auto n = static_cast<size_t>(head[0]);
    std::vector<double> flat(3 * n + 2, std::nan(""));
    if (profile) {
      size_t i = 0;
      for (const auto& [mw, m] : profile->train) {
        flat[i++] = static_cast<double>(mw);
        flat[i++] = m.throughput_ips;
        flat[i++] = m.power_w;
      }
      flat[i++] = profile->eval_throughput_ips.value_or(std::nan(""));
      flat[i] = profile->eval_power_w.value_or(std::nan(""));
    }
    coll_.broadcast(flat, 0);
    optimize::PowerProfile p;
    p.global_batch_size = o_.global_batch_size;
    for (size_t i = 0; i < n; ++i) {
      const auto mw = static_cast<int64_t>(flat[3 * i]);
      p.train[mw] = {mw, flat[3 * i + 1], flat[3 * i + 2]};
    }
    if (!std::isnan(flat[3 * n])) {
      p.eval_throughput_ips = flat[3 * n];
      p.eval_power_w = flat[3 * n + 1];
    }
    profiler_->load(p);
    profile_loaded_ = true;
  }

  // Once profiling is done: when `need_eval`, only after the eval epoch at the optimum was
  // measured too; otherwise (the job ends) with what it has. The master writes the file.
  void save_profile(bool need_eval) {
    if (profile_loaded_ || profile_saved_ || !profiler_->done()) {
      return;
    }
    optimize::PowerProfile p = profiler_->profile(o_.global_batch_size);
    if (need_eval && !p.eval_throughput_ips) {
      return;  // the eval epoch at the optimum is measured next
    }
    profile_saved_ = true;
    if (ranks_.is_master()) {
      p.job_id = o_.job_id;
      const auto path = optimize::power_profile_path(o_.log_dir, o_.global_batch_size);
      optimize::save_power_profile(path, p);
      logger().info("saved {}: optimal limit {} W", path.string(), p.optimal_power_limit_mw / 1000);
    }
  }

  void start_epoch_log() {
    if (!ranks_.is_local_master() || !gpus_) {
      return;
    }
    std::vector<std::filesystem::path> paths;
    for (int g : owned_) {
      paths.push_back(o_.log_dir / fmt::format("bs{}+e{}+gpu{}.power.log", o_.global_batch_size,
                                               epoch_,
                                               ranks_.node_rank * ranks_.local_world_size + g));
    }
    epoch_log_ = std::make_unique<monitor::PowerMonitor>(
        gpus_.get(), monitor::PowerMonitorOptions{
                         .gpus = owned_, .period = o_.monitor_period, .csv_paths = paths});
    epoch_log_->start();
  }

  void close_open_phases() {
    end_train_epoch();
    end_eval_epoch();
  }

  void aggregate_epoch() {
    const auto w = static_cast<size_t>(ranks_.world_size);
    const auto r = static_cast<size_t>(ranks_.rank);
    std::vector<double> v(2 * w + 2, 0.0);
    v[r] = train_.elapsed_s;
    v[w + r] = eval_.elapsed_s;
    if (ranks_.is_local_master()) {
      v[2 * w] = train_.energy_j;
      v[2 * w + 1] = eval_.energy_j;
    }
    coll_.all_reduce_sum(v);
    EpochRecord rec;
    rec.epoch = epoch_;
    rec.train_iterations = train_.iterations;
    rec.eval_iterations = eval_.iterations;
    rec.train_time_s = *std::max_element(v.begin(), v.begin() + static_cast<long>(w));
    rec.eval_time_s =
        *std::max_element(v.begin() + static_cast<long>(w), v.begin() + static_cast<long>(2 * w));
    rec.train_energy_j = v[2 * w];
    rec.eval_energy_j = v[2 * w + 1];
    rec.power_limit_mw = current_limit_mw_;
    total_time_s_ += rec.train_time_s + rec.eval_time_s;
    total_energy_j_ += rec.train_energy_j + rec.eval_energy_j;
    records_.push_back(rec);
    train_ = {"train"};
    eval_ = {"eval"};
    epoch_log_.reset();
    if (ranks_.is_master()) {
      logger().info(
          "epoch {}: train {:.2f} s, eval {:.2f} s, energy {:.1f} J, limit {} W{}; job so far "
          "{:.1f} J, {:.2f} s, cost {:.1f}",
          rec.epoch + 1, rec.train_time_s, rec.eval_time_s, rec.train_energy_j + rec.eval_energy_j,
          rec.power_limit_mw / 1000, metric_ ? fmt::format(", metric {:.4f}", *metric_) : "",
          total_energy_j_, total_time_s_, cost_->cost(total_energy_j_, total_time_s_));
    }
  }

  bool reached() const {
    if (!metric_) {
      return false;
    }
    return o_.higher_is_better ? *metric_ >= o_.target_metric : *metric_ <= o_.target_metric;
  }

  // The last epoch's lengths and the profile's numbers at the limit the job runs at.
  optimize::EpochForecastInputs forecast_inputs() const {
    optimize::EpochForecastInputs in;
    in.energy_so_far_j = total_energy_j_;
    in.time_so_far_s = total_time_s_;
    in.train_iters_per_epoch = records_.back().train_iterations;
    in.eval_iters_per_epoch = records_.back().eval_iterations;
    const optimize::PowerProfile p = profiler_->profile(o_.global_batch_size);
    const auto it = p.train.find(current_limit_mw_);
    const optimize::LimitMeasurement m =
        it != p.train.end() ? it->second : p.train.at(p.optimal_power_limit_mw);
    in.train_throughput_ips = m.throughput_ips;
    in.train_power_w = m.power_w;
    in.eval_throughput_ips = p.eval_throughput_ips.value_or(m.throughput_ips);
    in.eval_power_w = p.eval_power_w.value_or(m.power_w);
    return in;
  }

  void finish(StopReason reason) {
    TrainResult r;
    r.energy_j = total_energy_j_;
    r.time_s = total_time_s_;
    r.cost = cost_->cost(total_energy_j_, total_time_s_);
    r.num_epochs = static_cast<int>(records_.size());
    r.reached = reason == StopReason::kTargetReached;
    r.job_id = o_.job_id;
    r.global_batch_size = o_.global_batch_size;
    r.world_size = ranks_.world_size;
    r.nodes = ranks_.world_size / std::max(1, ranks_.local_world_size);
    r.device = gpus_ ? gpus_->locator() : o_.device;
    r.eta = o_.eta;
    r.max_power_w = cost_->max_power_w();
    r.cost_threshold = o_.cost_threshold;
    r.target_metric = o_.target_metric;
    r.stop_reason = reason;
    r.observer_mode = o_.observer_mode;
    r.profiled = !profile_loaded_;
    r.max_power_limit_mw = range_.max_mw;
    r.epochs = records_;
    r.windows = windows_;
    if (profiler_->done()) {
      r.optimal_power_limit_mw = profiler_->optimal_limit_mw();
      const auto p = profiler_->profile(o_.global_batch_size);
      const auto at_max = p.train.find(range_.max_mw);
      const auto at_opt = p.train.find(p.optimal_power_limit_mw);
      if (at_max != p.train.end() && at_opt != p.train.end()) {
        const auto n = static_cast<double>(iters_after_profiling_);
        const auto& mx = at_max->second;
        const auto& op = at_opt->second;
        r.estimated_energy_saving_j =
            n * (mx.power_w / mx.throughput_ips - op.power_w / op.throughput_ips);
        r.estimated_time_saving_s = n * (1.0 / mx.throughput_ips - 1.0 / op.throughput_ips);
      }
    }
    result_ = r;
    epoch_log_.reset();
    save_profile(/*need_eval=*/false);
    if (ranks_.is_master()) {
      const auto path = train_result_path(o_.log_dir, o_.job_id, o_.global_batch_size);
      save_train_result(path, r);
      logger().info("saved {}", path.string());
      std::fprintf(stderr, "zeus: %s\n", summary_line(r).c_str());
      std::fflush(stderr);
    }
    if (guard_) {
      guard_->restore();
    }
  }

  void draw_progress(std::string_view split, const LoopTally& loop) {
    progress_.step(
        epoch_, o_.max_epochs, split, loop.done, loop.total, o_.global_batch_size,
        [&] {
          double w = 0;
          if (gpus_) {
            for (int g : owned_) {
              w += static_cast<double>(gpus_->power_mw(g)) / 1000.0;
            }
          }
          return w;
        },
        [&] { return phase_text(); });
  }

  std::string phase_text() const {
    const auto& state = profiler_->state();
    const int64_t w = current_limit_mw_ / 1000;
    if (std::holds_alternative<ps::Warmup>(state)) {
      return fmt::format("warmup {} W", w);
    }
    if (std::holds_alternative<ps::Profiling>(state)) {
      return fmt::format("profiling {} W", w);
    }
    if (std::holds_alternative<ps::Ready>(state)) {
      return fmt::format("profiling (next limit) {} W", w);
    }
    return fmt::format("{} {} W", o_.observer_mode ? "observer, at" : "optimal", w);
  }

  ResolvedJobOptions o_;
  Collectives& coll_;
  RankInfo ranks_;
  std::unique_ptr<device::GpuSet> gpus_;
  device::sim::SimGpuSet* sim_ = nullptr;
  std::vector<int> owned_;
  std::unique_ptr<device::PowerLimitGuard> guard_;
  std::unique_ptr<monitor::EnergyMonitor> energy_;
  std::unique_ptr<monitor::PowerMonitor> epoch_log_;  // this epoch's (local master)
  device::PowerLimitRange range_;
  std::optional<optimize::CostModel> cost_;
  std::unique_ptr<optimize::PowerLimitProfiler> profiler_;
  bool profile_loaded_ = false;
  bool profile_saved_ = false;
  int64_t current_limit_mw_ = 0;

  int epoch_ = -1;
  Phase phase_ = Phase::kBetween;
  LoopTally train_{"train"};
  LoopTally eval_{"eval"};
  std::chrono::nanoseconds window_t0_{0};
  int64_t window_begin_unix_ns_ = 0;
  std::optional<double> metric_;
  double total_energy_j_ = 0;
  double total_time_s_ = 0;
  int64_t iters_after_profiling_ = 0;
  std::vector<EpochRecord> records_;
  std::vector<WindowRecord> windows_;
  std::optional<TrainResult> result_;
  bool progress_on_ = false;
  ProgressBar progress_;
};

EnergyJob::EnergyJob(ResolvedJobOptions options, Collectives& collectives)
    : impl_(std::make_unique<Impl>(std::move(options), collectives)) {}
EnergyJob::~EnergyJob() = default;
std::optional<int> EnergyJob::next_epoch() {
  return impl_->next_epoch();
}
void EnergyJob::begin_train_epoch(int64_t iterations) {
  impl_->begin_train_epoch(iterations);
}
void EnergyJob::train_step_begin() {
  impl_->train_step_begin();
}
void EnergyJob::train_step_end() {
  impl_->train_step_end();
}
void EnergyJob::end_train_epoch() {
  impl_->end_train_epoch();
}
void EnergyJob::begin_eval_epoch(int64_t iterations) {
  impl_->begin_eval_epoch(iterations);
}
void EnergyJob::eval_step_end() {
  impl_->eval_step_end();
}
void EnergyJob::end_eval_epoch() {
  impl_->end_eval_epoch();
}
void EnergyJob::report_metric(double metric) {
  impl_->report_metric(metric);
}
const ResolvedJobOptions& EnergyJob::options() const {
  return impl_->options();
}
RankInfo EnergyJob::ranks() const {
  return impl_->ranks();
}
bool EnergyJob::profiling_done() const {
  return impl_->profiling_done();
}
std::optional<int64_t> EnergyJob::optimal_power_limit_mw() const {
  return impl_->optimal_power_limit_mw();
}
int64_t EnergyJob::current_power_limit_mw() const {
  return impl_->current_power_limit_mw();
}
const std::optional<TrainResult>& EnergyJob::result() const {
  return impl_->result();
}

}  // namespace zeus::job
