#include "zeus/bso_client/wire.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "zeus/common/parse.h"

namespace zeus::bso {

namespace {

using nlohmann::json;
using optimize::bso::BsoError;

[[noreturn]] void bad(const std::string& field, const std::string& rule) {
  throw BsoError(422, fmt::format("{}: {}", field, rule), field);
}

json parse_object(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw BsoError(422, "the request body is not valid JSON", "body");
  }
  if (!j.is_object()) {
    throw BsoError(422, "the request body must be a JSON object", "body");
  }
  return j;
}

// The field's JSON value; std::nullopt when absent. A required field that is absent is a 422.
const json* field(const json& j, const char* name, bool required) {
  const auto it = j.find(name);
  if (it == j.end()) {
    if (required) {
      bad(name, "field required");
    }
    return nullptr;
  }
  return &*it;
}

// pydantic v1's int: integers, integral floats, and strings of them; not booleans... which it
// does accept as 0/1, so they are too.
int64_t as_int(const json& v, const char* name) {
  if (v.is_boolean()) {
    return v.get<bool>() ? 1 : 0;
  }
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      bad(name, "value is not a valid integer");
    }
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::trunc(d) && std::abs(d) < 9.2e18) {
      return static_cast<int64_t>(d);
    }
  }
  if (v.is_string()) {
    if (auto n = parse_number<int64_t>(v.get<std::string>())) {
      return *n;
    }
  }
  bad(name, "value is not a valid integer");
}

double as_float(const json& v, const char* name) {
  if (v.is_number() || v.is_boolean()) {
    return v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0) : v.get<double>();
  }
  if (v.is_string()) {
    if (auto d = parse_number<double>(v.get<std::string>())) {
      return *d;
    }
  }
  bad(name, "value is not a valid float");
}

bool as_bool(const json& v, const char* name) {
  if (v.is_boolean()) {
    return v.get<bool>();
  }
  if (v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1)) {
    return v.get<int64_t>() == 1;
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    for (const char* yes : {"1", "true", "True", "TRUE", "yes", "on", "y", "t"}) {
      if (s == yes) {
        return true;
      }
    }
    for (const char* no : {"0", "false", "False", "FALSE", "no", "off", "n", "f"}) {
      if (s == no) {
        return false;
      }
    }
  }
  bad(name, "value could not be parsed to a boolean");
}

std::string as_string(const json& v, const char* name) {
  if (v.is_string()) {
    return v.get<std::string>();
  }
  if (v.is_number()) {
    return v.dump();  // pydantic v1 turns numbers into strings
  }
  bad(name, "str type expected");
}

template <typename T, typename Read>
void read(const json& j, const char* name, T& out, Read read_value, bool required = false) {
  if (const json* v = field(j, name, required)) {
    out = read_value(*v, name);
  }
}

template <typename T, typename Read>
void read_optional(const json& j, const char* name, std::optional<T>& out, Read read_value) {
  if (const json* v = field(j, name, false)) {
    out = v->is_null() ? std::nullopt : std::optional<T>(read_value(*v, name));
  }
}

TrialKey read_trial_key(const json& j) {
  TrialKey k;
  read(j, "job_id", k.job_id, as_string, true);
  read(j, "batch_size", k.batch_size, as_int, true);
  read(j, "trial_number", k.trial_number, as_int, true);
  return k;
}

}  // namespace

