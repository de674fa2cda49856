#include "zeus/job/profile_exchange.h"

#include <fmt/format.h>

#include <vector>

#include "zeus/common/errors.h"
#include "zeus/contract/run_files.h"
#include "zeus/job/messages.h"

namespace zeus::job {

// Two broadcasts from rank 0: ProfileHeader, then ProfileMessage (messages.h).
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
  return ProfileMessage::decode(body, *header.limits, o.global_batch_size);
}

}  // namespace zeus::job
