// Test helper process: opens the GPUs named by argv[1] (a device locator), sets GPU i to the
// limit argv[3 + i] (mW) through a PowerLimitGuard journaling to argv[2], prints "ready", and
// sleeps until killed. The restore tests kill it with SIGTERM (the guard must restore) and
// SIGKILL (`zeus restore-limits` must restore from the journal).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "zeus/common/errors.h"
#include "zeus/device/discovery.h"
#include "zeus/device/power_limit_guard.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s LOCATOR JOURNAL LIMIT_MW...\n", argv[0]);
    return 2;
  }
  try {
    auto gpus = zeus::device::open_gpu_set(argv[1], {});
    zeus::device::PowerLimitGuard guard(*gpus, {.journal_path = argv[2]});
    for (int i = 3; i < argc; ++i) {
      guard.set_power_limit_mw(i - 3, std::stoll(argv[i]));
    }
    std::printf("ready\n");
    std::fflush(stdout);
    while (true) {
      ::pause();
    }
  } catch (const zeus::Error& e) {
    std::fprintf(stderr, "limit_setter: %s\n", e.what());
    return 1;
  }
}