JobSpecRequest parse_job_spec(std::string_view body) {
  const json j = parse_object(body);
  JobSpecRequest request;
  JobParams& p = request.params;
  std::optional<std::string> job_id;
  read_optional(j, "job_id", job_id, as_string);
  p.job_id = job_id.value_or("");
  read(j, "job_id_prefix", p.job_id_prefix, as_string, true);
  const json* sizes = field(j, "batch_sizes", true);
  if (!sizes->is_array()) {
    bad("batch_sizes", "value is not a valid list");
  }
  for (const json& v : *sizes) {
    p.batch_sizes.push_back(as_int(v, "batch_sizes"));
  }
  read(j, "default_batch_size", p.default_batch_size, as_int, true);
  read(j, "eta_knob", p.eta_knob, as_float);
  read_optional(j, "beta_knob", p.beta_knob, as_float);
  read(j, "target_metric", p.target_metric, as_float);
  read(j, "higher_is_better_metric", p.higher_is_better_metric, as_bool);
  read(j, "max_epochs", p.max_epochs, as_int);
  read(j, "num_pruning_rounds", p.num_pruning_rounds, as_int);
  read(j, "window_size", p.window_size, as_int);
  read(j, "mab_prior_mean", p.mab_prior_mean, as_float);
  read(j, "mab_prior_precision", p.mab_prior_precision, as_float);
  read(j, "mab_num_explorations", p.mab_num_explorations, as_int);
  read_optional(j, "mab_seed", p.mab_seed, as_int);
  read(j, "max_power", p.max_power_w, as_float, true);
  read(j, "number_of_gpus", p.number_of_gpus, as_int, true);
  read(j, "gpu_model", p.gpu_model, as_string, true);
  std::string policy = "zeus";
  std::string knobs;
  // null is "not given", as an absent field.
  const auto given = [&j](const char* name) { return j.contains(name) && !j[name].is_null(); };
  if (given("policy")) {
    read(j, "policy", policy, as_string);
  }
  if (given("lean")) {
    read(j, "lean", knobs, as_string);
  }
  request.policy_given = given("policy") || given("lean");
  try {
    p.policy = optimize::parse_policy_choice(policy, knobs);
  } catch (const ConfigError& e) {
    bad(j.contains("lean") && policy == "lean" ? "lean" : "policy", e.what());
  }
  optimize::bso::validate(p);
  return request;
}

TrialKey parse_trial_id(std::string_view body) {
  return read_trial_key(parse_object(body));
}

std::pair<std::string, Report> parse_training_result(std::string_view body) {
  const json j = parse_object(body);
  const TrialKey k = read_trial_key(j);
  Report r;
  r.trial_number = k.trial_number;
  r.batch_size = k.batch_size;
  read(j, "time", r.time_s, as_float, true);
  read(j, "energy", r.energy_j, as_float, true);
  read(j, "metric", r.metric, as_float, true);
  read(j, "current_epoch", r.current_epoch, as_int, true);
  return {k.job_id, r};
}

namespace {

nlohmann::ordered_json job_spec_object(const JobParams& p, bool with_policy) {
  nlohmann::ordered_json j;
  j["max_power"] = p.max_power_w;
  j["number_of_gpus"] = p.number_of_gpus;
  j["gpu_model"] = p.gpu_model;
  j["job_id"] = p.job_id;
  j["job_id_prefix"] = p.job_id_prefix;
  j["batch_sizes"] = p.batch_sizes;
  j["default_batch_size"] = p.default_batch_size;
  j["eta_knob"] = p.eta_knob;
  j["beta_knob"] = p.beta_knob ? nlohmann::ordered_json(*p.beta_knob) : nullptr;
  j["target_metric"] = p.target_metric;
  j["higher_is_better_metric"] = p.higher_is_better_metric;
  j["max_epochs"] = p.max_epochs;
  j["num_pruning_rounds"] = p.num_pruning_rounds;
  j["window_size"] = p.window_size;
  j["mab_prior_mean"] = p.mab_prior_mean;
  j["mab_prior_precision"] = p.mab_prior_precision;
  j["mab_num_explorations"] = p.mab_num_explorations;
  j["mab_seed"] = p.mab_seed ? nlohmann::ordered_json(*p.mab_seed) : nullptr;
  // zeus-cpp's; upstream's client and server ignore fields they do not know.
  if (with_policy) {
    j["policy"] = std::string(optimize::to_string(p.policy.policy));
    j["lean"] = p.policy.policy == optimize::BsoPolicy::kLean ? optimize::to_string(p.policy.lean)
                                                              : std::string();
  }
  return j;
}

}  // namespace

