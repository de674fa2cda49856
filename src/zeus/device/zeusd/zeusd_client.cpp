#include "zeus/device/zeusd/zeusd_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"

namespace zeus::device::zeusd {

namespace {

size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

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

ZeusdClient::ZeusdClient(ZeusdEndpoint endpoint) : endpoint_(std::move(endpoint)) {
  static const CURLcode init = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (init != CURLE_OK || (curl_ = curl_easy_init()) == nullptr) {
    throw InternalError("libcurl failed to initialize");
  }
}

ZeusdClient::~ZeusdClient() {
  curl_easy_cleanup(static_cast<CURL*>(curl_));
}

ZeusdReply ZeusdClient::request(std::string_view method, std::string_view target) {
  std::lock_guard lock(mu_);
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);
  ZeusdReply reply;
  const std::string url = endpoint_.socket_path.empty()
                              ? fmt::format("http://{}{}", endpoint_.host_port, target)
                              : fmt::format("http://localhost{}", target);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  if (!endpoint_.socket_path.empty()) {
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, endpoint_.socket_path.c_str());
  }
  const std::string m(method);
  if (m == "POST") {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
  } else if (m != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, m.c_str());
  }
  curl_slist* headers = nullptr;
  if (!endpoint_.token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + endpoint_.token).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    throw IoError(fmt::format(
        "cannot reach {}: {}; check that zeusd runs (systemctl status zeusd) and that this user "
        "may use its socket, or unset {} to set limits through NVML",
        endpoint_.describe(), curl_easy_strerror(rc),
        endpoint_.socket_path.empty() ? kEnvZeusdHostPort.name : kEnvZeusdSockPath.name));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

void ZeusdClient::set_power_limit_mw(int nvml_index, int64_t limit_mw) {
  gpu_command(nvml_index, "set_power_limit", fmt::format("power_limit_mw={}", limit_mw),
              fmt::format("power limit {} mW", limit_mw));
}

void ZeusdClient::gpu_command(int nvml_index, std::string_view route, std::string_view params,
                              std::string_view what_change) {
  const ZeusdReply r = request("POST", fmt::format("/gpu/{}?gpu_ids={}{}{}&block=true", route,
                                                   nvml_index, params.empty() ? "" : "&", params));
  if (r.status == 200) {
    return;
  }
  const std::string what =
      fmt::format("{} refused {} on GPU {} (HTTP {}): {}", endpoint_.describe(), what_change,
                  nvml_index, r.status, message_of(r.body));
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
