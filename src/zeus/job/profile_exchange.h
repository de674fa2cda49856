// The saved power profile of a job, read by the global master and shared with every rank.
#pragma once

#include <optional>

#include "zeus/contract/train_result.h"
#include "zeus/job/collectives.h"
#include "zeus/job/job_options.h"
#include "zeus/optimize/power_limit_profiler.h"
#include "zeus/optimize/power_profile.h"

namespace zeus::job {

// The master loads `bs{B}.power.json` from the log dir; every rank gets the same profile, or
// std::nullopt when there is none. A corrupt file or one for another global batch size stops
// every rank (ConfigError naming the path). Collective.
std::optional<optimize::PowerProfile> load_and_share_profile(const ResolvedJobOptions& options,
                                                             Collectives& collectives);

// The master writes the profile to the log dir (`bs{B}.power.json`, this job's id) and says so;
// other ranks do nothing.
void save_job_profile(const ResolvedJobOptions& options, const RankInfo& ranks,
                      optimize::PowerProfile profile);

// The master writes the train result (`{job_id}+bs{B}.train.json`) and prints its summary line.
void save_job_result(const ResolvedJobOptions& options, const RankInfo& ranks,
                     const contract::TrainResult& result);

// The master's line on what the job will do about limits: measure only (`profiler` null, at
// `current_limit_mw`), use the loaded profile, or profile which limits.
void announce_profiling(const ResolvedJobOptions& options, const RankInfo& ranks,
                        const optimize::PowerLimitProfiler* profiler, bool loaded,
                        int64_t current_limit_mw);

}  // namespace zeus::job
