#include "zeus/job/profile_exchange.h"

#include <fmt/format.h>

#include <cstdio>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/power.h"
#include "zeus/contract/run_files.h"
#include "zeus/job/messages.h"

namespace zeus::job {

// Four broadcasts from rank 0: ProfileHeader, ProfileMessage, then the per-GPU curves' header
// and body (messages.h).
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
  std::vector<double> head =
      ProfileHeader{profile ? std::optional(profile->train.size()) : std::nullopt}.encode();
  collectives.broadcast(head, 0);
  const ProfileHeader header = ProfileHeader::decode(head);
  if (!header.limits) {
    return std::nullopt;
  }
  std::vector<double> body = profile ? ProfileMessage::encode(*profile)
                                     : std::vector<double>(ProfileMessage::size(*header.limits));
  collectives.broadcast(body, 0);
  optimize::PowerProfile shared = ProfileMessage::decode(body, *header.limits, o.global_batch_size);
  std::vector<double> curves_head = profile ? CurvesMessage::header(profile->per_gpu)
                                            : std::vector<double>(CurvesMessage::kHeaderSize);
  collectives.broadcast(curves_head, 0);
  std::vector<double> curves = profile ? CurvesMessage::encode(profile->per_gpu)
                                       : std::vector<double>(CurvesMessage::size(curves_head));
  collectives.broadcast(curves, 0);
  shared.per_gpu = CurvesMessage::decode(curves_head, curves);
  // Whose curves they are: "uuid\nhost" of each (write_text), for PlannedLimits::load.
  std::vector<double> ids(shared.per_gpu.size() * kTextSlot, 0.0);
  for (size_t c = 0; profile && c < profile->per_gpu.size(); ++c) {
    if (!profile->per_gpu[c].uuid.empty()) {
      write_text(ids, c, profile->per_gpu[c].uuid + '\n' + profile->per_gpu[c].host);
    }
  }
  collectives.broadcast(ids, 0);
  for (size_t c = 0; c < shared.per_gpu.size(); ++c) {
    const std::string id = read_text(ids, c);
    if (const auto nl = id.find('\n'); nl != std::string::npos) {
      shared.per_gpu[c].uuid = id.substr(0, nl);
      shared.per_gpu[c].host = id.substr(nl + 1);
    }
  }
  if (profile) {
    shared.optimal_per_gpu_mw = profile->optimal_per_gpu_mw;  // the master's, for its log
  }
  return shared;
}

void announce_profiling(const ResolvedJobOptions& o, const RankInfo& ranks,
                        const optimize::PowerLimitProfiler* profiler, bool loaded,
                        int64_t current_limit_mw) {
  if (!ranks.is_master()) {
    return;
  }
  if (profiler == nullptr) {
    logger().info(
        "measure-only: the GPUs stay at their limit ({} W); each epoch's energy and time are "
        "measured, nothing is profiled and no limit is set",
        mw_to_w(current_limit_mw));
  } else if (loaded) {
    logger().info(
        "loaded {}: optimal limit {} W; profiling skipped (delete the file to profile again)",
        contract::power_profile_path(o.log_dir, o.global_batch_size).string(),
        mw_to_w(profiler->optimal_limit_mw().value_or(0)));
  } else {
    const auto& candidates = profiler->candidates_mw();
    logger().info(
        "will profile {} power limits ({}..{} W), {} warmup + {} profiling iterations each, "
        "global batch size {} on {} rank(s)",
        candidates.size(), mw_to_w(candidates.front()), mw_to_w(candidates.back()), o.warmup_iters,
        o.profile_iters, o.global_batch_size, ranks.world_size);
  }
}

void save_job_profile(const ResolvedJobOptions& options, const RankInfo& ranks,
                      optimize::PowerProfile profile) {
  if (!ranks.is_master()) {
    return;
  }
  profile.job_id = options.job_id;
  const auto path = contract::power_profile_path(options.log_dir, options.global_batch_size);
  contract::save_power_profile(path, profile);
  logger().info("saved {}: optimal limit {} W", path.string(),
                mw_to_w(profile.optimal_power_limit_mw));
}

void save_job_result(const ResolvedJobOptions& options, const RankInfo& ranks,
                     const contract::TrainResult& result) {
  if (!ranks.is_master()) {
    return;
  }
  const auto path =
      contract::train_result_path(options.log_dir, options.job_id, options.global_batch_size);
  contract::save_train_result(path, result);
  logger().info("saved {}", path.string());
  std::fprintf(stderr, "zeus: %s\n", contract::summary_line(result).c_str());
  std::fflush(stderr);
}

}  // namespace zeus::job
