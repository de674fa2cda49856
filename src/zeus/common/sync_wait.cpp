#include "zeus/common/sync_wait.h"

#include <atomic>
#include <cstdint>

namespace zeus::sync_wait {

namespace {
std::atomic<bool> g_armed{false};
std::atomic<int64_t> g_total_ns{0};
}  // namespace

void arm(bool on) {
  g_armed.store(on, std::memory_order_relaxed);
}

bool armed() {
  return g_armed.load(std::memory_order_relaxed);
}

void add(std::chrono::nanoseconds wait) {
  g_total_ns.fetch_add(wait.count(), std::memory_order_relaxed);
}

std::chrono::nanoseconds total() {
  return std::chrono::nanoseconds{g_total_ns.load(std::memory_order_relaxed)};
}

}  // namespace zeus::sync_wait
