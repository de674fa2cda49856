#include "zeus/bso_client/client.h"

#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/http_client/client.h"

namespace zeus::bso {

namespace {

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
  http_ = std::make_unique<http_client::Client>(http_client::ClientOptions{
      .connect_timeout = options_.connect_timeout, .total_timeout = options_.request_timeout});
}

BsoClient::~BsoClient() = default;

BsoClient::Reply BsoClient::call(const char* method, const std::string& target,
                                 const std::string& body, const char* what) {
  http_client::Request request;
  request.method = method;
  request.url = url_ + target;
  request.headers = {"Content-Type: application/json"};
  request.body = body;
  try {
    http_client::Reply reply = http_->perform(request);
    return Reply{reply.status, std::move(reply.body)};
  } catch (const IoError& e) {
    throw IoError(fmt::format(
        "cannot reach the batch-size service at {} ({}): {}; check that `zeus bso-server` runs "
        "there and the URL (ZEUS_BSO_SERVER_URL, --server) is right",
        url_, what, e.what()));
  }
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
  const std::string target =
      fmt::format("/jobs/batch_size?job_id={}", http_client::percent_encode(job_id));
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
