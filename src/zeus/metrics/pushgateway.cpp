#include "zeus/metrics/pushgateway.h"

#include <fmt/format.h>

#include "zeus/common/base64.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::metrics {

namespace {

bool plain_segment(const std::string& text) {
  for (const char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.' || c == ':';
    if (!ok) {
      return false;
    }
  }
  return !text.empty();
}

}  // namespace

std::string pushgateway_group_url(const PushgatewayOptions& options) {
  std::string base = options.url;
  while (!base.empty() && base.back() == '/') {
    base.pop_back();
  }
  if (!base.starts_with("http://") && !base.starts_with("https://")) {
    throw ConfigError(fmt::format(
        "Pushgateway URL '{}' is not http(s)://host:port (set ZEUS_PUSHGATEWAY_URL like "
        "http://127.0.0.1:9091)",
        options.url));
  }
  if (options.job.empty()) {
    throw ConfigError(
        "pushing job metrics needs a job id (ZEUS_JOB_ID): the Pushgateway groups "
        "by it");
  }
  if (plain_segment(options.job)) {
    return fmt::format("{}/metrics/job/{}", base, options.job);
  }
  return fmt::format("{}/metrics/job@base64/{}", base,
                     base64_encode(options.job, Base64::kUrlNoPadding));
}

Pusher::Pusher(PushgatewayOptions options)
    : options_(std::move(options)), url_(pushgateway_group_url(options_)) {
  send_check();
  thread_ = std::thread([this] { run(); });
}

Pusher::~Pusher() {
  flush();
  abort_ = true;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Pusher::push(std::vector<Family> families) {
  std::string body = render(families);
  {
    std::lock_guard lock(mu_);
    if (pending_) {
      ++finished_;  // the older state is replaced, never sent: it counts as done
    }
    pending_ = std::move(body);
    ++handed_;
  }
  cv_.notify_all();
}

bool Pusher::flush() {
  std::unique_lock lock(mu_);
  const uint64_t target = handed_;
  return cv_.wait_for(lock, options_.timeout, [&] { return finished_ >= target; });
}

uint64_t Pusher::sent() const {
  std::lock_guard lock(mu_);
  return sent_;
}

uint64_t Pusher::failed() const {
  std::lock_guard lock(mu_);
  return failed_;
}

void Pusher::run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || pending_; });
    if (!pending_) {
      return;  // stopping with nothing left
    }
    const std::string body = std::move(*pending_);
    pending_.reset();
    lock.unlock();
    const std::optional<std::string> error = send(body);
    lock.lock();
    if (error) {
      ++failed_;
      if (!failing_) {
        logger().warn(
            "metrics: pushing to {} failed: {}; training goes on, and later pushes "
            "are tried (said once)",
            url_, *error);
      }
    } else {
      ++sent_;
      if (failing_) {
        logger().info("metrics: pushing to {} works again", url_);
      }
    }
    failing_ = error.has_value();
    ++finished_;
    cv_.notify_all();
  }
}

}  // namespace zeus::metrics
