// Zeus 0.16's batch-size REST models (ref-zeus016.md 2.2) as JSON, both ways: the server
// (bso/) reads requests and writes answers, the client (client.h) the reverse. Read the way its
// pydantic v1 models read them: unknown fields ignored, defaults filled in, numbers given as
// strings or integral floats accepted where pydantic coerces them, anything else a 422 naming
// the field.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "zeus/optimize/bso_server_rules.h"

namespace zeus::bso {

using optimize::bso::JobParams;
using optimize::bso::Report;

// TrialId.
struct TrialKey {
  std::string job_id;
  int64_t batch_size = 0;
  int64_t trial_number = 0;
};

// Each throws optimize::bso::BsoError(422, ..., field) for malformed JSON, a missing required
// field or a value of the wrong type. parse_job_spec also applies upstream's validators.
struct JobSpecRequest {
  JobParams params;
  // zeus-cpp's fields "policy" ("zeus" | "lean") and "lean" (its knobs, "gamma=1.5,cap=0") were
  // given; upstream's client sends neither, and then the server's default applies.
  bool policy_given = false;
};
JobSpecRequest parse_job_spec(std::string_view body);
TrialKey parse_trial_id(std::string_view body);
// TrainingResult: a TrialId with time, energy, metric and current_epoch.
std::pair<std::string, Report> parse_training_result(std::string_view body);

// The answer to GET /jobs/batch_size: upstream's TrialId, and zeus-cpp's two extra fields
// (upstream's client ignores them) so that a client can stop the trial itself before it costs
// too much: "cost_threshold" (beta x the job's min cost, where both are known) and "epoch_cap"
// (lean's cap on this trial's epochs).
struct TrialGrant {
  TrialKey key;
  std::optional<double> cost_threshold;
  std::optional<int64_t> epoch_cap;
};
TrialGrant parse_trial_grant(std::string_view body);

// ReportResponse.
struct ReportAnswer {
  bool stop_train = false;
  bool converged = false;
  std::string message;
};
ReportAnswer parse_report_answer(std::string_view body);

// The bodies upstream answers with.
std::string job_spec_json(const JobParams& params);
std::string trial_id_json(const TrialKey& key);
std::string trial_grant_json(const TrialGrant& grant);
std::string report_response_json(bool stop_train, bool converged, const std::string& message);
// {"message": ...} (upstream's errors) and {"detail": [...]} (pydantic's 422).
std::string message_json(const std::string& message);
std::string validation_json(const std::string& field, const std::string& message);
// What an error body says: upstream's {"message"}, pydantic's {"detail"} (its fields and
// messages), else the body itself, shortened.
std::string error_text(std::string_view body);

// The client's requests: JobSpecFromClient (zeus-cpp's policy fields only when given), and
// TrainingResult.
std::string job_spec_request_json(const JobSpecRequest& request);
std::string training_result_json(const std::string& job_id, const Report& report);

}  // namespace zeus::bso
