// The Pusher where this build has no libcurl: refuses at construction, saying what to do.
#include "zeus/common/errors.h"
#include "zeus/metrics/pushgateway.h"

namespace zeus::metrics {

void Pusher::send_check() {
  throw ConfigError("pushing metrics to " + url_ +
                    " needs libcurl, which this build of zeus-cpp lacks "
                    "(ZEUS_WITH_ZEUSD_CLIENT=OFF): rebuild with libcurl4-openssl-dev, or unset "
                    "ZEUS_PUSHGATEWAY_URL");
}

std::optional<std::string> Pusher::send(const std::string&) {
  return "no HTTP client";
}

}  // namespace zeus::metrics
