// Zeus 0.16's batch-size REST models (ref-zeus016.md 2.2) as JSON, read the way its pydantic v1
// models read them: unknown fields ignored, defaults filled in, numbers given as strings or
// integral floats accepted where pydantic coerces them, anything else a 422 naming the field.
#pragma once

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

// The bodies upstream answers with.
std::string job_spec_json(const JobParams& params);
std::string trial_id_json(const TrialKey& key);
std::string report_response_json(bool stop_train, bool converged, const std::string& message);
// {"message": ...} (upstream's errors) and {"detail": [...]} (pydantic's 422).
std::string message_json(const std::string& message);
std::string validation_json(const std::string& field, const std::string& message);

}  // namespace zeus::bso
