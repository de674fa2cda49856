#include "zeus/device/amdsmi/amdsmi_gpu_set.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <thread>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/power.h"
#include "zeus/device/visible_devices.h"

namespace zeus::device::amdsmi {
namespace {

constexpr int64_t kUwPerMw = 1000;

struct Listed {
  amdsmi_processor_handle handle = nullptr;
  int machine_index = 0;
  int hip_key = 0;  // hip_id, else KFD node id, else the handle order
  std::string name;
  std::string uuid;
  std::string pci;
};

// Every GPU of the machine in AMD SMI's handle order (sockets, then their processors).
std::vector<Listed> list_gpus(const AmdsmiLibrary& lib) {
  const AmdsmiApi& api = lib.api();
  AmdsmiLibrary::Call call(lib);
  uint32_t sockets = 0;
  check_amdsmi(lib, api.get_socket_handles(&sockets, nullptr), "amdsmi_get_socket_handles",
               "this machine");
  std::vector<amdsmi_socket_handle> socket_handles(sockets);
  check_amdsmi(lib, api.get_socket_handles(&sockets, socket_handles.data()),
               "amdsmi_get_socket_handles", "this machine");
  std::vector<Listed> out;
  for (uint32_t s = 0; s < sockets; ++s) {
    const std::string where = fmt::format("AMD SMI socket {}", s);
    uint32_t n = 0;
    check_amdsmi(lib, api.get_processor_handles(socket_handles[s], &n, nullptr),
                 "amdsmi_get_processor_handles", where);
    std::vector<amdsmi_processor_handle> handles(n);
    check_amdsmi(lib, api.get_processor_handles(socket_handles[s], &n, handles.data()),
                 "amdsmi_get_processor_handles", where);
    for (uint32_t k = 0; k < n; ++k) {
      Listed g;
      g.handle = handles[k];
      g.machine_index = static_cast<int>(out.size());
      g.hip_key = g.machine_index;
      const std::string at = fmt::format("AMD GPU {} (AMD SMI's order)", g.machine_index);
      if (api.get_gpu_asic_info != nullptr) {
        amdsmi_asic_info_prefix_t asic{};
        if (api.get_gpu_asic_info(g.handle, &asic) == AMDSMI_STATUS_SUCCESS) {
          g.name.assign(asic.market_name, strnlen(asic.market_name, sizeof(asic.market_name)));
        }
      }
      if (g.name.empty()) {
        g.name = "AMD GPU";
      }
      if (api.get_gpu_device_uuid != nullptr) {
        std::array<char, 128> uuid{};
        auto len = static_cast<uint32_t>(uuid.size());
        check_amdsmi(lib, api.get_gpu_device_uuid(g.handle, &len, uuid.data()),
                     "amdsmi_get_gpu_device_uuid", at);
        g.uuid.assign(uuid.data(), strnlen(uuid.data(), uuid.size()));
      }
      if (api.get_gpu_device_bdf != nullptr) {
        uint64_t bdf = 0;
        if (api.get_gpu_device_bdf(g.handle, &bdf) == AMDSMI_STATUS_SUCCESS) {
          // Bits: function 0-2, device 3-7, bus 8-15, domain 16 and up.
          g.pci = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", bdf >> 16U, (bdf >> 8U) & 0xffU,
                              (bdf >> 3U) & 0x1fU, bdf & 0x7U);
        }
      }
      if (g.uuid.empty()) {
        g.uuid = "AMD-" + (g.pci.empty() ? std::to_string(g.machine_index) : g.pci);
      }
      // HIP's order: the library says it (ROCm 6.4+), else KFD's node ids give it (ROCm 6.3).
      amdsmi_enumeration_info_t e{};
      amdsmi_kfd_info_t kfd{};
      if (api.get_gpu_enumeration_info != nullptr &&
          api.get_gpu_enumeration_info(g.handle, &e) == AMDSMI_STATUS_SUCCESS &&
          e.hip_id != UINT32_MAX) {
        g.hip_key = static_cast<int>(e.hip_id);
      } else if (api.get_gpu_kfd_info != nullptr &&
                 api.get_gpu_kfd_info(g.handle, &kfd) == AMDSMI_STATUS_SUCCESS) {
        g.hip_key = static_cast<int>(kfd.node_id);
      }
      out.push_back(std::move(g));
    }
  }
  return out;
}

}  // namespace

