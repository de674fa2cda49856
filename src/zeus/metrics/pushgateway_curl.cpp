// The Pusher's transport over the one HTTP client (built where zeus-cpp has its HTTP clients).
#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/http_client/client.h"
#include "zeus/metrics/pushgateway.h"

namespace zeus::metrics {

void Pusher::send_check() {}

std::optional<std::string> Pusher::send(const std::string& body) {
  // The Pushgateway's answer is a status and at most a line of text: 64 KiB is plenty.
  http_client::Client client(
      http_client::ClientOptions{.total_timeout = options_.timeout, .max_body_bytes = 64 * 1024});
  http_client::Request request;
  request.method = "PUT";
  request.url = url_;
  request.headers = {fmt::format("Content-Type: {}", kTextContentType)};
  request.body = body;
  request.abort = [this] { return abort_.load(); };  // the Pusher is being destroyed
  try {
    const http_client::Reply reply = client.perform(request);
    if (reply.status < 200 || reply.status >= 300) {
      return fmt::format("HTTP {}", reply.status);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return std::nullopt;
}

}  // namespace zeus::metrics
