#include "zeus/daemon/power_streams.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "zeus/common/logging.h"
#include "zeus/common/units.h"

namespace zeus::daemon {

// Reads one device; returns the event's JSON when it should be published (a change, or the
// first reading), std::nullopt otherwise. Called by the poller only, for a device with
// subscribers; `reset` forgets what it knew when the last subscriber left.
struct DeviceReader {
  std::function<std::optional<std::string>(int id)> read;
  std::function<void(int id)> reset;
};

struct PowerStreams::Hub {
  std::string kind;  // "GPU", "CPU": for logs
  DeviceReader reader;
  std::chrono::nanoseconds period;
  mutable std::mutex mu;
  std::condition_variable changed;  // subscribers wait here for events
  std::condition_variable wanted;   // the poller waits here for subscribers
  struct Device {
    int subscribers = 0;
    uint64_t seq = 0;  // bumped with each published event
    std::string event;
  };
  std::vector<Device> devices;
  int subscribers = 0;
  bool stop = false;
  std::thread poller;

  Hub(std::string k, DeviceReader r, int count, double hz)
      : kind(std::move(k)),
        reader(std::move(r)),
        period(std::chrono::nanoseconds(static_cast<int64_t>(1e9 / (hz > 0 ? hz : 1)))),
        devices(static_cast<size_t>(count)) {
    poller = std::thread([this] { poll_loop(); });
  }

  ~Hub() {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    wanted.notify_all();
    changed.notify_all();
    poller.join();
  }

  void poll_loop() {
    std::unique_lock lock(mu);
    while (!stop) {
      wanted.wait(lock, [&] { return stop || subscribers > 0; });
      if (stop) {
        break;
      }
      const auto tick = std::chrono::steady_clock::now();
      std::vector<int> ids;
      for (size_t i = 0; i < devices.size(); ++i) {
        if (devices[i].subscribers > 0) {
          ids.push_back(static_cast<int>(i));
        }
      }
      lock.unlock();  // device reads take time; subscribers come and go meanwhile
      std::vector<std::pair<int, std::string>> events;
      for (const int id : ids) {
        try {
          if (auto e = reader.read(id)) {
            events.emplace_back(id, std::move(*e));
          }
        } catch (const std::exception& e) {
          logger().warn("zeusd: reading {} {} power for a stream failed: {}", kind, id, e.what());
        }
      }
      lock.lock();
      for (auto& [id, event] : events) {
        Device& d = devices[static_cast<size_t>(id)];
        if (d.subscribers > 0) {
          d.event = std::move(event);
          ++d.seq;
        }
      }
      if (!events.empty()) {
        changed.notify_all();
      }
      wanted.wait_until(lock, tick + period, [&] { return stop; });
    }
  }

  void add(const std::vector<int>& ids) {
    std::lock_guard lock(mu);
    for (const int id : ids) {
      ++devices[static_cast<size_t>(id)].subscribers;
    }
    ++subscribers;
    wanted.notify_all();
  }

  void remove(const std::vector<int>& ids) {
    std::lock_guard lock(mu);
    for (const int id : ids) {
      Device& d = devices[static_cast<size_t>(id)];
      if (--d.subscribers == 0) {
        d.event.clear();  // a later subscriber must not get a stale value
        ++d.seq;
        reader.reset(id);
      }
    }
    --subscribers;
  }
};

namespace {

class Subscription final : public http::Stream {
 public:
  Subscription(PowerStreams::Hub& hub, std::vector<int> ids) : hub_(hub), ids_(std::move(ids)) {
    hub_.add(ids_);
    seen_.assign(ids_.size(), 0);
  }
  ~Subscription() override { hub_.remove(ids_); }

  std::optional<std::string> next(std::chrono::milliseconds wait) override {
    std::unique_lock lock(hub_.mu);
    const auto fresh = [&] {
      for (size_t k = 0; k < ids_.size(); ++k) {
        const auto& d = hub_.devices[static_cast<size_t>(ids_[k])];
        if (d.seq != seen_[k] && !d.event.empty()) {
          return true;
        }
      }
      return false;
    };
    if (!hub_.changed.wait_for(lock, wait, [&] { return hub_.stop || fresh(); })) {
      return std::string();
    }
    if (hub_.stop) {
      return std::nullopt;
    }
    std::string out;
    for (size_t k = 0; k < ids_.size(); ++k) {
      const auto& d = hub_.devices[static_cast<size_t>(ids_[k])];
      if (d.seq != seen_[k] && !d.event.empty()) {
        out += "data: " + d.event + "\n\n";
      }
      seen_[k] = d.seq;
    }
    return out;
  }

