// Zeus 0.16's zeusd wire API (ref-zeus016.md section 1) over zeus-cpp's devices and leases:
// the routes, their parameters and statuses, the API groups and the token checks, as a
// function from a request to a response (no sockets here: http/ serves it).
#pragma once

#include <optional>
#include <string>

#include "zeus/daemon/gpu_control.h"
#include "zeus/daemon/job_energy.h"
#include "zeus/daemon/lease_keeper.h"
#include "zeus/daemon/power_streams.h"
#include "zeus/device/cpu_set.h"
#include "zeus/http/server.h"

namespace zeus::daemon {

struct ApiOptions {
  // The API groups served; a route of a group that is off answers 404.
  bool gpu_control = true;
  bool gpu_read = true;
  bool cpu_read = true;
  // The HMAC key (the signing-key file's raw bytes): every route but /discover and /time then
  // needs a valid token, and a route of a group needs that scope.
  std::optional<std::string> signing_key;
  // /cpu/get_power reads twice, 1/cpu_poll_hz apart.
  double cpu_poll_hz = 10;
  // zeusd's admin token (admin_token.h) and its file (for messages): a request that sends it as
  // X-Zeusd-Admin-Token is an administrator's. None: no request is, on the socket.
  std::optional<std::string> admin_token;
  std::string admin_token_path;
};

class Api {
 public:
  // `cpus` may be null (no RAPL: no CPUs listed, CPU routes answer for an empty set);
  // `jobs` null: the job-energy routes answer 404.
  Api(ApiOptions options, GpuControl& gpus, device::CpuSet* cpus, LeaseKeeper& leases,
      PowerStreams& streams, JobEnergyBook* jobs = nullptr);

  // Never throws: errors are responses.
  http::Response handle(const http::Request& request);

  std::vector<std::string> enabled_groups() const;

 private:
  struct Caller;
  http::Response route(const http::Request& request, const Caller& caller);
  http::Response discover() const;
  http::Response gpu_write(const http::Request& request, const Caller& caller);
  http::Response gpu_read(const http::Request& request);
  http::Response cpu_read(const http::Request& request);
  // zeus-cpp's /job_energy/{start,stop,report}.
  http::Response job_energy(const http::Request& request, const Caller& caller);
  std::vector<int> read_ids(const std::optional<std::vector<int>>& ids, int count,
                            const char* noun) const;

  ApiOptions options_;
  GpuControl& gpus_;
  device::CpuSet* cpus_;
  LeaseKeeper& leases_;
  PowerStreams& streams_;
  JobEnergyBook* jobs_;
};

}  // namespace zeus::daemon
