// The state one node's simulated GPUs share across processes: plain data at fixed offsets in a
// small file every process maps (or private anonymous memory when there is no file), owned by
// an RAII class over UniqueFd: the mapping and the descriptor go with it, on every path.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>

#include "zeus/common/posix.h"

namespace zeus::device::sim {
namespace detail {

inline constexpr uint64_t kMagic = 0x5a4555535349'4d31;  // "ZEUSSIM1"
inline constexpr uint32_t kVersion = 2;                  // 2: per-GPU slowdown, mixes of models
inline constexpr int kMaxGpus = 64;

struct SharedGpu {
  int64_t power_limit_mw;
  int64_t clock_ns;  // virtual: the GPU's time; real: when energy was last accrued
  int64_t busy;
  double energy_mj;
  double slowdown;  // the GPU's step time over the trace's (1: as traced); may change mid-run
};

struct SharedState {
  uint64_t magic;
  uint32_t version;
  uint32_t gpu_count;
  std::array<char, 256> model;  // "<gpu>[*<slowdown>][,...]:<workload>:<batch_size>"
  std::array<SharedGpu, kMaxGpus> gpus;
};

}  // namespace detail

class SharedStateFile {
 public:
  // Maps `path` (created when missing; empty: private anonymous memory) and runs
  // `setup(state, fresh)` with the file's exclusive flock held, so another process never sees a
  // half-made state: a fresh state is zeroed and is setup's to fill; an existing one is setup's
  // to accept (throw to refuse it). Throws ConfigError for a file of another size (not ours),
  // IoError/PermissionError naming the path for the system calls.
  SharedStateFile(std::filesystem::path path,
                  const std::function<void(detail::SharedState&, bool fresh)>& setup);
  ~SharedStateFile();
  SharedStateFile(const SharedStateFile&) = delete;
  SharedStateFile& operator=(const SharedStateFile&) = delete;

  detail::SharedState& state() { return *state_; }
  const detail::SharedState& state() const { return *state_; }

  // Excludes the threads of this process (its mutex) and the other processes (the flock, which
  // does not exclude threads sharing one descriptor) while the state is read or changed.
  class Lock {
   public:
    explicit Lock(SharedStateFile& file);
    ~Lock();
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

   private:
    std::lock_guard<std::mutex> guard_;
    SharedStateFile& file_;
  };

 private:
  void flock_exclusive();
  void unlock();

  std::filesystem::path path_;
  UniqueFd fd_;  // none for anonymous memory
  detail::SharedState* state_ = nullptr;
  std::mutex mu_;
};

}  // namespace zeus::device::sim
