#include "zeus/job/collectives.h"

#include <fmt/format.h>

#include <exception>
#include <vector>

#include "zeus/common/errors.h"

namespace zeus::job {

void barrier(Collectives& collectives) {
  std::vector<double> one{0.0};
  collectives.all_reduce_sum(one);
}

void agree(Collectives& collectives, std::string_view what, const std::function<void()>& step) {
  const RankInfo ranks = collectives.ranks();
  std::exception_ptr error;
  try {
    step();
  } catch (...) {
    error = std::current_exception();
  }
  std::vector<double> failed(static_cast<size_t>(ranks.world_size), 0.0);
  failed[static_cast<size_t>(ranks.rank)] = error ? 1.0 : 0.0;
  collectives.all_reduce_sum(failed);
  if (error) {
    std::rethrow_exception(error);
  }
  for (int r = 0; r < ranks.world_size; ++r) {
    if (failed[static_cast<size_t>(r)] != 0) {
      throw ConfigError(fmt::format(
          "{} failed on rank {} (its error is in its output); stopping before training", what, r));
    }
  }
}

}  // namespace zeus::job
