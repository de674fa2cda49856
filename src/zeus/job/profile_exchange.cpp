#include "zeus/job/profile_exchange.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/contract/run_files.h"

namespace zeus::job {

// Protocol (two broadcasts from rank 0):
//   1. [n]: the number of limits in the profile, or -1 for none (then nothing follows);
//   2. n x [limit mW, train throughput it/s, train power W], then [eval throughput, eval power]
//      (NaN when the profile has no eval measurement).
std::optional<optimize::PowerProfile> load_and_share_profile(const ResolvedJobOptions& o,
                                                             Collectives& collectives) {
  const RankInfo ranks = collectives.ranks();
  const auto path = contract::power_profile_path(o.log_dir, o.global_batch_size);
  std::optional<optimize::PowerProfile> profile;
  agree(collectives, "loading the saved power profile", [&] {
    if (ranks.is_master()) {
      profile = contract::load_power_profile(path);
      if (profile && profile->global_batch_size != o.global_batch_size) {
        throw ConfigError(
            fmt::format("{} is for global batch size {}, not {}; delete it to profile again",
                        path.string(), profile->global_batch_size, o.global_batch_size));
      }
    }
  });
  std::vector<double> head{profile ? static_cast<double>(profile->train.size()) : -1.0};
  collectives.broadcast(head, 0);
  if (head[0] < 0) {
    return std::nullopt;
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
  collectives.broadcast(flat, 0);
  optimize::PowerProfile p;
  p.global_batch_size = o.global_batch_size;
  for (size_t i = 0; i < n; ++i) {
    const auto mw = static_cast<int64_t>(flat[3 * i]);
    p.train[mw] = {mw, flat[3 * i + 1], flat[3 * i + 2]};
  }
  if (!std::isnan(flat[3 * n])) {
    p.eval_throughput_ips = flat[3 * n];
    p.eval_power_w = flat[3 * n + 1];
  }
  return p;
}

}  // namespace zeus::job
