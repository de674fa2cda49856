// The client in a build without libcurl: every request says so.
#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/http_client/client.h"

namespace zeus::http_client {

bool available() {
  return false;
}

Client::Client(ClientOptions options) : options_(std::move(options)) {}

Client::~Client() = default;

Reply Client::perform(const Request& request) {
  throw NotSupported(fmt::format(
      "cannot reach {}: this build of zeus-cpp has no HTTP client (libcurl was not found when "
      "it was configured: install libcurl4-openssl-dev and rebuild)",
      request.url));
}

}  // namespace zeus::http_client
