// BsoClient in a build without libcurl (ZEUS_WITH_ZEUSD_CLIENT=OFF, as on a machine with no -dev
// packages): constructing one says so, with what to do, instead of failing to link.
#include <fmt/format.h>

#include "zeus/bso_client/client.h"
#include "zeus/common/errors.h"
#include "zeus/http_client/client.h"

namespace zeus::bso {

BsoClient::BsoClient(BsoClientOptions options) : options_(std::move(options)) {
  throw ConfigError(fmt::format(
      "the batch-size service at {} is configured (ZEUS_BSO_SERVER_URL or --server), but this "
      "zeus-cpp was built without libcurl (ZEUS_WITH_ZEUSD_CLIENT=OFF) and cannot reach it: "
      "rebuild with libcurl4-openssl-dev installed, or unset it and give the batch size",
      options_.url));
}

BsoClient::~BsoClient() = default;

JobParams BsoClient::register_job(const JobSpecRequest&) {
  throw InternalError("BsoClient in a build without libcurl");
}
TrialGrant BsoClient::next_trial(const std::string&) {
  throw InternalError("BsoClient in a build without libcurl");
}
ReportAnswer BsoClient::report(const std::string&, const Report&) {
  throw InternalError("BsoClient in a build without libcurl");
}
void BsoClient::end_trial(const TrialKey&) {
  throw InternalError("BsoClient in a build without libcurl");
}

}  // namespace zeus::bso
