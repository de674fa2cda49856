// Pushing a job's metrics to a Prometheus Pushgateway (PUT /metrics/job/<job>: the group's
// metrics replaced by the latest state), off the training thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "zeus/metrics/exposition.h"

namespace zeus::metrics {

struct PushgatewayOptions {
  std::string url;  // http://host:9091 (a trailing '/' is dropped)
  std::string job;  // the grouping key's job; any text (sent base64-encoded where it must be)
  // The longest one push may take, and the longest the destructor waits for the last one.
  std::chrono::milliseconds timeout{2000};
};

// The group's URL: <url>/metrics/job/<job>, or .../job@base64/<base64url> for a job id with
// characters a path segment cannot carry as they are. Throws ConfigError for an empty job or a
// URL that is not http(s)://.
std::string pushgateway_group_url(const PushgatewayOptions& options);

// Contract: push() never waits for the network: it hands the state to a background thread that
// sends it; a newer state replaces one not yet sent (bursts coalesce, the latest wins). A push
// that fails is logged once (and its recovery once) and dropped; training never sees it.
// flush() waits, at most `timeout`, until the last state handed in was sent (or failed). The
// destructor flushes, then aborts a send still in flight (within about a second: libcurl's
// progress callback) and stops the thread; the last state stays in the Pushgateway for the
// operator. Throws ConfigError at construction when the URL is invalid or this build has no
// HTTP client (libcurl).
class Pusher {
 public:
  explicit Pusher(PushgatewayOptions options);
  ~Pusher();
  Pusher(const Pusher&) = delete;
  Pusher& operator=(const Pusher&) = delete;

  void push(std::vector<Family> families);
  // True when everything handed in was sent (or failed) within `timeout`.
  bool flush();
  uint64_t sent() const;
  uint64_t failed() const;
  const std::string& group_url() const { return url_; }

 private:
  void run();
  // Throws ConfigError where this build cannot push (no libcurl).
  void send_check();
  // One PUT of `body`; the error text, or std::nullopt on success (2xx).
  std::optional<std::string> send(const std::string& body);

  PushgatewayOptions options_;
  std::string url_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::string> pending_;
  uint64_t handed_ = 0;    // states handed in
  uint64_t finished_ = 0;  // states sent or failed (coalesced ones count as finished)
  uint64_t sent_ = 0;
  uint64_t failed_ = 0;
  bool failing_ = false;
  bool stopping_ = false;
  std::atomic<bool> abort_{false};  // read by the send's progress callback
  std::thread thread_;
};

}  // namespace zeus::metrics
