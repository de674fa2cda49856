#include "zeus/common/malloc_tuning.h"

#include <cstdlib>

#include "zeus/common/env.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace zeus {

bool tune_malloc_for_training(const MallocTuning& tuning) {
#if defined(__GLIBC__)
  if (get_env_set(kEnvGlibcTunables)) {
    return false;
  }
  // mallopt returns 1 on success. The mmap threshold goes first: if it is refused, the trim
  // threshold is left alone so that the dynamic mmap threshold stays on.
  const bool mmap_ok =
      ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(tuning.mmap_threshold_bytes)) == 1;
  if (!mmap_ok) {
    return false;
  }
  return ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(tuning.trim_threshold_bytes)) == 1;
#else
  (void)tuning;
  return false;
#endif
}

}  // namespace zeus
