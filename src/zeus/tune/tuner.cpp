#include "zeus/tune/tuner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>

#include "zeus/common/atomic_file.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/json.h"
#include "zeus/common/posix.h"
#include "zeus/common/signal_pipe.h"
#include "zeus/contract/run_files.h"
#include "zeus/contract/train_result.h"
#include "zeus/contract/worker_env.h"
#include "zeus/optimize/batch_size_optimizer.h"
#include "zeus/process/child.h"
#include "zeus/tune/try_source.h"

namespace zeus::tune {

namespace fs = std::filesystem;
using nlohmann::json;

std::string to_json_line(const TuneTry& t) {
  json j{{"recurrence", t.recurrence},
         {"try", t.attempt},
         {"batch_size", t.batch_size},
         {"lr", t.lr},
         {"seed", t.seed},
         {"job_id", t.job_id},
         {"cost_threshold", std::isfinite(t.cost_threshold) ? json(t.cost_threshold) : json()},
         {"exit_code", t.exit_code},
         {"energy", t.energy_j},
         {"time", t.time_s},
         {"cost", t.cost},
         {"reached", t.reached},
         {"num_epochs", t.num_epochs},
         {"recurrence_cost", t.recurrence_cost}};
  if (!t.policy.empty()) {
    j["policy"] = t.policy;
  }
  if (t.epoch_cap > 0) {
    j["epoch_cap"] = t.epoch_cap;
  }
  if (t.trial_number > 0) {
    j["trial_number"] = t.trial_number;
  }
  return j.dump() + "\n";
}

TuneTry tune_try_from_json_line(std::string_view line, std::string_view where) {
  try {
    const json j = json::parse(line);
    TuneTry t;
    t.recurrence = static_cast<int>(json_int(j.at("recurrence"), "recurrence"));
    t.attempt = static_cast<int>(json_int(j.at("try"), "try"));
    t.batch_size = json_int(j.at("batch_size"), "batch_size");
    t.lr = j.value("lr", 0.0);
    t.seed = static_cast<uint64_t>(json_int(j.value("seed", json(0)), "seed"));
    t.job_id = j.value("job_id", std::string());
    t.cost_threshold = j.contains("cost_threshold") && j["cost_threshold"].is_number()
                           ? j["cost_threshold"].get<double>()
                           : std::numeric_limits<double>::infinity();
    t.exit_code = static_cast<int>(json_int(j.value("exit_code", json(0)), "exit_code"));
    t.energy_j = j.at("energy").get<double>();
    t.time_s = j.at("time").get<double>();
    t.cost = j.at("cost").get<double>();
    t.reached = j.at("reached").get<bool>();
    t.num_epochs = static_cast<int>(json_int(j.value("num_epochs", json(0)), "num_epochs"));
    t.recurrence_cost = j.value("recurrence_cost", 0.0);
    t.policy = j.value("policy", std::string());
    t.epoch_cap = static_cast<int>(json_int(j.value("epoch_cap", json(0)), "epoch_cap"));
    t.trial_number = json_int(j.value("trial_number", json(0)), "trial_number");
    return t;
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("{}: not a tune try record: {}", where, e.what()));
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", where, e.what()));
  }
}

std::vector<TuneTry> read_tries(const fs::path& path) {
  std::vector<TuneTry> out;
  for_each_line(path, [&](std::string_view line, const std::string& where) {
    out.push_back(tune_try_from_json_line(line, where));
  });
  return out;
}

double scaled_lr(const TuneOptions& o, int64_t batch_size) {
  const double ratio = static_cast<double>(batch_size) / static_cast<double>(o.default_batch_size);
  if (o.lr_scaling == "linear") {
    return o.default_lr * ratio;
  }
  if (o.lr_scaling == "sqrt") {
    return o.default_lr * std::sqrt(ratio);
  }
  return o.default_lr;
}

