// ZeusdClient in a build without libcurl (ZEUS_WITH_ZEUSD_CLIENT=OFF, as on a machine with no
// -dev packages): constructing one says so, with what to do, instead of failing to link.
#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/device/zeusd/zeusd_client.h"
#include "zeus/http_client/client.h"

namespace zeus::device::zeusd {

ZeusdClient::ZeusdClient(ZeusdEndpoint endpoint) : endpoint_(std::move(endpoint)) {
  throw ConfigError(fmt::format(
      "{} is configured (ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT), but this zeus-cpp was built "
      "without libcurl (ZEUS_WITH_ZEUSD_CLIENT=OFF) and cannot reach it: rebuild with "
      "libcurl4-openssl-dev installed, or unset the variable (then setting limits needs root; "
      "--measure-only sets none)",
      endpoint_.describe()));
}

ZeusdClient::~ZeusdClient() = default;

ZeusdReply ZeusdClient::request(std::string_view, std::string_view) {
  throw InternalError("ZeusdClient::request in a build without libcurl");
}

std::vector<DaemonGpu> ZeusdClient::discover_gpus() {
  throw InternalError("ZeusdClient::discover_gpus in a build without libcurl");
}

void ZeusdClient::set_power_limit_mw(int, int64_t) {
  throw InternalError("ZeusdClient::set_power_limit_mw in a build without libcurl");
}

void ZeusdClient::gpu_command(int, std::string_view, std::string_view, std::string_view) {
  throw InternalError("ZeusdClient::gpu_command in a build without libcurl");
}

}  // namespace zeus::device::zeusd
