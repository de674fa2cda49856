#include "zeus/daemon/job_energy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/power.h"

namespace zeus::daemon {

namespace {

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void check_job_id(const std::string& job) {
  // 330: "pod:" + a namespace (63) + ":" + a pod name (253), zeusd's own pod records.
  bool ok = !job.empty() && job.size() <= 330;
  for (const char c : job) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == ':' || c == '-');
  }
  if (!ok) {
    throw ConfigError(fmt::format(
        "job id '{}': use 1 to 330 of letters, digits and . _ : - (a Slurm job id is)", job));
  }
}

JobEnergyBook::JobEnergyBook(GpuControl& gpus, JobEnergyOptions options)
    : gpus_(gpus), options_(std::move(options)) {
  if (!std::filesystem::exists(options_.file)) {
    return;
  }
  try {
    const auto j = nlohmann::json::parse(read_file(options_.file));
    for (const auto& r : j.at("jobs")) {
      Record rec = from_json(r);
      next_sequence_ = std::max(next_sequence_, rec.sequence + 1);
      records_[rec.job] = std::move(rec);
    }
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(
        fmt::format("job energy records {} are corrupt ({}); move the file away "
                    "(its records are lost to reports) and restart zeusd",
                    options_.file.string(), e.what()));
  }
}

std::map<int, double> JobEnergyBook::read_counters(const std::vector<int>& gpus) const {
  std::map<int, double> out;
  for (const int g : gpus) {
    if (gpus_.identity(g).energy_available) {
      out[g] = mj_to_j(static_cast<int64_t>(gpus_.energy_mj(g)));
    }
  }
  return out;
}

nlohmann::json JobEnergyBook::start(const std::string& job, std::vector<int> gpus,
                                    std::map<int, kube::DeviceOwner> pods) {
  check_job_id(job);
  if (gpus.empty()) {
    for (int g = 0; g < gpus_.count(); ++g) {
      gpus.push_back(g);
    }
  }
  for (const int g : gpus) {
    if (g < 0 || g >= gpus_.count()) {
      throw ConfigError(fmt::format("GPU {} not found: this machine has {}", g, gpus_.count()));
    }
  }
  Record r;
  r.job = job;
  r.gpus = gpus;
  r.start_energy_j = read_counters(gpus);
  r.start_unix_s = unix_now_s();
  r.pods = std::move(pods);
  if (r.pods.empty() && options_.pod_of) {
    for (const int g : gpus) {
      if (auto pod = options_.pod_of(g)) {
        r.pods[g] = std::move(*pod);
      }
    }
  }
  std::lock_guard lock(mu_);
  if (const auto it = records_.find(job); it != records_.end() && !it->second.end_unix_s) {
    throw ConfigError(
        fmt::format("job {} is already being measured (since its start at {:.0f}); "
                    "stop it first",
                    job, it->second.start_unix_s));
  }
  r.sequence = next_sequence_++;
  records_[job] = r;
  // Bounded: the oldest finished records go first.
  while (records_.size() > options_.max_records) {
    auto oldest = records_.end();
    for (auto it = records_.begin(); it != records_.end(); ++it) {
      if (it->second.end_unix_s &&
          (oldest == records_.end() || it->second.sequence < oldest->second.sequence)) {
        oldest = it;
      }
    }
    if (oldest == records_.end()) {
      break;
    }
    records_.erase(oldest);
  }
  save();
  logger().info("job energy: {} started on GPU(s) {}", job, fmt::join(gpus, ","));
  return report_of(r);
}

nlohmann::json JobEnergyBook::stop(const std::string& job) {
  check_job_id(job);
  std::lock_guard lock(mu_);
  const auto it = records_.find(job);
  if (it == records_.end()) {
    throw ConfigError(fmt::format("job {} was never started here (no prolog ran for it?)", job));
  }
  Record& r = it->second;
  if (r.end_unix_s) {
    throw ConfigError(fmt::format("job {} was already stopped", job));
  }
  r.end_energy_j = read_counters(r.gpus);
  r.end_unix_s = unix_now_s();
  save();
  nlohmann::json out = report_of(r);
  logger().info("job energy: {} stopped: {:.1f} J in {:.1f} s", job,
                out["energy_j"].is_null() ? 0.0 : out["energy_j"].get<double>(),
                out["time_s"].get<double>());
  return out;
}

nlohmann::json JobEnergyBook::report(const std::vector<std::string>& jobs) const {
  std::lock_guard lock(mu_);
  std::vector<const Record*> chosen;
  std::vector<std::string> unknown;
  if (jobs.empty()) {
    for (const auto& [id, r] : records_) {
      chosen.push_back(&r);
    }
  }
  for (const std::string& id : jobs) {
    const auto it = records_.find(id);
    if (it == records_.end()) {
      unknown.push_back(id);
    } else {
      chosen.push_back(&it->second);
    }
  }
  if (!unknown.empty()) {
    throw ConfigError(
        fmt::format("no energy record for job(s) {} on this node", fmt::join(unknown, ", ")));
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const Record* a, const Record* b) { return a->sequence < b->sequence; });
  nlohmann::json out = nlohmann::json::array();
  for (const Record* r : chosen) {
    out.push_back(report_of(*r));
  }
  return out;
}