AmdsmiGpuSet::AmdsmiGpuSet(AmdsmiGpuSetOptions options)
    : lib_(std::make_unique<AmdsmiLibrary>(options.library)),
      counter_check_window_(options.counter_check_window) {
  std::vector<Listed> all = list_gpus(*lib_);
  std::vector<int> hip_order(all.size());  // positions in HIP's order -> machine indices
  std::iota(hip_order.begin(), hip_order.end(), 0);
  std::stable_sort(hip_order.begin(), hip_order.end(), [&](int a, int b) {
    return all[static_cast<size_t>(a)].hip_key < all[static_cast<size_t>(b)].hip_key;
  });
  for (const int m : hip_order) {
    hip_uuids_.push_back(all[static_cast<size_t>(m)].uuid);
  }

  std::vector<int> visible;  // machine indices
  if (options.machine_indices) {
    for (const int index : *options.machine_indices) {
      if (index < 0 || index >= static_cast<int>(all.size())) {
        throw ConfigError(fmt::format("AMD GPU {} does not exist: this machine has {} GPU(s)",
                                      index, all.size()));
      }
      visible.push_back(index);
    }
  } else if (!options.respect_visible_devices) {
    // Machine-wide: machine order, as every backend's (visible_devices.h);
    // runtime_visible_devices() says how HIP numbers them.
    for (int m = 0; m < static_cast<int>(all.size()); ++m) {
      visible.push_back(m);
    }
  } else {
    std::vector<std::string> ignored;
    for (const int position :
         map_rocm_visible_devices(RocmVisibility::from_env(), hip_uuids_, &ignored)) {
      visible.push_back(hip_order[static_cast<size_t>(position)]);
    }
    for (const auto& note : ignored) {
      logger().warn("ignoring {}, as ROCm does", note);
    }
  }

  AmdsmiLibrary::Call call(*lib_);
  const AmdsmiApi& api = lib_->api();
  for (const int m : visible) {
    const Listed& l = all[static_cast<size_t>(m)];
    Gpu g;
    g.handle = l.handle;
    g.machine_index = l.machine_index;
    g.hip_index =
        static_cast<int>(std::find(hip_order.begin(), hip_order.end(), m) - hip_order.begin());
    g.name = l.name;
    g.uuid = l.uuid;
    g.pci = l.pci;
    // Probe the optional readings once; a part that answers NOT_SUPPORTED loses that reading.
    SocketPower p;
    const amdsmi_status_t status = lib_->power_info(g.handle, &p);
    if (status == AMDSMI_STATUS_UNEXPECTED_DATA) {
      check_amdsmi(*lib_, status, "amdsmi_get_power_info", fmt::format("AMD GPU {}", m));
    }
    g.power = status == AMDSMI_STATUS_SUCCESS && (p.current_w || p.average_w);
    g.can.instant_power = g.power && p.current_w.has_value();
    if (api.get_energy_count != nullptr) {
      uint64_t acc = 0;
      float res = 0;
      uint64_t ts = 0;
      g.counter_present = api.get_energy_count(g.handle, &acc, &res, &ts) == AMDSMI_STATUS_SUCCESS;
    }
    g.can.clocks = api.set_gpu_clk_limit != nullptr && api.set_gpu_perf_level != nullptr;
    g.can.temperature = api.get_temp_metric != nullptr;
    g.can.persistence = false;  // AMD GPUs have no persistence mode
    gpus_.push_back(std::move(g));
  }
  // MI250/MI250X: the even die reports both dies' power, the odd one reports none. Say which
  // GPUs share a reading; the odd die then reads 0, so that no sum counts the pair twice.
  for (size_t i = 0; i < gpus_.size(); ++i) {
    Gpu& g = gpus_[i];
    if (g.power || g.name.find("MI250") == std::string::npos || g.hip_index % 2 == 0) {
      continue;
    }
    const int partner_hip = g.hip_index - 1;
    const std::string partner = hip_uuids_[static_cast<size_t>(partner_hip)];
    for (size_t k = 0; k < gpus_.size(); ++k) {
      if (gpus_[k].uuid == partner) {
        g.shares_reading_of = static_cast<int>(k);
      }
    }
    logger().warn(
        "AMD GPU {} ({}, {}) is the second die of an MI250-class GPU: AMD SMI reports both dies' "
        "power on its first die (HIP GPU {}, {}); this GPU reads 0 W so that the pair is counted "
        "once",
        i, g.uuid, g.name, partner_hip, partner);
  }
  counter_trusted_.assign(gpus_.size(), false);
}

