// The batch-size optimizer service: upstream Zeus 0.16's five routes (ref-zeus016.md 2.1) over a
// Store. Each request is one transaction that locks the job it names, asks optimize/'s rules,
// and stores their answer, so any number of these (threads, or servers on one database) agree.
#pragma once

#include <chrono>
#include <functional>
#include <random>

#include "zeus/bso/store.h"
#include "zeus/bso_client/wire.h"
#include "zeus/http/server.h"

namespace zeus::bso {

struct ServiceOptions {
  // A Dispatched trial older than this is marked Failed when its job is next asked for a batch
  // size, so a client that died without its atexit does not stall the job (upstream waits
  // forever). Zero: never.
  std::chrono::seconds dispatched_timeout{0};
  // The policy of a job registered without zeus-cpp's "policy" field (upstream's clients).
  optimize::PolicyChoice default_policy;
  // The clock trials are stamped with (tests move it).
  std::function<std::chrono::system_clock::time_point()> now = [] {
    return std::chrono::system_clock::now();
  };
};

class Service {
 public:
  Service(Store& store, ServiceOptions options);

  // The HTTP face: routes a request to the operations below and answers with upstream's status
  // codes and bodies. Never throws.
  http::Response handle(const http::Request& request);

  // The operations. Each throws optimize::bso::BsoError with upstream's status, or
  // DatabaseError.
  struct Registered {
    JobParams params;  // with job_id filled in
    bool created;
  };
  Registered register_job(JobSpecRequest request);
  TrialGrant next_batch_size(const std::string& job_id);
  optimize::bso::ReportDecision report(const std::string& job_id,
                                       const optimize::bso::Report& report);
  void end_trial(const TrialKey& key);
  void delete_job(const std::string& job_id);

 private:
  std::optional<Registered> try_register(JobSpecRequest request);

  Store& store_;
  ServiceOptions options_;
};

}  // namespace zeus::bso
