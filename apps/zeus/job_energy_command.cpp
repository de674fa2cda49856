#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/secret_file.h"
#include "zeus/device/zeusd/zeusd_client.h"

namespace zeus::cli {

namespace {

using device::zeusd::ZeusdEndpoint;

constexpr const char* kDefaultSocket = "/run/zeusd/zeusd.sock";

ZeusdEndpoint endpoint_of(const JobEnergyCommandOptions& o) {
  if (!o.zeusd_socket.empty()) {
    return ZeusdEndpoint{.socket_path = o.zeusd_socket};
  }
  if (auto from_env = ZeusdEndpoint::from_env()) {
    return *from_env;
  }
  return ZeusdEndpoint{.socket_path = kDefaultSocket};
}

// zeusd's admin token for start and stop (docs/zeusd.md, Administration): the flag's file, else
// ZEUSD_ADMIN_TOKEN_FILE's, else the default state directory's where it exists; "" without one
// (zeusd then answers 403 saying what it needs).
std::string admin_token_of(const JobEnergyCommandOptions& o) {
  std::string path = o.admin_token_file;
  if (path.empty()) {
    path = get_env(kEnvZeusdAdminTokenFile).value_or("");
  }
  if (path.empty()) {
    if (!std::filesystem::exists(kEnvZeusdAdminTokenFile.default_value)) {
      return "";
    }
    path = kEnvZeusdAdminTokenFile.default_value;
  }
  return read_secret_file(path, "zeusd's admin token");
}

std::string number(const nlohmann::json& v, const char* format) {
  return v.is_null() ? std::string("n/a") : fmt::format(fmt::runtime(format), v.get<double>());
}

void print_table(std::ostream& out, const nlohmann::json& jobs) {
  out << fmt::format("{:<16} {:<9} {:>10} {:>14} {:>10}  {}\n", "job", "state", "time (s)",
                     "energy (J)", "avg (W)", "per GPU (J)");
  for (const auto& j : jobs) {
    std::string per_gpu;
    for (const auto& g : j.at("gpus")) {
      per_gpu += fmt::format("{}{}: {}", per_gpu.empty() ? "" : ", ", g.at("gpu").get<int>(),
                             number(g.at("energy_j"), "{:.1f}"));
    }
    out << fmt::format("{:<16} {:<9} {:>10} {:>14} {:>10}  {}\n", j.at("job_id").get<std::string>(),
                       j.at("state").get<std::string>(), number(j.at("time_s"), "{:.1f}"),
                       number(j.at("energy_j"), "{:.1f}"),
                       number(j.at("average_power_w"), "{:.1f}"), per_gpu);
    if (j.contains("pods")) {
      out << "  pods: " << fmt::format("{}", fmt::join(j.at("pods"), ", ")) << "\n";
    }
    if (j.contains("note")) {
      out << "  note: " << j.at("note").get<std::string>() << "\n";
    }
  }
}

// One row per job and GPU (with the GPU's pod, "namespace/name", where zeusd knows it), then the
// job's total as gpu "all".
void print_csv(std::ostream& out, const nlohmann::json& jobs) {
  out << "job_id,state,gpu,time_s,energy_j,average_power_w,pod\n";
  const auto cell = [](const nlohmann::json& v) {
    return v.is_null() ? std::string() : fmt::format("{}", v.get<double>());
  };
  for (const auto& j : jobs) {
    const std::string head =
        fmt::format("{},{}", j.at("job_id").get<std::string>(), j.at("state").get<std::string>());
    for (const auto& g : j.at("gpus")) {
      const std::string pod = g.contains("pod") ? g.at("namespace").get<std::string>() + "/" +
                                                      g.at("pod").get<std::string>()
                                                : "";
      out << fmt::format("{},{},{},{},{},{}\n", head, g.at("gpu").get<int>(), cell(j.at("time_s")),
                         cell(g.at("energy_j")), cell(g.at("average_power_w")), pod);
    }
    out << fmt::format("{},all,{},{},{},\n", head, cell(j.at("time_s")), cell(j.at("energy_j")),
                       cell(j.at("average_power_w")));
  }
}

}  // namespace

int run_job_energy(const JobEnergyCommandOptions& options, std::ostream& out, std::ostream& err) {
  const auto fail = [&err, &options](int code, const std::string& message) {
    err << fmt::format("zeus job-energy {}: error: {}\n", options.action, message);
    return code;
  };
  ZeusdEndpoint endpoint = endpoint_of(options);
  if (options.action != "report") {
    try {
      endpoint.admin_token = admin_token_of(options);
    } catch (const ConfigError& e) {
      return fail(kExitUsage, e.what());
    }
  }
  std::string target;
  std::string method = "POST";
  if (options.action == "report") {
    method = "GET";
    target = "/job_energy/report";
    std::string ids;
    for (const auto& j : options.jobs) {
      ids += (ids.empty() ? "" : ",") + j;
    }
    if (!ids.empty()) {
      target += "?job_ids=" + ids;
    }
  } else {
    target = fmt::format("/job_energy/{}?job_id={}", options.action, options.jobs.at(0));
    if (!options.gpus.empty()) {
      target += "&gpu_ids=" + options.gpus;
    }
  }
  device::zeusd::ZeusdReply reply;
  try {
    device::zeusd::ZeusdClient client(endpoint);
    reply = client.request(method, target);
  } catch (const Error& e) {
    return fail(kExitFailure,
                fmt::format("{} (is zeusd running? --zeusd-socket names its socket)", e.what()));
  }
  const auto body = nlohmann::json::parse(reply.body, nullptr, false);
  if (reply.status != 200 || body.is_discarded()) {
    const std::string why = !body.is_discarded() && body.is_object() && body.contains("error")
                                ? body["error"].dump()
                                : reply.body;
    if (reply.status == 404 && reply.body.empty()) {
      return fail(kExitFailure, endpoint.describe() +
                                    " has no job-energy routes: it is not zeus-cpp's zeusd, or "
                                    "gpu-read is not enabled");
    }
    return fail(reply.status == 400 ? kExitUsage : kExitFailure,
                fmt::format("{} answered {}: {}", endpoint.describe(), reply.status, why));
  }
  if (options.action != "report") {
    out << fmt::format("zeus job-energy: {} {} on {}\n",
                       options.action == "start" ? "started" : "stopped", options.jobs.at(0),
                       endpoint.describe());
    if (options.action == "stop") {
      print_table(out, nlohmann::json::array({body}));
    }
    return kExitOk;
  }
  if (options.format == "json") {
    out << body.dump(2) << "\n";
  } else if (options.format == "csv") {
    print_csv(out, body);
  } else {
    print_table(out, body);
  }
  return kExitOk;
}

}  // namespace zeus::cli
