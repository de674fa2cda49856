// The Pusher's transport over libcurl (built where zeus-cpp has its HTTP clients).
#include <curl/curl.h>
#include <fmt/format.h>

#include "zeus/metrics/pushgateway.h"

namespace zeus::metrics {

namespace {

size_t discard(char*, size_t size, size_t n, void*) {
  return size * n;
}

// Non-zero aborts the transfer: the Pusher is being destroyed.
int abort_check(void* abort, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<std::atomic<bool>*>(abort)->load() ? 1 : 0;
}

}  // namespace

void Pusher::send_check() {}

std::optional<std::string> Pusher::send(const std::string& body) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    return "curl_easy_init failed";
  }
  curl_slist* headers =
      curl_slist_append(nullptr, fmt::format("Content-Type: {}", kTextContentType).c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, abort_check);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &abort_);
  std::optional<std::string> error;
  const CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK) {
    error = curl_easy_strerror(rc);
  } else {
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status >= 300) {
      error = fmt::format("HTTP {}", status);
    }
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return error;
}

}  // namespace zeus::metrics
