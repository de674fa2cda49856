// The etcd gateway's watch: one streaming POST to /v3/watch, read by libcurl's multi interface
// on a thread of its own (so that its destructor can wake and stop it at once). The gateway
// streams newline-delimited JSON: {"result": {"header": {"revision": R}, "created": true}}, then
// {"result": {"header": ..., "events": [{"type": "DELETE"?, "kv": {...}}]}} per batch, or
// {"result": {"canceled": true, ...}} / {"error": ...} when etcd ends it.
#include <curl/curl.h>
#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "zeus/launch/etcd/gateway_impl.h"

namespace zeus::launch::etcd {
namespace {

using json = nlohmann::json;

class CurlWatch final : public Gateway::Watch {
 public:
  CurlWatch(const GatewayOptions& o, const std::string& endpoint, const std::string& token,
            std::string body, Gateway::OnEvents on_events, std::function<void()> on_end)
      : body_(std::move(body)),
        on_events_(std::move(on_events)),
        on_end_(std::move(on_end)),
        multi_(curl_multi_init()),
        easy_(curl_easy_init()) {
    if (multi_ == nullptr || easy_ == nullptr) {
      throw InternalError("curl_multi_init/curl_easy_init failed");
    }
    apply_common_options(easy_, o);
    url_ = endpoint_url(o, endpoint, "watch");
    headers_ = curl_slist_append(nullptr, "Content-Type: application/json");
    if (!token.empty()) {
      headers_ = curl_slist_append(headers_, fmt::format("Authorization: {}", token).c_str());
    }
    curl_easy_setopt(easy_, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, headers_);
    curl_easy_setopt(easy_, CURLOPT_POSTFIELDS, body_.c_str());
    curl_easy_setopt(easy_, CURLOPT_POSTFIELDSIZE, static_cast<long>(body_.size()));
    curl_easy_setopt(easy_, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min<int64_t>(o.request_timeout.count(), 1000)));
    // A member that vanished without closing the connection (its machine, its network) is
    // noticed by TCP's keep-alive within a few seconds; the caller also follows the unary
    // calls' failover.
    curl_easy_setopt(easy_, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy_, CURLOPT_TCP_KEEPIDLE, 2L);
    curl_easy_setopt(easy_, CURLOPT_TCP_KEEPINTVL, 1L);
    curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(easy_, CURLOPT_WRITEDATA, this);
    curl_multi_add_handle(multi_, easy_);
    thread_ = std::thread([this] { run(); });
  }

  ~CurlWatch() override {
    stop_ = true;
    curl_multi_wakeup(multi_);
    thread_.join();
    curl_multi_remove_handle(multi_, easy_);
    curl_easy_cleanup(easy_);
    curl_multi_cleanup(multi_);
    curl_slist_free_all(headers_);
  }

  std::optional<std::string> ended() const override {
    std::lock_guard lock(mu_);
    return ended_;
  }

 private:
  void run() {
    int running = 1;
    while (!stop_) {
      curl_multi_perform(multi_, &running);
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
        if (msg->msg == CURLMSG_DONE) {
          const CURLcode rc = msg->data.result;
          end(rc == CURLE_OK ? std::string("the endpoint closed the stream")
                             : std::string(curl_easy_strerror(rc)));
        }
      }
      if (!running || ended()) {
        end("the stream ended");
        return;
      }
      curl_multi_poll(multi_, nullptr, 0, 1000, nullptr);
    }
  }

  static size_t on_data(char* data, size_t size, size_t n, void* self) {
    auto* w = static_cast<CurlWatch*>(self);
    w->buffer_.append(data, size * n);
    for (size_t nl; (nl = w->buffer_.find('\n')) != std::string::npos;) {
      const std::string line = w->buffer_.substr(0, nl);
      w->buffer_.erase(0, nl + 1);
      if (!w->line(line)) {
        return 0;  // aborts the transfer
      }
    }
    if (w->buffer_.size() > kMaxResponseBytes) {
      w->end("a watch message over the size limit");
      return 0;
    }
    return size * n;
  }

  // One message of the stream; false ends the watch.
  bool line(const std::string& text) {
    try {
      return read_line(text);
    } catch (const std::exception& e) {
      end(fmt::format("a watch message could not be read: {}", e.what()));
      return false;
    }
  }

  bool read_line(const std::string& text) {
    if (text.empty() || ended()) {
      return !ended();
    }
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      end(fmt::format("the watch sent something that is not JSON: '{}'", text.substr(0, 120)));
      return false;
    }
    if (const auto error = j.find("error"); error != j.end()) {
      end(fmt::format("etcd ended the watch: {}", error->dump().substr(0, 200)));
      return false;
    }
    const auto result = j.find("result");
    if (result == j.end() || !result->is_object()) {
      return true;
    }
    if (result->value("canceled", false)) {
      end(fmt::format("etcd cancelled the watch: {}", result->dump().substr(0, 200)));
      return false;
    }
    const auto events = result->find("events");
    if (events == result->end() || !events->is_array()) {
      return true;  // created, or a progress notification
    }
    std::vector<WatchEvent> batch;
    for (const auto& e : *events) {
      WatchEvent event;
      event.deleted = e.value("type", "") == "DELETE";
      event.kv = parse_kv(e.at("kv"));
      batch.push_back(std::move(event));
    }
    int64_t revision = 0;
    if (const auto h = result->find("header"); h != result->end()) {
      revision = parse_range(json{{"header", *h}}).revision;
    }
    on_events_(batch, revision);
    return true;
  }

  void end(const std::string& why) {
    {
      std::lock_guard lock(mu_);
      if (ended_) {
        return;
      }
      ended_ = why;
    }
    if (on_end_) {
      on_end_();
    }
  }

  std::string body_;
  std::string url_;
  Gateway::OnEvents on_events_;
  std::function<void()> on_end_;
  CURLM* multi_;
  CURL* easy_;
  curl_slist* headers_ = nullptr;
  std::string buffer_;  // the watch thread's only
  mutable std::mutex mu_;
  std::optional<std::string> ended_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Gateway::Watch> start_watch(const GatewayOptions& o, const std::string& endpoint,
                                            const std::string& token, std::string body,
                                            Gateway::OnEvents on_events,
                                            std::function<void()> on_end) {
  return std::make_unique<CurlWatch>(o, endpoint, token, std::move(body), std::move(on_events),
                                     std::move(on_end));
}

}  // namespace zeus::launch::etcd