std::vector<std::string> expand_command(const TuneOptions& o, const TuneTry& t) {
  std::vector<std::string> out;
  for (std::string arg : o.command) {
    auto replace = [&](std::string_view key, const std::string& value) {
      for (size_t at = arg.find(key); at != std::string::npos;
           at = arg.find(key, at + value.size())) {
        arg.replace(at, key.size(), value);
      }
    };
    replace("{bs}", std::to_string(t.batch_size));
    replace("{lr}", fmt::format("{}", t.lr));
    replace("{seed}", std::to_string(t.seed));
    if (o.epochs > 0) {
      replace("{epochs}",
              std::to_string(t.epoch_cap > 0 ? std::min(o.epochs, t.epoch_cap) : o.epochs));
    }
    out.push_back(std::move(arg));
  }
  return out;
}

std::string policy_label(const TuneOptions& o) {
  return optimize::policy_label(optimize::parse_policy_choice(o.policy, o.lean));
}

namespace {

json options_json(const TuneOptions& o) {
  json j{{"batch_sizes", o.batch_sizes},
         {"default_batch_size", o.default_batch_size},
         {"eta", o.eta},
         {"beta", o.beta},
         {"seed", o.seed},
         {"window", o.window},
         {"lr_scaling", o.lr_scaling},
         {"default_lr", o.default_lr},
         {"command", o.command},
         {"policy", policy_label(o)}};
  if (!o.server_url.empty()) {
    j["server"] = o.server_url;
    j["job_id"] = o.job_id;
    j["target_metric"] = *o.target_metric;
    j["lower_is_better"] = o.lower_is_better;
  }
  return j;
}

void validate(const TuneOptions& o) {
  if (o.batch_sizes.empty()) {
    throw ConfigError("--batch-sizes is empty; give a list such as 32,64,128,256");
  }
  for (int64_t bs : o.batch_sizes) {
    if (bs < 1) {
      throw ConfigError(fmt::format("--batch-sizes: {} is not a positive batch size", bs));
    }
  }
  if (o.recurrences < 1) {
    throw ConfigError(fmt::format("--recurrences {} must be at least 1", o.recurrences));
  }
  if (!(o.eta >= 0 && o.eta <= 1)) {
    throw ConfigError(fmt::format("--eta {} must be in [0, 1]", o.eta));
  }
  if (o.lr_scaling != "none" && o.lr_scaling != "linear" && o.lr_scaling != "sqrt") {
    throw ConfigError(
        fmt::format("--lr-scaling '{}': expected none, linear or sqrt", o.lr_scaling));
  }
  if (o.lr_scaling != "none" && !(o.default_lr > 0)) {
    throw ConfigError(
        "--lr-scaling needs --default-lr, the learning rate at the default batch size");
  }
  if (o.command.empty()) {
    throw ConfigError(
        "no command: write it after --, e.g. zeus tune ... -- ./train --batch-size {bs}");
  }
  if (!o.server_url.empty()) {
    if (o.job_id.empty() || o.job_id.find('/') != std::string::npos) {
      throw ConfigError(
          "--server needs --job-id: the name the service keeps the job under, the same for "
          "every tuner of the job (no '/')");
    }
    if (!o.target_metric || !std::isfinite(*o.target_metric)) {
      throw ConfigError(
          "--server needs --target-metric: the service judges each try's metric against it (the "
          "command gets it as ZEUS_TARGET_METRIC)");
    }
  } else if (!o.job_id.empty() || o.target_metric) {
    throw ConfigError("--job-id and --target-metric are for --server (the batch-size service)");
  }
  // The optimizer checks the list, the default, beta and the policy's knobs.
  optimize::BatchSizeOptimizer check(optimizer_options(o));
}

// A log dir is resumed only under the policy it was written with (the decisions, and so the
// history, differ between policies). Files from before policies were "zeus".
void check_same_policy(const fs::path& log_dir, json saved, const std::vector<TuneTry>& tries,
                       const std::string& policy) {
  const std::string saved_policy =
      saved.is_object() && saved.contains("policy") && saved["policy"].is_string()
          ? saved["policy"].get<std::string>()
          : std::string("zeus");
  std::string recorded = saved_policy;
  for (const auto& t : tries) {
    if (!t.policy.empty() && t.policy != saved_policy) {
      recorded = t.policy;  // a history that disagrees with its own options file
    }
  }
  if (recorded != policy || saved_policy != policy) {
    const bool lean = recorded.starts_with("lean");
    throw ConfigError(fmt::format(
        "{} was tuned under policy {}, not {}: zeus tune resumes a history only under the policy "
        "that wrote it; run with --policy {}{}, or use another --log-dir",
        log_dir.string(), recorded, policy, lean ? "lean --lean " : recorded,
        lean ? recorded.substr(6, recorded.size() - 7) : std::string()));
  }
}

// The result files a try left: the train results of `job_id` in DIR, any batch size.
std::vector<fs::path> result_files(const fs::path& dir, const std::string& job_id) {
  std::vector<fs::path> out;
  for (const auto& [path, name] : contract::list_run_dir(dir).train_results) {
    if (name.job_id == job_id) {
      out.push_back(path);
    }
  }
  return out;
}

struct ChildExit {
  int exit_code = 0;    // 128 + signal when killed
  int stop_signal = 0;  // a signal this tuner got meanwhile (forwarded to the child)
};

ChildExit run_child(const std::vector<std::string>& argv,
                    const std::map<std::string, std::string>& env,
                    std::chrono::nanoseconds grace_period) {
  SignalPipe signals({SIGINT, SIGTERM, SIGHUP});
  // In a group of its own, so a stop reaches everything it started; it dies with the tuner
  // (SIGTERM lets `zeus run` restore limits on the way).
  process::Child child = process::Child::start({.argv = argv,
                                                .search_path = true,
                                                .env_overrides = env,
                                                .parent_death_signal = SIGTERM,
                                                .what = "the training command"});
  ChildExit result;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  for (;;) {
    if (const auto status = child.wait_for(std::chrono::milliseconds(50))) {
      result.exit_code = status->exit_code;
      child.signal(SIGKILL);  // what it left behind in its group
      return result;
    }
    if (const int sig = signals.wait_for(std::chrono::milliseconds(0)); sig != 0) {
      if (result.stop_signal == 0) {
        result.stop_signal = sig;
        child.signal(sig);
        kill_at = std::chrono::steady_clock::now() + grace_period;
      } else {
        child.signal(SIGKILL);  // asked twice: stop now
      }
    }
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) {
      child.signal(SIGKILL);
      kill_at.reset();
    }
  }
}

