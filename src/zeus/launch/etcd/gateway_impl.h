// What the gateway's unary calls (gateway_curl.cpp) and its watch (gateway_watch_curl.cpp)
// share. Internal to etcd/.
#pragma once

#include <curl/curl.h>

#include <nlohmann/json.hpp>
#include <string>

#include "zeus/launch/etcd/gateway.h"

namespace zeus::launch::etcd {

// No answer of the rendezvous's comes near this; a larger one is cut off as an error.
inline constexpr size_t kMaxResponseBytes = size_t{64} << 20;

KeyValue parse_kv(const nlohmann::json& j);
RangeResult parse_range(const nlohmann::json& j);
// No signals, no proxy, TLS files: what every handle of the gateway sets.
void apply_common_options(CURL* curl, const GatewayOptions& o);
std::string endpoint_url(const GatewayOptions& o, const std::string& endpoint,
                         const std::string& path);
std::unique_ptr<Gateway::Watch> start_watch(const GatewayOptions& o, const std::string& endpoint,
                                            const std::string& token, std::string body,
                                            Gateway::OnEvents on_events,
                                            std::function<void()> on_end);

}  // namespace zeus::launch::etcd
