#include "zeus/bso/service.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "zeus/common/logging.h"

namespace zeus::bso {

namespace {

using optimize::bso::BsoError;
using optimize::bso::NewTrial;
using optimize::bso::ReportDecision;
using optimize::bso::Stage;
using optimize::bso::StartMab;
using optimize::bso::TrialStatus;
using optimize::bso::TrialType;

int64_t next_trial_number(const Job& job) {
  return job.trials.empty() ? 1 : job.trials.back().trial_number + 1;
}

// Upstream's generated id: the prefix, a dash and 8 hex digits.
std::string generated_job_id(const std::string& prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}-{:08x}", prefix, rng() & 0xffffffffULL);
}

// The MAB's generator: with mab_seed, the one stored with the job (seeded on first use), so a
// seeded job draws the same sequence whichever server answers; without, a fresh one.
class JobRng {
 public:
  explicit JobRng(const Job& job) {
    if (!job.params.mab_seed) {
      rng_.seed(std::random_device{}());
      return;
    }
    seeded_ = true;
    if (job.rng_state) {
      std::istringstream in(*job.rng_state);
      in >> rng_;
      if (in) {
        return;
      }
      // Upstream's state is numpy's: start this job's sequence over from its seed.
    }
    rng_.seed(static_cast<uint64_t>(*job.params.mab_seed));
  }
  std::mt19937_64& get() { return rng_; }
  // The state to store, when the job is seeded.
  std::optional<std::string> state() const {
    if (!seeded_) {
      return std::nullopt;
    }
    std::ostringstream out;
    out << rng_;
    return out.str();
  }

 private:
  std::mt19937_64 rng_;
  bool seeded_ = false;
};

std::optional<std::string> query_value(const http::Request& r, const std::string& key) {
  for (const auto& [k, v] : r.query) {
    if (k == key) {
      return v;
    }
  }
  return std::nullopt;
}

std::string required_job_id(const http::Request& r) {
  auto id = query_value(r, "job_id");
  if (!id) {
    throw BsoError(422, "job_id: field required", "job_id");
  }
  return *id;
}

http::Response error_response(const BsoError& e) {
  if (e.http_status() == 422) {
    return http::Response::json(422, validation_json(e.field(), e.what()));
  }
  return http::Response::json(e.http_status(), message_json(e.what()));
}

}  // namespace

Service::Service(Store& store, ServiceOptions options)
    : store_(store), options_(std::move(options)) {}

Service::Registered Service::register_job(JobSpecRequest request) {
  // Two servers registering one new id at once: the second's insert finds the first's row, and
  // its retry finds the job registered.
  for (int attempt = 0;; ++attempt) {
    if (auto done = try_register(request); done || attempt == 2) {
      if (!done) {
        throw BsoError(500, fmt::format("job '{}' could not be registered: its id kept being "
                                        "taken by concurrent registrations",
                                        request.params.job_id));
      }
      return *done;
    }
  }
}

std::optional<Service::Registered> Service::try_register(JobSpecRequest request) {
  JobParams& params = request.params;
  auto tx = store_.begin();
  if (!request.policy_given) {
    params.policy = options_.default_policy;
  }
  if (params.job_id.empty()) {
    do {
      params.job_id = generated_job_id(params.job_id_prefix);
    } while (tx->lock_job(params.job_id));
  } else if (auto existing = tx->lock_job(params.job_id)) {
    if (!request.policy_given) {
      params.policy = existing->params.policy;  // a client that does not say keeps the job's
    }
    if (existing->params != params) {
      throw BsoError(409,
                     "JobSpec doesn't match with existing jobSpec. Use a new job_id for different "
                     "configuration");
    }
    return Registered{params, false};
  }
  Job job;
  job.params = params;
  job.exp_default_batch_size = params.default_batch_size;
  job.min_cost_batch_size = params.default_batch_size;
  if (!tx->insert_job(job)) {
    return std::nullopt;
  }
  tx->commit();
  return Registered{params, true};
}