AmdsmiGpuSet::~AmdsmiGpuSet() = default;

const AmdsmiGpuSet::Gpu& AmdsmiGpuSet::gpu_at(int gpu) const {
  check_index(gpu);
  return gpus_[static_cast<size_t>(gpu)];
}

std::string AmdsmiGpuSet::where(int gpu) const {
  const Gpu& g = gpus_[static_cast<size_t>(gpu)];
  return fmt::format("AMD GPU {} ({}, {}, HIP index {}, AMD SMI index {})", gpu, g.uuid, g.name,
                     g.hip_index, g.machine_index);
}

std::string AmdsmiGpuSet::name(int gpu) const {
  return gpu_at(gpu).name;
}

std::string AmdsmiGpuSet::uuid(int gpu) const {
  return gpu_at(gpu).uuid;
}

std::string AmdsmiGpuSet::pci_address(int gpu) const {
  return gpu_at(gpu).pci;
}

std::string AmdsmiGpuSet::describe(int gpu) const {
  const Gpu& g = gpu_at(gpu);
  std::string power = g.can.instant_power ? "current_socket_power"
                      : g.power           ? "average_socket_power (no current reading)"
                                          : "none";
  if (g.shares_reading_of) {
    power = fmt::format("none of its own: GPU {} reports this MI250 die with its own",
                        *g.shares_reading_of);
  }
  return fmt::format("AMD SMI {} (ABI {}); HIP index {}, AMD SMI index {}; power: {}; energy: {}",
                     lib_->version(), static_cast<int>(lib_->abi()), g.hip_index, g.machine_index,
                     power,
                     has_energy_counter(gpu) ? "counter (checked against power)"
                                             : "integrated from power samples");
}

// What ROCm shows the process, as positions in this set: HIP's order, after ROCm's variables.
// Every GPU in this set's own order (no variable, HIP's order the machine's): std::nullopt.
std::optional<std::string> AmdsmiGpuSet::runtime_visible_devices() const {
  std::vector<int> positions;
  for (const int hip : map_rocm_visible_devices(RocmVisibility::from_env(), hip_uuids_)) {
    const std::string& uuid = hip_uuids_[static_cast<size_t>(hip)];
    for (int gpu = 0; gpu < count(); ++gpu) {
      if (gpus_[static_cast<size_t>(gpu)].uuid == uuid) {
        positions.push_back(gpu);
      }
    }
  }
  std::vector<int> all(static_cast<size_t>(count()));
  std::iota(all.begin(), all.end(), 0);
  if (positions == all) {
    return std::nullopt;
  }
  return fmt::format("{}", fmt::join(positions, ","));
}

GpuCapabilities AmdsmiGpuSet::capabilities(int gpu) const {
  GpuCapabilities can = gpu_at(gpu).can;
  can.energy_counter = has_energy_counter(gpu);
  return can;
}

int64_t AmdsmiGpuSet::power_mw(int gpu) {
  return socket_power_mw(gpu);
}

int64_t AmdsmiGpuSet::socket_power_mw(int gpu) const {
  const Gpu& g = gpu_at(gpu);
  if (!g.power) {
    if (g.shares_reading_of) {
      return 0;
    }
    throw NotSupported(fmt::format(
        "{}: amdsmi_get_power_info reports neither current nor average socket power", where(gpu)));
  }
  SocketPower p;
  {
    AmdsmiLibrary::Call call(*lib_);
    check_amdsmi(*lib_, lib_->power_info(g.handle, &p), "amdsmi_get_power_info", where(gpu));
  }
  const std::optional<uint32_t> w = g.can.instant_power && p.current_w ? p.current_w : p.average_w;
  if (!w) {
    throw DeviceError(
        fmt::format("{}: amdsmi_get_power_info stopped reporting socket power", where(gpu)));
  }
  return static_cast<int64_t>(*w) * 1000;
}

