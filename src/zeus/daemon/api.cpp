#include "zeus/daemon/api.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>
#include <variant>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/mac.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"
#include "zeus/common/units.h"
#include "zeus/daemon/query.h"
#include "zeus/daemon/token.h"
#include "zeus/process/watch.h"

namespace zeus::daemon {

namespace {

using http::Request;
using http::Response;
using nlohmann::json;

Response error_json(int status, const std::string& message) {
  return Response::json(status, json{{"error", message}}.dump());
}

// Zeus 0.16's status for a device failure: 400 for what the caller asked wrongly or the GPU
// cannot do, 403 for a missing privilege, 500 otherwise; 409 (ours) for another user's lease.
int status_of(const std::exception& e) {
  if (dynamic_cast<const LeaseConflict*>(&e) != nullptr) {
    return 409;
  }
  if (dynamic_cast<const PermissionError*>(&e) != nullptr) {
    return 403;
  }
  if (dynamic_cast<const ConfigError*>(&e) != nullptr ||
      dynamic_cast<const NotSupported*>(&e) != nullptr) {
    return 400;
  }
  return 500;
}

// Per-device results: {"errors": {"<id>": message}} with the worst status, or 200.
struct Outcome {
  std::map<int, std::pair<int, std::string>> errors;
  void fail(int id, const std::exception& e) { errors[id] = {status_of(e), e.what()}; }
  bool ok() const { return errors.empty(); }
  Response response() const {
    int status = 200;
    json body = json::object();
    for (const auto& [id, err] : errors) {
      status = std::max(status, err.first);
      body[std::to_string(id)] = err.second;
    }
    return Response::json(status, json{{"errors", body}}.dump());
  }
};

// The API group a path belongs to (upstream's required_scope), or "" for none.
std::string_view group_of(std::string_view path) {
  if (path.starts_with("/gpu/set_") || path.starts_with("/gpu/reset_")) {
    return kGroupGpuControl;
  }
  if (path.starts_with("/gpu/") || path.starts_with("/job_energy/")) {
    return kGroupGpuRead;
  }
  if (path.starts_with("/cpu/")) {
    return kGroupCpuRead;
  }
  return "";
}

}  // namespace

// Who is asking: the token's claims when auth is on, the socket peer when there is one, and
// whether it sent zeusd's admin token.
struct Api::Caller {
  std::optional<TokenClaims> claims;
  std::optional<http::PeerCredentials> peer;
  bool admin_token = false;

