// The worker bench/launcher/run.py starts under `zeus run` and torchrun. It records, as Unix
// time in a file $PROBE_DIR/<mode>.<rank>, the moment it reached its milestone:
//   join: after joining the Gloo process group (zeus::distributed::init) and one all-reduce
//   fail: rank 1 records the time and exits 1 at once; the other ranks wait to be stopped
//   limits: rank 0 lowers every GPU (the fake NVML in the benchmark) to 150 W through a
//           PowerLimitGuard journaling to $ZEUS_LOG_DIR, as a DataLoader's local master does;
//           every rank records, then waits: the benchmark SIGKILLs the launcher and times how
//           long the GPUs take to get their limits back
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "zeus/contract/run_files.h"
#include "zeus/device/discovery.h"
#include "zeus/device/power_limit_guard.h"
#include "zeus/device/power_limit_journal.h"
#include "zeus/distributed/context.h"

namespace {

void record(const std::string& mode, const char* rank) {
  const char* dir = std::getenv("PROBE_DIR");
  const std::string path = std::string(dir != nullptr ? dir : ".") + "/" + mode + "." + rank;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f != nullptr) {
    std::fprintf(f, "%.6f\n", now);
    std::fclose(f);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const char* rank = std::getenv("RANK");
  if (rank == nullptr) {
    std::fprintf(stderr, "probe: RANK is not set; start me with zeus run or torchrun\n");
    return 2;
  }
  if (mode == "join") {
    try {
      // Joining Gloo, as the benchmark's torchrun side does, also on a GPU node.
      auto ctx = zeus::distributed::init({.device = zeus::distributed::DeviceType::kCpu});
      ctx->all_reduce_sum(1.0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "probe: %s\n", e.what());
      return 1;
    }
    record(mode, rank);
    return 0;
  }
  if (mode == "fail") {
    if (std::string(rank) == "1") {
      record(mode, rank);
      return 1;
    }
    while (true)
      ::pause();
  }
  if (mode == "limits") {
    // As zeus::DataLoader's local master does: rank 0 owns the node's GPUs.
    try {
      std::optional<zeus::device::PowerLimitGuard> guard;
      std::unique_ptr<zeus::device::GpuSet> gpus;
      if (std::string(rank) == "0") {
        const char* log = std::getenv("ZEUS_LOG_DIR");
        gpus = zeus::device::open_gpu_set("nvml", {.respect_visible_devices = false});
        guard.emplace(*gpus, zeus::device::PowerLimitGuardOptions{
                                 .journal_path = std::string(log != nullptr ? log : ".") + "/" +
                                                 zeus::contract::journal_name(0)});
        for (int g = 0; g < gpus->count(); ++g) {
          guard->set_power_limit_mw(g, 150'000);
        }
      }
      record(mode, rank);
      while (true)
        ::pause();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "probe: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "usage: probe join|fail|limits\n");
  return 2;
}
