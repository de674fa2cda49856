// A client of the batch-size service (`zeus bso-server`, or Zeus 0.16's server): upstream's
// protocol (ref-zeus016.md 2.5) over libcurl, for the programs that are not Python: the train
// loader (job/batch_size_trial.h) and `zeus tune --server`. One connection, kept and reused;
// calls are serialized.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "zeus/bso_client/wire.h"

namespace zeus::http_client {
class Client;
}  // namespace zeus::http_client

namespace zeus::bso {

struct BsoClientOptions {
  std::string url;  // "http://host:port", as upstream's server_url (a path prefix is kept)
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{60'000};
};

// Every call throws IoError naming the URL when the service cannot be reached or answers what
// is not upstream's model, and for an error status: ConfigError for what the caller can fix
// (409: another spec under this job id; 422: a field; 400 and 404: an unknown job or trial),
// Error otherwise (500), each with the service's own message.
class BsoClient {
 public:
  // Throws ConfigError for a URL that is not http:// or https://.
  explicit BsoClient(BsoClientOptions options);
  ~BsoClient();
  BsoClient(const BsoClient&) = delete;
  BsoClient& operator=(const BsoClient&) = delete;

  // POST /jobs: the job as the service holds it (its job_id filled in when it generated one).
  JobParams register_job(const JobSpecRequest& request);
  // GET /jobs/batch_size: the next trial.
  TrialGrant next_trial(const std::string& job_id);
  // POST /report: the trial's totals so far.
  ReportAnswer report(const std::string& job_id, const Report& report);
  // PATCH /trials: a trial that will report no more (a Dispatched one becomes Failed).
  void end_trial(const TrialKey& key);

  const std::string& url() const { return url_; }

 private:
  struct Reply {
    long status = 0;
    std::string body;
  };
  Reply call(const char* method, const std::string& target, const std::string& body,
             const char* what);
  // The reply of a call that must succeed; throws as the class comment says.
  std::string expect_ok(const Reply& reply, const char* what);

  std::string url_;  // without a trailing '/'
  BsoClientOptions options_;
  std::unique_ptr<http_client::Client> http_;  // one connection, reused
};

}  // namespace zeus::bso