TrialGrant Service::next_batch_size(const std::string& job_id) {
  auto tx = store_.begin();
  auto job = tx->lock_job(job_id);
  if (!job) {
    throw BsoError(400, fmt::format("Unknown job({}). Please register the job first", job_id));
  }
  const auto now = options_.now();
  if (options_.dispatched_timeout.count() > 0) {
    for (Trial& t : job->trials) {
      if (t.status == TrialStatus::kDispatched && now - t.start > options_.dispatched_timeout) {
        t.status = TrialStatus::kFailed;
        t.end = now;
        tx->update_trial(job_id, t);
        logger().warn("bso: trial {} of job '{}' (batch size {}) got no result in {} s: failed",
                      t.trial_number, job_id, t.batch_size, options_.dispatched_timeout.count());
      }
    }
  }
  bool job_changed = false;
  Trial trial;
  trial.trial_number = next_trial_number(*job);
  trial.start = now;
  trial.status = TrialStatus::kDispatched;
  if (job->stage == Stage::kPruning) {
    const auto step = optimize::bso::next_pruning_step(*job);
    if (const auto* t = std::get_if<NewTrial>(&step)) {
      trial.type = t->type;
      trial.batch_size = t->batch_size;
      trial.epoch_cap = t->epoch_cap;
    } else {
      for (int64_t arm : std::get<StartMab>(step).arms) {
        job->arms[arm] =
            ArmState{job->params.mab_prior_mean, job->params.mab_prior_precision, 0.0, 0};
        tx->put_arm(job_id, arm, job->arms[arm]);
      }
      job->stage = Stage::kMab;
      job_changed = true;
    }
  }
  if (job->stage == Stage::kMab) {
    JobRng rng(*job);
    trial.type = TrialType::kMab;
    trial.batch_size = optimize::bso::predict_mab(*job, rng.get());
    if (auto state = rng.state(); state != job->rng_state) {
      job->rng_state = std::move(state);
      job_changed = true;
    }
  }
  if (job_changed) {
    tx->update_job(*job);  // the stage, or a seeded job's generator; else the row stays as it is
  }
  tx->insert_trial(job_id, trial);
  tx->commit();
  TrialGrant grant{.key = {job_id, trial.batch_size, trial.trial_number},
                   .epoch_cap = trial.epoch_cap};
  if (job->params.beta_knob && job->min_cost) {
    grant.cost_threshold = *job->params.beta_knob * *job->min_cost;
  }
  return grant;
}

ReportDecision Service::report(const std::string& job_id, const optimize::bso::Report& report) {
  auto tx = store_.begin();
  auto job = tx->lock_job(job_id);
  if (!job) {
    throw BsoError(400, fmt::format("Unknown job {}", job_id));
  }
  ReportDecision d = optimize::bso::decide_report(*job, report);
  if (d.finished) {
    d.finished->end = options_.now();
    tx->update_trial(job_id, *d.finished);
  }
  if (d.new_min_cost) {
    job->min_cost = d.new_min_cost;
    job->min_cost_batch_size = d.new_min_cost_batch_size;
    tx->update_job(*job);
  }
  if (d.refit_arm) {
    tx->put_arm(job_id, report.batch_size, *d.refit_arm);
  }
  tx->commit();
  return d;
}

void Service::end_trial(const TrialKey& key) {
  auto tx = store_.begin();
  const auto job = tx->lock_job(key.job_id);
  const auto not_found = [&] {
    return BsoError(404, fmt::format("Could not find the trial: job_id='{}' batch_size={} "
                                     "trial_number={}",
                                     key.job_id, key.batch_size, key.trial_number));
  };
  if (!job) {
    throw not_found();
  }
  const auto it = std::find_if(job->trials.begin(), job->trials.end(), [&](const Trial& t) {
    return t.trial_number == key.trial_number && t.batch_size == key.batch_size;
  });
  if (it == job->trials.end()) {
    throw not_found();
  }
  if (it->status == TrialStatus::kDispatched) {
    Trial t = *it;
    t.status = TrialStatus::kFailed;
    t.end = options_.now();
    tx->update_trial(key.job_id, t);
    tx->commit();
  }
}

void Service::delete_job(const std::string& job_id) {
  auto tx = store_.begin();
  if (!tx->delete_job(job_id)) {
    throw BsoError(404, "No job was deleted.");
  }
  tx->commit();
}

http::Response Service::handle(const http::Request& r) {
  try {
    if (r.path == "/jobs" && r.method == "POST") {
      const Registered reg = register_job(parse_job_spec(r.body));
      return http::Response::json(reg.created ? 201 : 200, job_spec_json(reg.params));
    }
    if (r.path == "/jobs" && r.method == "DELETE") {
      delete_job(required_job_id(r));
      return http::Response::json(200, "null");
    }
    if (r.path == "/jobs/batch_size" && r.method == "GET") {
      return http::Response::json(200, trial_grant_json(next_batch_size(required_job_id(r))));
    }
    if (r.path == "/report" && r.method == "POST") {
      const auto [job_id, result] = parse_training_result(r.body);
      const ReportDecision d = report(job_id, result);
      return http::Response::json(200, report_response_json(d.stop_train, d.converged, d.message));
    }
    if (r.path == "/trials" && r.method == "PATCH") {
      end_trial(parse_trial_id(r.body));
      return http::Response::json(200, "null");
    }
    for (const char* path : {"/jobs", "/jobs/batch_size", "/report", "/trials"}) {
      if (r.path == path) {
        return http::Response::json(405, R"({"detail":"Method Not Allowed"})");
      }
    }
    return http::Response::json(404, R"({"detail":"Not Found"})");
  } catch (const BsoError& e) {
    return error_response(e);
  } catch (const std::exception& e) {
    logger().error("bso: {} {} failed: {}", r.method, r.path, e.what());
    return http::Response::json(500, message_json(e.what()));
  }
}

}  // namespace zeus::bso