  Actor actor() const {
    Actor a;
    if (peer) {
      a.uid = peer->uid;
      a.admin = admin_token;
      if (peer->pid > 0) {
        const auto ticks = process_start_ticks(peer->pid);
        a.process = Holder{peer->uid, peer->pid, ticks.value_or(0)};
        a.name = fmt::format("uid {} pid {}", peer->uid, peer->pid);
      } else {
        // Its pid is in a PID namespace this daemon cannot see: watched through its pidfd where
        // the kernel gave one (else it cannot hold a lease; LeaseKeeper::change refuses).
        a.name = fmt::format("uid {} (pid unknown: another PID namespace)", peer->uid);
        if (peer->pidfd) {
          uint64_t id = process::pidfd_process_id(peer->pidfd->get());
          if (id == 0) {
            id = (uint64_t{1} << 63) | peer->connection_id;
          }
          a.process = Holder{peer->uid, 0, 0, id};
          a.pidfd = peer->pidfd;
        }
      }
      if (claims) {
        a.name += fmt::format(" (token '{}')", claims->sub);
      }
      if (a.admin) {
        a.name += " (admin token)";
      }
    } else {
      // TCP: no process to watch. The token's holder acts as an administrator would: the
      // change persists, attributed to the token's subject.
      a.admin = true;
      a.name = claims ? fmt::format("token '{}'", claims->sub) : "an unauthenticated TCP client";
    }
    if (a.admin) {
      a.process.reset();
      a.pidfd.reset();
    }
    return a;
  }
};

Api::Api(ApiOptions options, GpuControl& gpus, device::CpuSet* cpus, LeaseKeeper& leases,
         PowerStreams& streams, JobEnergyBook* jobs)
    : options_(std::move(options)),
      gpus_(gpus),
      cpus_(cpus),
      leases_(leases),
      streams_(streams),
      jobs_(jobs) {}

std::vector<std::string> Api::enabled_groups() const {
  std::vector<std::string> out;
  if (options_.gpu_control) {
    out.emplace_back(kGroupGpuControl);
  }
  if (options_.gpu_read) {
    out.emplace_back(kGroupGpuRead);
  }
  if (options_.cpu_read) {
    out.emplace_back(kGroupCpuRead);
  }
  return out;
}

Response Api::handle(const Request& request) {
  try {
    // 1. A disabled group's routes are not there, with or without auth.
    const std::string_view group = group_of(request.path);
    const auto groups = enabled_groups();
    if (!group.empty() && std::find(groups.begin(), groups.end(), group) == groups.end()) {
      return error_json(404, fmt::format("API group '{}' is not enabled on this server.", group));
    }
    Caller caller;
    caller.peer = request.peer;
    if (const auto given = request.header("x-zeusd-admin-token")) {
      if (!options_.admin_token || !constant_time_equal(*given, *options_.admin_token)) {
        return error_json(
            403, fmt::format("X-Zeusd-Admin-Token is not this zeusd's admin token "
                             "({}); send that file's contents, or no such header",
                             options_.admin_token_path.empty() ? "it has none"
                                                               : options_.admin_token_path));
      }
      caller.admin_token = true;
    }
    const bool open_path = request.path == "/discover" || request.path == "/time";
    if (!options_.signing_key) {
      if (request.path.starts_with("/auth/")) {
        return error_json(404, "Authentication is not enabled on this server.");
      }
    } else if (!open_path) {
      const auto header = request.header("authorization");
      if (!header || !header->starts_with("Bearer ")) {
        Response r = error_json(
            401, "Authentication required. Provide an Authorization: Bearer <token> header.");
        r.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="zeusd")");
        return r;
      }
      TokenCheck check =
          verify_token(*options_.signing_key, header->substr(7), std::chrono::system_clock::now());
      if (!check.claims) {
        return error_json(401, check.rejection.expired
                                   ? std::string("Token has expired.")
                                   : "Invalid token: " + check.rejection.reason);
      }
      caller.claims = std::move(check.claims);
      if (!group.empty()) {
        const auto& scopes = caller.claims->scopes;
        if (std::find(scopes.begin(), scopes.end(), group) == scopes.end()) {
          std::string list;
          for (const auto& s : scopes) {
            list += fmt::format("{}'{}'", list.empty() ? "" : ", ", s);
          }
          return error_json(403, fmt::format("Token for user '{}' lacks required scope '{}'. Token "
                                             "scopes: [{}]",
                                             caller.claims->sub, group, list));
        }
      }
    }
    return route(request, caller);
  } catch (const QueryError& e) {
    return Response::text(400, e.what());
  } catch (const IdListError& e) {
    return error_json(400, e.what());
  } catch (const std::exception& e) {
    logger().error("zeusd: {} {}: {}", request.method, request.path, e.what());
    return error_json(status_of(e), e.what());
  }
}