double AmdsmiGpuSet::counter_uj(const Gpu& g, int gpu) const {
  uint64_t accumulator = 0;
  float resolution_uj = 0;
  uint64_t timestamp_ns = 0;
  AmdsmiLibrary::Call call(*lib_);
  check_amdsmi(*lib_,
               lib_->api().get_energy_count(g.handle, &accumulator, &resolution_uj, &timestamp_ns),
               "amdsmi_get_energy_count", where(gpu));
  return static_cast<double>(accumulator) * static_cast<double>(resolution_uj);
}

// Note [energy counter]: on some parts and library versions the counter runs at the wrong rate
// (ROCm/amdsmi#38; wrong values before ROCm 6.3). Before a counter is trusted, every present
// counter of the set is watched for counter_check_window_ beside the power, polled every 50 ms
// over the window; a counter whose energy is not within kCounterBand (1.5x either way) of the
// power's integral (or that cannot be judged: no power) is not used, and energy is integrated
// from polled power instead, said once per GPU. A counter 2x off is so set aside (the band was
// 0.1x-10x, which let one run at twice the rate through: issue #52). Done on first use, so zeusd
// and the exporter's limit reads never wait for it.
void AmdsmiGpuSet::check_counters() const {
  std::call_once(counters_checked_, [&] {
    std::vector<int> present;
    for (int i = 0; i < count(); ++i) {
      if (gpus_[static_cast<size_t>(i)].counter_present &&
          !gpus_[static_cast<size_t>(i)].shares_reading_of) {
        present.push_back(i);
      }
    }
    if (present.empty()) {
      return;
    }
    // Power sampled over the window (the trapezoid of its polls), beside each counter's change.
    constexpr double kCounterBand = 1.5;
    const auto read_power = [&](int i) {
      const Gpu& g = gpus_[static_cast<size_t>(i)];
      return g.power ? static_cast<double>(socket_power_mw(i)) : 0.0;
    };
    std::vector<double> before_uj;
    std::vector<double> last_mw;
    std::vector<double> expected_mj(present.size(), 0.0);
    for (const int i : present) {
      last_mw.push_back(read_power(i));
      before_uj.push_back(counter_uj(gpus_[static_cast<size_t>(i)], i));
    }
    const auto start = std::chrono::steady_clock::now();
    auto polled = start;
    const auto end = start + counter_check_window_;
    while (polled < end) {
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(50), end - polled));
      const auto now = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(now - polled).count();
      for (size_t k = 0; k < present.size(); ++k) {
        const double mw = read_power(present[k]);
        expected_mj[k] += 0.5 * (last_mw[k] + mw) * dt;
        last_mw[k] = mw;
      }
      polled = now;
    }
    for (size_t k = 0; k < present.size(); ++k) {
      const int i = present[k];
      const Gpu& g = gpus_[static_cast<size_t>(i)];
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // The counter is read once more after the last poll: charge that stretch at the last power.
      const double measured_mj = (counter_uj(g, i) - before_uj[k]) / 1000.0;
      expected_mj[k] +=
          last_mw[k] *
          std::max(0.0, seconds - std::chrono::duration<double>(polled - start).count());
      if (expected_mj[k] < 1.0) {
        logger().info(
            "{}: its energy counter (amdsmi_get_energy_count) cannot be checked while power "
            "reads 0 W; energy is integrated from power samples",
            where(i));
        continue;
      }
      const double ratio = measured_mj / expected_mj[k];
      if (ratio > 1 / kCounterBand && ratio < kCounterBand) {
        counter_trusted_[static_cast<size_t>(i)] = true;
        continue;
      }
      logger().warn(
          "{}: its energy counter (amdsmi_get_energy_count) ran at {:.2f}x the rate of power x "
          "time over {:.2f} s; energy is integrated from power samples instead (a known AMD SMI "
          "fault, ROCm/amdsmi#38: newer ROCm may fix it)",
          where(i), ratio, seconds);
    }
  });
}

bool AmdsmiGpuSet::has_energy_counter(int gpu) const {
  gpu_at(gpu);
  check_counters();
  return counter_trusted_[static_cast<size_t>(gpu)];
}

