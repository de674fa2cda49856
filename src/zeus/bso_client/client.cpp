#include "zeus/bso_client/client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include "zeus/common/errors.h"

namespace zeus::bso {

namespace {

size_t collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// A malformed answer is the service's fault, not the caller's: IoError, not the 422 the
// parsers throw for a request.
template <typename Parse>
auto parse_answer(const std::string& url, const char* what, const std::string& body, Parse parse) {
  try {
    return parse(body);
  } catch (const optimize::bso::BsoError& e) {
    throw IoError(
        fmt::format("the batch-size service at {} answered {} with what is not Zeus "
                    "0.16's model ({}): {}",
                    url, what, e.what(), error_text(body)));
  }
}

}  // namespace

BsoClient::BsoClient(BsoClientOptions options) : options_(std::move(options)) {
  url_ = options_.url;
  while (!url_.empty() && url_.back() == '/') {
    url_.pop_back();
  }
  if (!url_.starts_with("http://") && !url_.starts_with("https://")) {
    throw ConfigError(fmt::format(
        "the batch-size service's URL '{}' is not http://host:port (or https://); give the "
        "address `zeus bso-server` listens on, e.g. http://127.0.0.1:8000",
        options_.url));
  }
  static const CURLcode init = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (init != CURLE_OK || (curl_ = curl_easy_init()) == nullptr) {
    throw InternalError("libcurl failed to initialize");
  }
}

BsoClient::~BsoClient() {
  curl_easy_cleanup(static_cast<CURL*>(curl_));
}

BsoClient::Reply BsoClient::call(const char* method, const std::string& target,
                                 const std::string& body, const char* what) {
  std::lock_guard lock(mu_);
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);
  Reply reply;
  const std::string url = url_ + target;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  const std::string m(method);
  if (m == "POST") {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
  } else if (m != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  }
  if (m != "GET") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  }
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout.count()));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    throw IoError(fmt::format(
        "cannot reach the batch-size service at {} ({}): {}; check that `zeus bso-server` runs "
        "there and the URL (ZEUS_BSO_SERVER_URL, --server) is right",
        url_, what, curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

std::string BsoClient::expect_ok(const Reply& r, const char* what) {
  if (r.status >= 200 && r.status < 300) {
    return r.body;
  }
  const std::string said = fmt::format("the batch-size service at {} refused {} (HTTP {}): {}",
                                       url_, what, r.status, error_text(r.body));
  switch (r.status) {
    case 409:
      throw ConfigError(said +
                        "; a job id names one spec (batch sizes, knobs, GPUs): give this one a "
                        "new job id, or register it as it was");
    case 400:
    case 404:
    case 422:
      throw ConfigError(said);
    default:
      throw Error(said);
  }
}

JobParams BsoClient::register_job(const JobSpecRequest& request) {
  const Reply r = call("POST", "/jobs", job_spec_request_json(request), "the job's registration");
  const std::string body = expect_ok(r, "the job's registration");
  return parse_answer(url_, "the registration", body,
                      [](const std::string& b) { return parse_job_spec(b).params; });
}

TrialGrant BsoClient::next_trial(const std::string& job_id) {
  char* escaped = curl_easy_escape(nullptr, job_id.c_str(), static_cast<int>(job_id.size()));
  const std::string target = fmt::format("/jobs/batch_size?job_id={}", escaped ? escaped : "");
  curl_free(escaped);
  const Reply r = call("GET", target, "", "a batch size");
  const std::string body = expect_ok(r, "a batch size");
  return parse_answer(url_, "the batch-size request", body, parse_trial_grant);
}

ReportAnswer BsoClient::report(const std::string& job_id, const Report& report) {
  const Reply r = call("POST", "/report", training_result_json(job_id, report), "a report");
  const std::string body = expect_ok(r, "a report");
  return parse_answer(url_, "the report", body, parse_report_answer);
}

void BsoClient::end_trial(const TrialKey& key) {
  expect_ok(call("PATCH", "/trials", trial_id_json(key), "the trial's end"), "the trial's end");
}

}  // namespace zeus::bso