Response Api::route(const Request& request, const Caller& caller) {
  const std::string& path = request.path;
  const bool get = request.method == "GET";
  const bool post = request.method == "POST";
  // A route asked with another method is 404 with an empty body, not 405: upstream registers
  // each route with actix's method macros, whose method guard makes the route not match at all
  // (actix/actix-web#2735), and clients may rely on that status.
  const auto method_not_allowed = [] { return Response::text(404, ""); };
  if (path == "/discover" || path == "/time" || path == "/auth/whoami") {
    if (!get) {
      return method_not_allowed();
    }
    Query(request, {});
    if (path == "/discover") {
      return discover();
    }
    if (path == "/time") {
      return Response::json(200, json{{"timestamp_ms", unix_time_ms()}}.dump());
    }
    json who = {{"sub", caller.claims->sub}, {"scopes", caller.claims->scopes}};
    if (caller.claims->exp) {
      who["exp"] = *caller.claims->exp;
    }
    return Response::json(200, who.dump());
  }
  if (path.starts_with("/gpu/set_") || path.starts_with("/gpu/reset_")) {
    return post ? gpu_write(request, caller) : method_not_allowed();
  }
  if (path.starts_with("/gpu/")) {
    return get ? gpu_read(request) : method_not_allowed();
  }
  if (path.starts_with("/cpu/")) {
    return get ? cpu_read(request) : method_not_allowed();
  }
  if (path.starts_with("/job_energy/") && jobs_ != nullptr) {
    return job_energy(request, caller);
  }
  return Response::text(404, "");
}

// zeus-cpp's job accounting: POST start?job_id=&gpu_ids= and stop?job_id= by an administrator
// (root on the socket: a Slurm prolog and epilog; a token over TCP), GET report?job_ids= by
// any reader.
Response Api::job_energy(const Request& request, const Caller& caller) {
  const std::string& path = request.path;
  const bool write = path == "/job_energy/start" || path == "/job_energy/stop";
  if (write ? request.method != "POST"
            : (path != "/job_energy/report" || request.method != "GET")) {
    return Response::text(404, "");
  }
  // zeusd's admin token (a Slurm prolog and epilog: root on the host reads its file); over TCP
  // also a token with gpu-control (a reader's token, or no token at all where TCP serves without
  // a key, must not end or fake another job's record). Root alone is not enough: a root pod
  // must not end another job's record.
  const auto scopes = caller.claims ? caller.claims->scopes : std::vector<std::string>{};
  const bool allowed =
      caller.admin_token ||
      (!caller.peer && std::find(scopes.begin(), scopes.end(), kGroupGpuControl) != scopes.end());
  if (write && !allowed) {
    return error_json(
        403, fmt::format("{}: only a holder of zeusd's admin token ({}; `zeus job-energy "
                         "--admin-token-file`, as the Slurm prolog and epilog send it), or a "
                         "token with the gpu-control scope over TCP, starts and stops a job's "
                         "energy record; {} may read reports",
                         path,
                         options_.admin_token_path.empty() ? "none on this daemon"
                                                           : options_.admin_token_path,
                         caller.actor().name));
  }
  try {
    if (path == "/job_energy/report") {
      const Query q(request, {"job_ids"});
      const auto ids = q.get("job_ids");
      std::vector<std::string> jobs;
      for (const auto& id : ids ? split(*ids, ',') : std::vector<std::string>{}) {
        jobs.push_back(id);
      }
      return Response::json(200, jobs_->report(jobs).dump());
    }
    if (path == "/job_energy/start") {
      const Query q(request, {"job_id", "gpu_ids"});
      const auto ids = read_ids(q.ids("gpu_ids", "GPU"), gpus_.count(), "GPU");
      return Response::json(200, jobs_->start(q.get("job_id").value_or(""), ids).dump());
    }
    const Query q(request, {"job_id"});
    return Response::json(200, jobs_->stop(q.get("job_id").value_or("")).dump());
  } catch (const ConfigError& e) {
    return error_json(400, e.what());
  }
}

Response Api::discover() const {
  json gpus = json::array();
  for (int i = 0; i < gpus_.count(); ++i) {
    const GpuIdentity id = gpus_.identity(i);
    // "uuid" is zeus-cpp's: its clients find their GPUs by it (a pod numbers its GPUs from 0;
    // Note [GPU identity] in docs/zeusd.md). Upstream's clients read the other keys only.
    gpus.push_back({{"id", i},
                    {"name", id.name},
                    {"uuid", id.uuid},
                    {"pci_address", id.pci_address},
                    {"cumulative_energy_available", id.energy_available}});
  }
  json cpus = json::array();
  for (int i = 0; cpus_ != nullptr && i < cpus_->count(); ++i) {
    cpus.push_back({{"id", i}, {"dram_available", cpus_->has_dram(i)}});
  }
  return Response::json(200, json{{"gpus", gpus},
                                  {"cpus", cpus},
                                  {"enabled_api_groups", enabled_groups()},
                                  {"auth_required", options_.signing_key.has_value()}}
                                 .dump());
}