std::optional<int64_t> AmdsmiGpuSet::energy_mj(int gpu) {
  if (!has_energy_counter(gpu)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(counter_uj(gpu_at(gpu), gpu) / 1000.0);
}

amdsmi_power_cap_info_t AmdsmiGpuSet::cap_info(int gpu) {
  const Gpu& g = gpu_at(gpu);
  amdsmi_power_cap_info_t info{};
  AmdsmiLibrary::Call call(*lib_);
  check_amdsmi(*lib_, lib_->api().get_power_cap_info(g.handle, 0, &info),
               "amdsmi_get_power_cap_info", where(gpu));
  return info;
}

int64_t AmdsmiGpuSet::power_limit_mw(int gpu) {
  return static_cast<int64_t>(cap_info(gpu).power_cap) / kUwPerMw;
}

PowerLimitRange AmdsmiGpuSet::power_limit_constraints_mw(int gpu) {
  const amdsmi_power_cap_info_t info = cap_info(gpu);
  return {static_cast<int64_t>(info.min_power_cap) / kUwPerMw,
          static_cast<int64_t>(info.max_power_cap) / kUwPerMw};
}

int64_t AmdsmiGpuSet::default_power_limit_mw(int gpu) {
  return static_cast<int64_t>(cap_info(gpu).default_power_cap) / kUwPerMw;
}

void AmdsmiGpuSet::set_power_limit_mw(int gpu, int64_t limit_mw) {
  validate_power_limit_mw(gpu, limit_mw);
  const Gpu& g = gpu_at(gpu);
  AmdsmiLibrary::Call call(*lib_);
  // Caps are in uW at the library (upstream Zeus passed W until its PR #204).
  check_amdsmi(*lib_,
               lib_->api().set_power_cap(g.handle, 0, static_cast<uint64_t>(limit_mw) * kUwPerMw),
               "amdsmi_set_power_cap", where(gpu));
}

template <typename F>
F AmdsmiGpuSet::need(F fn, const char* function, int gpu) const {
  gpu_at(gpu);
  if (fn == nullptr) {
    throw NotSupported(fmt::format("{} on {}: this AMD SMI library ({}) lacks it", function,
                                   where(gpu), lib_->version()));
  }
  return fn;
}

// The library refuses a minimum above the current maximum (and a maximum below the current
// minimum), so the bound that moves away from the other goes first.
void AmdsmiGpuSet::set_clock_range(int gpu, uint32_t type, uint32_t min_mhz, uint32_t max_mhz,
                                   const char* what) {
  if (min_mhz > max_mhz) {
    throw ConfigError(fmt::format("{} on {}: minimum {} MHz is above maximum {} MHz", what,
                                  where(gpu), min_mhz, max_mhz));
  }
  const auto set = need(lib_->api().set_gpu_clk_limit, "amdsmi_set_gpu_clk_limit", gpu);
  const Gpu& g = gpu_at(gpu);
  AmdsmiLibrary::Call call(*lib_);
  amdsmi_clk_info_t now{};
  const bool known = lib_->api().get_clock_info != nullptr &&
                     lib_->api().get_clock_info(g.handle, type, &now) == AMDSMI_STATUS_SUCCESS;
  const bool max_first = known && min_mhz > now.max_clk;
  const std::array<std::pair<uint32_t, uint32_t>, 2> order =
      max_first ? std::array{std::pair{AMDSMI_CLK_LIMIT_MAX, max_mhz},
                             std::pair{AMDSMI_CLK_LIMIT_MIN, min_mhz}}
                : std::array{std::pair{AMDSMI_CLK_LIMIT_MIN, min_mhz},
                             std::pair{AMDSMI_CLK_LIMIT_MAX, max_mhz}};
  for (const auto& [limit, mhz] : order) {
    check_amdsmi(*lib_, set(g.handle, type, limit, mhz),
                 fmt::format("amdsmi_set_gpu_clk_limit({} {})", what,
                             limit == AMDSMI_CLK_LIMIT_MAX ? "MAX" : "MIN"),
                 where(gpu));
  }
}

void AmdsmiGpuSet::set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  set_clock_range(gpu, AMDSMI_CLK_TYPE_GFX, min_mhz, max_mhz, "GFX");
}

void AmdsmiGpuSet::set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  set_clock_range(gpu, AMDSMI_CLK_TYPE_MEM, min_mhz, max_mhz, "MEM");
}