 private:
  PowerStreams::Hub& hub_;
  std::vector<int> ids_;
  std::vector<uint64_t> seen_;
};

}  // namespace

PowerStreams::PowerStreams(GpuControl& gpus, device::CpuSet* cpus, PowerStreamOptions options) {
  // GPU: publish on change only.
  auto last_gpu =
      std::make_shared<std::vector<std::optional<uint32_t>>>(static_cast<size_t>(gpus.count()));
  DeviceReader gpu_reader{[&gpus, last_gpu](int id) -> std::optional<std::string> {
                            const uint32_t mw = gpus.power_mw(id);
                            auto& last = (*last_gpu)[static_cast<size_t>(id)];
                            if (last == mw) {
                              return std::nullopt;
                            }
                            last = mw;
                            return nlohmann::json{
                                {"timestamp_ms", unix_time_ms()}, {"gpu_id", id}, {"power_mw", mw}}
                                .dump();
                          },
                          [last_gpu](int id) { (*last_gpu)[static_cast<size_t>(id)].reset(); }};
  gpu_hub_ = std::make_unique<Hub>("GPU", std::move(gpu_reader), gpus.count(), options.gpu_poll_hz);

  // CPU: power from the energy counters between two ticks; published on change or first value.
  struct CpuState {
    std::optional<std::pair<int64_t, std::optional<int64_t>>> energy_uj;
    std::chrono::steady_clock::time_point at;
    std::optional<std::pair<uint32_t, std::optional<uint32_t>>> last_mw;
  };
  const int cpu_count = cpus != nullptr ? cpus->count() : 0;
  auto cpu_state = std::make_shared<std::vector<CpuState>>(static_cast<size_t>(cpu_count));
  DeviceReader cpu_reader{
      [cpus, cpu_state](int id) -> std::optional<std::string> {
        CpuState& s = (*cpu_state)[static_cast<size_t>(id)];
        const auto now = std::chrono::steady_clock::now();
        const std::pair<int64_t, std::optional<int64_t>> energy{cpus->energy_uj(id),
                                                                cpus->dram_energy_uj(id)};
        const auto prev = s.energy_uj;
        const auto prev_at = s.at;
        s.energy_uj = energy;
        s.at = now;
        if (!prev) {
          return std::nullopt;
        }
        const double us = std::chrono::duration<double, std::micro>(now - prev_at).count();
        const auto mw = [&](int64_t delta_uj) {
          return static_cast<uint32_t>(us > 0 ? static_cast<double>(delta_uj) * 1000.0 / us : 0);
        };
        std::pair<uint32_t, std::optional<uint32_t>> value{mw(energy.first - prev->first),
                                                           std::nullopt};
        if (energy.second && prev->second) {
          value.second = mw(*energy.second - *prev->second);
        }
        if (s.last_mw == value) {
          return std::nullopt;
        }
        s.last_mw = value;
        nlohmann::json e = {
            {"timestamp_ms", unix_time_ms()}, {"cpu_id", id}, {"cpu_mw", value.first}};
        e["dram_mw"] = value.second ? nlohmann::json(*value.second) : nlohmann::json(nullptr);
        return e.dump();
      },
      [cpu_state](int id) { (*cpu_state)[static_cast<size_t>(id)] = CpuState{}; }};
  cpu_hub_ = std::make_unique<Hub>("CPU", std::move(cpu_reader), cpu_count, options.cpu_poll_hz);
}

PowerStreams::~PowerStreams() = default;

std::unique_ptr<http::Stream> PowerStreams::subscribe_gpus(const std::vector<int>& ids) {
  return std::make_unique<Subscription>(*gpu_hub_, ids);
}

std::unique_ptr<http::Stream> PowerStreams::subscribe_cpus(const std::vector<int>& ids) {
  return std::make_unique<Subscription>(*cpu_hub_, ids);
}

int PowerStreams::subscribers() const {
  int n = 0;
  for (const Hub* hub : {gpu_hub_.get(), cpu_hub_.get()}) {
    std::lock_guard lock(hub->mu);
    n += hub->subscribers;
  }
  return n;
}

}  // namespace zeus::daemon