std::vector<int> Api::read_ids(const std::optional<std::vector<int>>& ids, int count,
                               const char* noun) const {
  if (!ids) {
    std::vector<int> all(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      all[static_cast<size_t>(i)] = i;
    }
    return all;
  }
  for (const int id : *ids) {
    if (id >= count) {
      throw IdListError(fmt::format("{} {} not found", noun, id));
    }
  }
  return *ids;
}

Response Api::gpu_write(const Request& request, const Caller& caller) {
  // Each route: its extra parameters, and what one GPU's change is (setting, value, action).
  struct Change {
    Setting setting;
    std::string value;
    std::function<void()> apply;
  };
  using Plan = std::function<std::vector<Change>(int gpu, const Query& q)>;
  const auto clocks = [this](Setting setting, bool reset) -> Plan {
    return [this, setting, reset](int gpu, const Query& q) -> std::vector<Change> {
      const bool graphics = setting == Setting::kGpuLockedClocks;
      if (reset) {
        return {{setting, "reset", [this, gpu, graphics] {
                   graphics ? gpus_.reset_gpu_locked_clocks(gpu)
                            : gpus_.reset_mem_locked_clocks(gpu);
                 }}};
      }
      const uint32_t lo = q.required_u32("min_clock_mhz");
      const uint32_t hi = q.required_u32("max_clock_mhz");
      return {{setting, fmt::format("{}-{} MHz", lo, hi), [this, gpu, graphics, lo, hi] {
                 graphics ? gpus_.set_gpu_locked_clocks(gpu, lo, hi)
                          : gpus_.set_mem_locked_clocks(gpu, lo, hi);
               }}};
    };
  };
  struct RouteSpec {
    std::initializer_list<std::string_view> params;
    Plan plan;
  };
  const std::map<std::string, RouteSpec> routes = {
      {"/gpu/set_power_limit",
       {{"gpu_ids", "block", "power_limit_mw"},
        [this](int gpu, const Query& q) -> std::vector<Change> {
          const uint32_t mw = q.required_u32("power_limit_mw");
          return {{Setting::kPowerLimit, std::to_string(mw),
                   [this, gpu, mw] { gpus_.set_power_limit_mw(gpu, mw); }}};
        }}},
      {"/gpu/set_persistence_mode",
       {{"gpu_ids", "block", "enabled"},
        [this](int gpu, const Query& q) -> std::vector<Change> {
          const bool on = q.required_bool("enabled");
          return {{Setting::kPersistenceMode, on ? "1" : "0",
                   [this, gpu, on] { gpus_.set_persistence_mode(gpu, on); }}};
        }}},
      {"/gpu/set_gpu_locked_clocks",
       {{"gpu_ids", "block", "min_clock_mhz", "max_clock_mhz"},
        clocks(Setting::kGpuLockedClocks, false)}},
      {"/gpu/set_mem_locked_clocks",
       {{"gpu_ids", "block", "min_clock_mhz", "max_clock_mhz"},
        clocks(Setting::kMemLockedClocks, false)}},
      {"/gpu/reset_gpu_locked_clocks",
       {{"gpu_ids", "block"}, clocks(Setting::kGpuLockedClocks, true)}},
      {"/gpu/reset_mem_locked_clocks",
       {{"gpu_ids", "block"}, clocks(Setting::kMemLockedClocks, true)}},
      {"/gpu/reset_locked_clocks",
       {{"gpu_ids", "block"},
        [this](int gpu, const Query&) -> std::vector<Change> {
          // One action for both domains (it tries both and throws the first error; an override
          // file may replace it as one operation); the second change records the memory
          // domain's lease and does nothing more.
          return {
              {Setting::kGpuLockedClocks, "reset", [this, gpu] { gpus_.reset_locked_clocks(gpu); }},
              {Setting::kMemLockedClocks, "reset", [] {}}};
        }}},
  };
  const auto it = routes.find(request.path);
  if (it == routes.end()) {
    return Response::text(404, "");
  }
  const Query q(request, it->second.params);
  const auto ids = q.ids("gpu_ids", "GPU");
  if (!ids) {
    throw QueryError("Query deserialize error: missing field `gpu_ids`");
  }
  q.required_bool("block");
  for (const int id : *ids) {
    if (id >= gpus_.count()) {
      return Response::text(400, fmt::format("GPU index {} does not exist.", id));
    }
  }
  // Every parameter is checked before any GPU changes.
  std::vector<std::pair<int, std::vector<Change>>> plans;
  for (const int gpu : *ids) {
    plans.emplace_back(gpu, it->second.plan(gpu, q));
  }
  const Actor actor = caller.actor();
  Outcome outcome;
  for (auto& [gpu, changes] : plans) {
    std::optional<int> first_error;
    for (Change& c : changes) {
      try {
        leases_.change(actor, gpu, c.setting, c.value, c.apply);
      } catch (const std::exception& e) {
        if (!first_error) {
          outcome.fail(gpu, e);
          first_error = gpu;
        }
      }
    }
  }
  // block=false is answered the same way: the change is made before the reply either way (it
  // takes microseconds), so a refusal is never silent.
  return outcome.ok() ? Response::json(200, "") : outcome.response();
}