// Both resets are the performance level's: AUTO gives every clock back to the driver.
void AmdsmiGpuSet::reset_gpu_locked_clocks(int gpu) {
  const auto fn = need(lib_->api().set_gpu_perf_level, "amdsmi_set_gpu_perf_level", gpu);
  AmdsmiLibrary::Call call(*lib_);
  check_amdsmi(*lib_, fn(gpu_at(gpu).handle, AMDSMI_DEV_PERF_LEVEL_AUTO),
               "amdsmi_set_gpu_perf_level(AUTO)", where(gpu));
}

void AmdsmiGpuSet::reset_mem_locked_clocks(int gpu) {
  reset_gpu_locked_clocks(gpu);
}

GpuReading AmdsmiGpuSet::read(int gpu) {
  const Gpu& g = gpu_at(gpu);
  GpuReading r;
  if (g.power) {
    r.power_w = mw_to_w(power_mw(gpu));
  }
  if (const auto mj = energy_mj(gpu)) {
    r.energy_j = mj_to_j(*mj);
  }
  const amdsmi_power_cap_info_t caps = cap_info(gpu);
  r.power_limit_w = static_cast<double>(caps.power_cap) * 1e-6;
  r.power_limit_min_w = static_cast<double>(caps.min_power_cap) * 1e-6;
  r.power_limit_max_w = static_cast<double>(caps.max_power_cap) * 1e-6;
  const AmdsmiApi& api = lib_->api();
  AmdsmiLibrary::Call call(*lib_);
  if (api.get_temp_metric != nullptr) {
    // Degrees C: AMD SMI converts the driver's millidegrees (AMD's own Go binding multiplies by
    // 1000 to give rocm-smi's unit back; upstream Zeus's division by 1000 is wrong).
    int64_t c = 0;
    if (api.get_temp_metric(g.handle, AMDSMI_TEMPERATURE_TYPE_HOTSPOT, AMDSMI_TEMP_CURRENT, &c) ==
            AMDSMI_STATUS_SUCCESS ||
        api.get_temp_metric(g.handle, AMDSMI_TEMPERATURE_TYPE_EDGE, AMDSMI_TEMP_CURRENT, &c) ==
            AMDSMI_STATUS_SUCCESS) {
      r.temperature_c = static_cast<double>(c);
    }
  }
  if (api.get_clock_info != nullptr) {
    amdsmi_clk_info_t clk{};
    if (api.get_clock_info(g.handle, AMDSMI_CLK_TYPE_GFX, &clk) == AMDSMI_STATUS_SUCCESS) {
      r.sm_clock_hz = clk.clk * 1e6;
    }
    if (api.get_clock_info(g.handle, AMDSMI_CLK_TYPE_MEM, &clk) == AMDSMI_STATUS_SUCCESS) {
      r.memory_clock_hz = clk.clk * 1e6;
    }
  }
  return r;
}

// The processes on the GPU, on ABI 26 (the layout held to AMD's package); empty on older
// libraries, whose amdsmi_proc_info_t zeus-cpp has not checked, and where the part cannot tell.
std::vector<pid_t> AmdsmiGpuSet::compute_pids(int gpu) {
  const Gpu& g = gpu_at(gpu);
  const auto fn = lib_->api().get_gpu_process_list;
  if (fn == nullptr || lib_->abi() != Abi::k26) {
    return {};
  }
  std::vector<amdsmi_proc_info_abi26_t> infos(16);
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto n = static_cast<uint32_t>(infos.size());
    amdsmi_status_t status = AMDSMI_STATUS_SUCCESS;
    {
      AmdsmiLibrary::Call call(*lib_);
      status = fn(g.handle, &n, infos.data());
    }
    if (status == AMDSMI_STATUS_NOT_SUPPORTED) {
      return {};
    }
    if (status == AMDSMI_STATUS_OUT_OF_RESOURCES || status == AMDSMI_STATUS_INSUFFICIENT_SIZE ||
        n > infos.size()) {
      infos.resize(std::max<size_t>(n, infos.size()) + 16);  // processes came meanwhile
      continue;
    }
    check_amdsmi(*lib_, status, "amdsmi_get_gpu_process_list", where(gpu));
    std::vector<pid_t> pids;
    for (uint32_t k = 0; k < n; ++k) {
      pids.push_back(static_cast<pid_t>(infos[k].pid));
    }
    return pids;
  }
  throw DeviceError(fmt::format("{}: its process list kept growing while read", where(gpu)));
}

}  // namespace zeus::device::amdsmi
