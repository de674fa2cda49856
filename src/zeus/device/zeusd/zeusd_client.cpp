#include "zeus/device/zeusd/zeusd_client.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/http_client/client.h"

namespace zeus::device::zeusd {

namespace {

// The daemon's message from {"error": ...} or {"errors": {...}}, else the body as it is.
std::string message_of(const std::string& body) {
  try {
    const auto j = nlohmann::json::parse(body);
    if (j.contains("error")) {
      return j["error"].get<std::string>();
    }
    if (j.contains("errors")) {
      std::string out;
      for (const auto& [id, msg] : j["errors"].items()) {
        out += fmt::format("{}GPU {}: {}", out.empty() ? "" : "; ", id, msg.get<std::string>());
      }
      return out;
    }
  } catch (const nlohmann::json::exception&) {
  }
  return body;
}

}  // namespace

ZeusdClient::ZeusdClient(ZeusdEndpoint endpoint)
    : endpoint_(std::move(endpoint)),
      http_(std::make_unique<http_client::Client>(
          http_client::ClientOptions{.unix_socket = endpoint_.socket_path})) {}

ZeusdClient::~ZeusdClient() = default;

ZeusdReply ZeusdClient::request(std::string_view method, std::string_view target) {
  http_client::Request r;
  r.method = std::string(method);
  r.url = endpoint_.socket_path.empty() ? fmt::format("http://{}{}", endpoint_.host_port, target)
                                        : fmt::format("http://localhost{}", target);
  if (!endpoint_.token.empty()) {
    r.headers.push_back("Authorization: Bearer " + endpoint_.token);
  }
  if (!endpoint_.admin_token.empty()) {
    r.headers.push_back("X-Zeusd-Admin-Token: " + endpoint_.admin_token);
  }
  try {
    http_client::Reply reply = http_->perform(r);
    return ZeusdReply{reply.status, std::move(reply.body)};
  } catch (const IoError& e) {
    throw IoError(fmt::format(
        "{} ({}); check that zeusd runs (systemctl status zeusd) and that this user may use its "
        "socket, or unset {} to set limits through NVML",
        e.what(), endpoint_.describe(),
        endpoint_.socket_path.empty() ? kEnvZeusdHostPort.name : kEnvZeusdSockPath.name));
  }
}

std::vector<DaemonGpu> ZeusdClient::discover_gpus() {
  const ZeusdReply r = request("GET", "/discover");
  std::vector<DaemonGpu> out;
  try {
    if (r.status != 200) {
      throw IoError(fmt::format("HTTP {}: {}", r.status, message_of(r.body)));
    }
    const auto reply = nlohmann::json::parse(r.body);  // alive for the loop (not a temporary)
    for (const auto& g : reply.at("gpus")) {
      out.push_back(DaemonGpu{.id = g.at("id").get<int>(),
                              .name = g.value("name", ""),
                              .uuid = g.value("uuid", ""),
                              .pci_address = g.value("pci_address", "")});
    }
  } catch (const std::exception& e) {
    throw IoError(fmt::format("{} answered GET /discover with no GPU list ({}); is it zeusd?",
                              endpoint_.describe(), e.what()));
  }
  return out;
}

void ZeusdClient::set_power_limit_mw(int gpu_id, int64_t limit_mw) {
  gpu_command(gpu_id, "set_power_limit", fmt::format("power_limit_mw={}", limit_mw),
              fmt::format("power limit {} mW", limit_mw));
}

void ZeusdClient::gpu_command(int gpu_id, std::string_view route, std::string_view params,
                              std::string_view what_change) {
  const ZeusdReply r = request("POST", fmt::format("/gpu/{}?gpu_ids={}{}{}&block=true", route,
                                                   gpu_id, params.empty() ? "" : "&", params));
  if (r.status == 200) {
    return;
  }
  const std::string what =
      fmt::format("{} refused {} on GPU {} (HTTP {}): {}", endpoint_.describe(), what_change,
                  gpu_id, r.status, message_of(r.body));
  switch (r.status) {
    case 400:
      throw ConfigError(what);
    case 401:
    case 403:
      throw PermissionError(what + "; check ZEUSD_TOKEN's scopes (gpu-control)");
    case 409:
      throw PermissionError(what);
    case 404:
      throw NotSupported(what + "; that zeusd does not serve gpu-control");
    default:
      throw DeviceError(what);
  }
}

}  // namespace zeus::device::zeusd