namespace {

// The devices a power stream serves: all of them, or the asked ones; unknown ids are upstream's
// 400 naming them and what exists.
std::variant<std::vector<int>, Response> stream_ids(const std::optional<std::vector<int>>& ids,
                                                    int count, std::string_view noun) {
  std::vector<int> all(static_cast<size_t>(count));
  std::iota(all.begin(), all.end(), 0);
  if (!ids) {
    return all;
  }
  std::vector<int> unknown;
  std::copy_if(ids->begin(), ids->end(), std::back_inserter(unknown),
               [count](int id) { return id >= count; });
  if (!unknown.empty()) {
    return error_json(400, fmt::format("Unknown {} indices: [{}]. Available: [{}]", noun,
                                       fmt::join(unknown, ", "), fmt::join(all, ", ")));
  }
  return *ids;
}

Response event_stream(std::unique_ptr<http::Stream> stream) {
  Response r;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.stream = std::move(stream);
  return r;
}

}  // namespace

Response Api::gpu_read(const Request& request) {
  const std::string& path = request.path;
  if (path == "/gpu/stream_power") {
    const Query q(request, {"gpu_ids"});
    auto wanted = stream_ids(q.ids("gpu_ids", "GPU"), gpus_.count(), "GPU");
    if (auto* refused = std::get_if<Response>(&wanted)) {
      return std::move(*refused);
    }
    return event_stream(streams_.subscribe_gpus(std::get<std::vector<int>>(wanted)));
  }
  using Reader = std::function<json(int gpu)>;
  const std::map<std::string, Reader> readers = {
      {"/gpu/get_cumulative_energy",
       [this](int g) {
         return json{{"energy_mj", gpus_.energy_mj(g)}};
       }},
      {"/gpu/get_power_limit",
       [this](int g) {
         return json{{"power_limit_mw", gpus_.power_limit_mw(g)}};
       }},
      {"/gpu/get_power_limit_constraints",
       [this](int g) {
         const PowerLimitRange r = gpus_.power_limit_constraints_mw(g);
         return json{{"min_power_limit_mw", r.min_mw}, {"max_power_limit_mw", r.max_mw}};
       }},
      {"/gpu/get_persistence_mode",
       [this](int g) {
         return json{{"enabled", gpus_.persistence_mode(g)}};
       }},
      {"/gpu/get_power", [this](int g) { return json(gpus_.power_mw(g)); }},
  };
  const auto it = readers.find(path);
  if (it == readers.end()) {
    return Response::text(404, "");
  }
  const Query q(request, {"gpu_ids"});
  const std::vector<int> ids = read_ids(q.ids("gpu_ids", "GPU"), gpus_.count(), "GPU");
  json body = json::object();
  Outcome outcome;
  for (const int gpu : ids) {
    try {
      body[std::to_string(gpu)] = it->second(gpu);
    } catch (const std::exception& e) {
      outcome.fail(gpu, e);
    }
  }
  if (!outcome.ok()) {
    return outcome.response();
  }
  if (path == "/gpu/get_power") {
    body = json{{"timestamp_ms", unix_time_ms()}, {"power_mw", body}};
  }
  return Response::json(200, body.dump());
}