std::vector<std::string> JobEnergyBook::running(std::string_view prefix) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, r] : records_) {
    if (!r.end_unix_s && id.starts_with(prefix)) {
      out.push_back(id);
    }
  }
  return out;
}

nlohmann::json JobEnergyBook::report_of(const Record& r) const {
  const bool running = !r.end_unix_s;
  const double end_s = running ? unix_now_s() : *r.end_unix_s;
  const std::map<int, double> end = running ? read_counters(r.gpus) : r.end_energy_j;
  const double time_s = std::max(0.0, end_s - r.start_unix_s);
  nlohmann::json gpus = nlohmann::json::array();
  std::vector<std::string> pods;  // "namespace/pod", in GPU order
  double total = 0;
  bool all = true;
  for (const int g : r.gpus) {
    nlohmann::json e = nullptr;
    const auto a = r.start_energy_j.find(g);
    const auto b = end.find(g);
    if (a != r.start_energy_j.end() && b != end.end()) {
      e = b->second - a->second;
      total += b->second - a->second;
    } else {
      all = false;
    }
    nlohmann::json gpu = {
        {"gpu", g},
        {"energy_j", e},
        {"average_power_w", e.is_null() || time_s <= 0 ? nlohmann::json(nullptr)
                                                       : nlohmann::json(e.get<double>() / time_s)}};
    if (const auto p = r.pods.find(g); p != r.pods.end()) {
      gpu["pod"] = p->second.pod;
      gpu["namespace"] = p->second.namespace_name;
      gpu["container"] = p->second.container;
      const std::string name = p->second.namespace_name + "/" + p->second.pod;
      if (std::find(pods.begin(), pods.end(), name) == pods.end()) {
        pods.push_back(name);
      }
    }
    gpus.push_back(std::move(gpu));
  }
  nlohmann::json out = {{"job_id", r.job},
                        {"state", running ? "running" : "finished"},
                        {"start_unix_s", r.start_unix_s},
                        {"end_unix_s", running ? nlohmann::json(nullptr) : nlohmann::json(end_s)},
                        {"time_s", time_s},
                        {"gpus", gpus},
                        {"energy_j", all ? nlohmann::json(total) : nlohmann::json(nullptr)},
                        {"average_power_w", all && time_s > 0 ? nlohmann::json(total / time_s)
                                                              : nlohmann::json(nullptr)}};
  if (!pods.empty()) {
    out["pods"] = pods;
  }
  if (!all) {
    out["note"] = "a GPU of this job has no energy counter: its energy is not known";
  }
  return out;
}

nlohmann::json JobEnergyBook::to_json(const Record& r) {
  nlohmann::json start = nlohmann::json::object();
  nlohmann::json end = nlohmann::json::object();
  for (const auto& [g, e] : r.start_energy_j) {
    start[std::to_string(g)] = e;
  }
  for (const auto& [g, e] : r.end_energy_j) {
    end[std::to_string(g)] = e;
  }
  nlohmann::json pods = nlohmann::json::object();
  for (const auto& [g, p] : r.pods) {
    pods[std::to_string(g)] = {
        {"pod", p.pod}, {"namespace", p.namespace_name}, {"container", p.container}};
  }
  return {{"job_id", r.job},
          {"pods", pods},
          {"gpus", r.gpus},
          {"start_unix_s", r.start_unix_s},
          {"end_unix_s", r.end_unix_s ? nlohmann::json(*r.end_unix_s) : nlohmann::json(nullptr)},
          {"start_energy_j", start},
          {"end_energy_j", end},
          {"sequence", r.sequence}};
}

JobEnergyBook::Record JobEnergyBook::from_json(const nlohmann::json& j) {
  Record r;
  r.job = j.at("job_id").get<std::string>();
  r.gpus = j.at("gpus").get<std::vector<int>>();
  r.start_unix_s = j.at("start_unix_s").get<double>();
  if (!j.at("end_unix_s").is_null()) {
    r.end_unix_s = j.at("end_unix_s").get<double>();
  }
  for (const auto& [g, e] : j.at("start_energy_j").items()) {
    r.start_energy_j[std::stoi(g)] = e.get<double>();
  }
  for (const auto& [g, e] : j.at("end_energy_j").items()) {
    r.end_energy_j[std::stoi(g)] = e.get<double>();
  }
  r.sequence = j.at("sequence").get<uint64_t>();
  // Absent in records written before pods were named.
  const nlohmann::json pods = j.contains("pods") ? j.at("pods") : nlohmann::json::object();
  for (const auto& [g, p] : pods.items()) {
    r.pods[std::stoi(g)] = {p.at("pod").get<std::string>(), p.at("namespace").get<std::string>(),
                            p.at("container").get<std::string>()};
  }
  return r;
}

void JobEnergyBook::save() const {
  nlohmann::json jobs = nlohmann::json::array();
  for (const auto& [id, r] : records_) {
    jobs.push_back(to_json(r));
  }
  write_file_atomic(options_.file, nlohmann::json{{"version", 1}, {"jobs", jobs}}.dump(1) + "\n",
                    0600);
}

}  // namespace zeus::daemon