std::string job_spec_json(const JobParams& p) {
  return job_spec_object(p, true).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string job_spec_request_json(const JobSpecRequest& r) {
  nlohmann::ordered_json j = job_spec_object(r.params, r.policy_given);
  if (r.params.job_id.empty()) {
    j.erase("job_id");  // the service generates one from the prefix
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

nlohmann::ordered_json trial_key_object(const TrialKey& k) {
  nlohmann::ordered_json j;
  j["job_id"] = k.job_id;
  j["batch_size"] = k.batch_size;
  j["trial_number"] = k.trial_number;
  return j;
}

}  // namespace

std::string trial_id_json(const TrialKey& k) {
  return trial_key_object(k).dump();
}

std::string trial_grant_json(const TrialGrant& g) {
  nlohmann::ordered_json j = trial_key_object(g.key);
  if (g.cost_threshold) {
    j["cost_threshold"] = *g.cost_threshold;
  }
  if (g.epoch_cap) {
    j["epoch_cap"] = *g.epoch_cap;
  }
  return j.dump();
}

TrialGrant parse_trial_grant(std::string_view body) {
  const json j = parse_object(body);
  TrialGrant g{.key = read_trial_key(j)};
  read_optional(j, "cost_threshold", g.cost_threshold, as_float);
  read_optional(j, "epoch_cap", g.epoch_cap, as_int);
  return g;
}

ReportAnswer parse_report_answer(std::string_view body) {
  const json j = parse_object(body);
  ReportAnswer a;
  read(j, "stop_train", a.stop_train, as_bool, true);
  read(j, "converged", a.converged, as_bool, true);
  read(j, "message", a.message, as_string, true);
  return a;
}

std::string training_result_json(const std::string& job_id, const Report& r) {
  nlohmann::ordered_json j = trial_key_object({job_id, r.batch_size, r.trial_number});
  j["time"] = r.time_s;
  j["energy"] = r.energy_j;
  j["metric"] = r.metric;
  j["current_epoch"] = r.current_epoch;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string error_text(std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    return j["message"].get<std::string>();
  }
  if (j.is_object() && j.contains("detail")) {
    const json& d = j["detail"];
    if (d.is_string()) {
      return d.get<std::string>();
    }
    std::string out;
    for (const json& e : d.is_array() ? d : json::array()) {
      std::vector<std::string> loc;
      for (const json& part : e.value("loc", json::array())) {
        if (part != "body" && part != "query") {
          loc.push_back(part.is_string() ? part.get<std::string>() : part.dump());
        }
      }
      const std::string where = fmt::format("{}", fmt::join(loc, "."));
      const std::string msg = e.value("msg", std::string("invalid"));
      // zeus-cpp's messages name the field already; pydantic's do not.
      const bool named = where.empty() || msg.starts_with(where + ":");
      out += fmt::format("{}{}{}", out.empty() ? "" : "; ", named ? "" : where + ": ", msg);
    }
    if (!out.empty()) {
      return out;
    }
  }
  constexpr size_t kMax = 300;
  return body.size() <= kMax ? std::string(body) : std::string(body.substr(0, kMax)) + "...";
}

std::string report_response_json(bool stop_train, bool converged, const std::string& message) {
  nlohmann::ordered_json j;
  j["stop_train"] = stop_train;
  j["converged"] = converged;
  j["message"] = message;
  return j.dump();
}

std::string message_json(const std::string& message) {
  return json{{"message", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string validation_json(const std::string& field, const std::string& message) {
  nlohmann::ordered_json entry;
  entry["loc"] = field.empty() ? json::array({"body"}) : json::array({"body", field});
  entry["msg"] = message;
  entry["type"] = "value_error";
  return nlohmann::ordered_json{{"detail", json::array({entry})}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

}  // namespace zeus::bso
