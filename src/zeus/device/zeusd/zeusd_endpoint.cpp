// ZeusdEndpoint: the part of the client every build has (with or without libcurl).
#include <fmt/format.h>

#include "zeus/common/env.h"
#include "zeus/device/zeusd/zeusd_client.h"

namespace zeus::device::zeusd {

std::optional<ZeusdEndpoint> ZeusdEndpoint::from_env() {
  ZeusdEndpoint e;
  e.token = get_env(kEnvZeusdToken).value_or("");
  if (auto sock = get_env(kEnvZeusdSockPath)) {
    e.socket_path = *sock;
    return e;
  }
  if (auto hp = get_env(kEnvZeusdHostPort)) {
    e.host_port = *hp;
    return e;
  }
  return std::nullopt;
}

std::string ZeusdEndpoint::describe() const {
  return socket_path.empty() ? fmt::format("zeusd at {} (TCP)", host_port)
                             : fmt::format("zeusd at {}", socket_path);
}

}  // namespace zeus::device::zeusd