std::string fmt_threshold(double t) {
  return std::isfinite(t) ? fmt::format("{:.1f}", t) : "-";
}

}  // namespace

TuneOutcome run_tune(const TuneOptions& o, std::ostream& out) {
  validate(o);
  {
    fs::create_directories(o.log_dir);
    const fs::path options_path = o.log_dir / contract::kTuneOptionsName;
    const fs::path tries_path = o.log_dir / contract::kTuneTriesName;
    const json options = options_json(o);
    std::vector<TuneTry> tries = read_tries(tries_path);
    if (fs::exists(options_path)) {
      json saved = json::parse(read_file(options_path), nullptr, false);
      if (!saved.is_discarded()) {
        check_same_policy(o.log_dir, saved, tries, options["policy"].get<std::string>());
        saved["policy"] = options["policy"];  // files from before policies: zeus, checked
      }
      if (saved != options) {
        throw ConfigError(fmt::format(
            "{} holds a tune run with other options ({}); resume it with the same options, or "
            "use another --log-dir",
            o.log_dir.string(), saved.is_discarded() ? "unreadable" : saved.dump()));
      }
    } else {
      write_file_atomic(options_path, options.dump(2) + "\n");
    }
    const std::string policy = options["policy"].get<std::string>();
    const std::unique_ptr<TrySource> source =
        o.server_url.empty() ? local_source(o, tries) : service_source(o);

    int rec = 0;
    int attempt = 0;
    double rec_cost = 0;
    if (!tries.empty()) {
      const TuneTry& last = tries.back();
      rec = last.reached ? last.recurrence + 1 : last.recurrence;
      attempt = last.reached ? 0 : last.attempt + 1;
      for (const auto& t : tries) {
        if (t.recurrence == rec) {
          rec_cost += t.cost;
        }
      }
      out << fmt::format("zeus tune: resuming {} after {} tries: recurrence {}, try {}\n",
                         tries_path.string(), tries.size(), rec + 1, attempt + 1);
    }
    const int max_tries = o.max_tries_per_recurrence > 0
                              ? o.max_tries_per_recurrence
                              : static_cast<int>(o.batch_sizes.size()) + 1;
    out << fmt::format("zeus tune: policy {}\n", policy);
    out << fmt::format("{:>4} {:>4} {:>6} {:>9} {:>12} {:>12} {:>9} {:>7} {:>12}  {}\n", "rec",
                       "try", "bs", "lr", "cost", "energy (J)", "time (s)", "reached", "threshold",
                       "stage");
    out.flush();
    for (; rec < o.recurrences;) {
      TuneTry t;
      t.recurrence = rec;
      t.attempt = attempt;
      const PlannedTry plan = source->next();
      t.batch_size = plan.batch_size;
      t.lr = scaled_lr(o, t.batch_size);
      t.seed = o.seed + static_cast<uint64_t>(rec);
      t.job_id = fmt::format("rec{:03}+try{}", rec, attempt);
      t.cost_threshold = plan.cost_threshold;
      t.policy = policy;
      t.epoch_cap = plan.epoch_cap;
      t.trial_number = plan.trial_number;
      for (const auto& stale : result_files(o.log_dir, t.job_id)) {
        fs::remove(stale);  // left by a try that was killed before it was recorded
      }
      const contract::JobEnv job{
          .log_dir = o.log_dir,
          .job_id = t.job_id,
          .eta = o.eta,
          .cost_threshold = t.cost_threshold,
          .max_epochs = t.epoch_cap > 0 ? std::optional<int>(t.epoch_cap) : std::nullopt,
          .target_metric = o.target_metric};
      const ChildExit child = run_child(expand_command(o, t), job.to_env(), o.grace_period);
      t.exit_code = child.exit_code;
      if (child.stop_signal != 0) {
        source->abandoned();
        return {.stop_signal = child.stop_signal, .recurrence = rec + 1, .attempt = attempt + 1};
      }
      const auto files = result_files(o.log_dir, t.job_id);
      if (files.size() != 1) {
        source->abandoned();
        throw Error(fmt::format(
            "the command exited with code {} and wrote {} train results named {}/{} (any "
            "batch size; expected 1); fix it and run zeus tune again: it resumes at recurrence {} "
            "try {}",
            child.exit_code, files.size(), o.log_dir.string(),
            contract::train_result_name(t.job_id, t.batch_size), rec + 1, attempt + 1));
      }
      const contract::TrainResult result = contract::load_train_result(files.front());
      t.energy_j = result.energy_j;
      t.time_s = result.time_s;
      t.cost = result.cost;
      t.reached = result.reached;
      t.num_epochs = result.num_epochs;
      t.recurrence_cost = t.reached ? rec_cost + t.cost : 0;
      source->finished(t, result);
      append_line_durable(tries_path, to_json_line(t), "the tune history");
      out << fmt::format(
          "{:>4} {:>4} {:>6} {:>9.4g} {:>12.1f} {:>12.1f} {:>9.2f} {:>7} {:>12}  {}\n", rec + 1,
          attempt + 1, t.batch_size, t.lr, t.cost, t.energy_j, t.time_s, t.reached ? "yes" : "no",
          fmt_threshold(t.cost_threshold), plan.stage);
      if (t.reached) {
        out << fmt::format("     recurrence {}/{} done: batch size {} in {} tr{}, cost {:.1f}\n",
                           rec + 1, o.recurrences, t.batch_size, attempt + 1,
                           attempt == 0 ? "y" : "ies", t.recurrence_cost);
        ++rec;
        attempt = 0;
        rec_cost = 0;
      } else {
        rec_cost += t.cost;
        if (++attempt >= max_tries) {
          throw Error(fmt::format(
              "recurrence {} made {} tries without reaching the target; check the target metric "
              "and the epochs",
              rec + 1, attempt));
        }
      }
      out.flush();
    }
    // The summary: every batch size's tries and mean cost of those that reached.
    tries = read_tries(tries_path);
    out << fmt::format("zeus tune: {} recurrences, {} tries; {}\n", o.recurrences, tries.size(),
                       source->summary());
    return {};
  }
}

}  // namespace zeus::tune