Response Api::cpu_read(const Request& request) {
  const int count = cpus_ != nullptr ? cpus_->count() : 0;
  const std::string& path = request.path;
  if (path == "/cpu/stream_power") {
    const Query q(request, {"cpu_ids"});
    auto wanted = stream_ids(q.ids("cpu_ids", "CPU"), count, "CPU");
    if (auto* refused = std::get_if<Response>(&wanted)) {
      return std::move(*refused);
    }
    return event_stream(streams_.subscribe_cpus(std::get<std::vector<int>>(wanted)));
  }
  if (path == "/cpu/get_cumulative_energy") {
    const Query q(request, {"cpu_ids", "cpu", "dram"});
    const std::vector<int> ids = read_ids(q.ids("cpu_ids", "CPU"), count, "CPU");
    const bool cpu = q.required_bool("cpu");
    const bool dram = q.required_bool("dram");
    json body = json::object();
    Outcome outcome;
    for (const int id : ids) {
      try {
        json e = {{"cpu_energy_uj", nullptr}, {"dram_energy_uj", nullptr}};
        if (cpu) {
          e["cpu_energy_uj"] = cpus_->energy_uj(id);
        }
        if (dram) {
          if (const auto d = cpus_->dram_energy_uj(id)) {
            e["dram_energy_uj"] = *d;
          }
        }
        body[std::to_string(id)] = std::move(e);
      } catch (const std::exception& e) {
        outcome.fail(id, e);
      }
    }
    return outcome.ok() ? Response::json(200, body.dump()) : outcome.response();
  }
  if (path == "/cpu/get_power") {
    const Query q(request, {"cpu_ids"});
    const std::vector<int> ids = read_ids(q.ids("cpu_ids", "CPU"), count, "CPU");
    using Reading = std::pair<int64_t, std::optional<int64_t>>;
    const auto read = [&] {
      std::vector<Reading> r;
      for (const int id : ids) {
        r.emplace_back(cpus_->energy_uj(id), cpus_->dram_energy_uj(id));
      }
      return std::make_pair(std::chrono::steady_clock::now(), r);
    };
    const auto a = read();
    std::this_thread::sleep_for(std::chrono::microseconds(
        static_cast<int64_t>(1e6 / (options_.cpu_poll_hz > 0 ? options_.cpu_poll_hz : 10))));
    const auto b = read();
    const double us = std::chrono::duration<double, std::micro>(b.first - a.first).count();
    json power = json::object();
    for (size_t k = 0; k < ids.size(); ++k) {
      const auto mw = [&](int64_t d) { return static_cast<uint32_t>(d * 1000.0 / us); };
      json e = {{"cpu_mw", mw(b.second[k].first - a.second[k].first)}, {"dram_mw", nullptr}};
      if (a.second[k].second && b.second[k].second) {
        e["dram_mw"] = mw(*b.second[k].second - *a.second[k].second);
      }
      power[std::to_string(ids[k])] = std::move(e);
    }
    return Response::json(200, json{{"timestamp_ms", unix_time_ms()}, {"power_mw", power}}.dump());
  }
  return Response::text(404, "");
}

}  // namespace zeus::daemon
