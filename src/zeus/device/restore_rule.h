// The one rule for putting back what a run changed on a GPU (Note [restore rule] in
// docs/security.md): written to a journal before it is changed; an entry leaves the journal
// only after a restore that read the original back; a failed restore stays, is retried with
// this backoff and never dropped, except for a GPU that is gone, which waits in the journal for
// the next start. zeusd's lease keeper and the guardian (launch/guardian.h) both follow it.
#pragma once

#include <algorithm>
#include <chrono>
#include <exception>

#include "zeus/common/errors.h"

namespace zeus::device {

// The wait before the next attempt after `failures` failed ones: 0.5 s, doubling, at most 10 s.
inline std::chrono::milliseconds restore_retry_delay(int failures) {
  constexpr std::chrono::milliseconds kFirst{500};
  constexpr std::chrono::milliseconds kCap{10'000};
  const int doublings = std::clamp(failures - 1, 0, 10);
  return std::min(kCap, kFirst * (1 << doublings));
}

// Whether a restore that failed with `e` is not worth retrying in this process: the GPU is gone
// (NVML's GPU_IS_LOST or NOT_FOUND); the journal keeps it for the next start.
inline bool restore_target_gone(const std::exception& e) {
  return dynamic_cast<const DeviceLost*>(&e) != nullptr;
}

}  // namespace zeus::device
