// Per-job energy accounting on a real Slurm 22.05 (tests/slurm/fixture.sh with
// examples/slurm/zeus-prolog.sh and zeus-epilog.sh installed as they are) and zeus-cpp's zeusd
// over the fake NVML: a job's report is its GPUs' counters over its run.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "zeusd_support.h"

namespace zeus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// A wrapper that sets what the example script reads, as a site would in slurm.conf's Prolog.
fs::path wrapper(const fs::path& dir, const std::string& name, const fs::path& socket) {
  const fs::path path = dir / (name + ".sh");
  std::ofstream(path) << fmt::format(
      "#!/bin/bash\nexport ZEUS={} ZEUSD_SOCK_PATH={} ZEUSD_ADMIN_TOKEN_FILE={}\n"
      "exec {}/examples/slurm/zeus-{}.sh\n",
      ZEUS_CLI_PATH, socket.string(), (socket.parent_path() / "state" / "admin.token").string(),
      ZEUS_SOURCE_DIR, name);
  ::chmod(path.c_str(), 0755);
  return path;
}

nlohmann::json report(const fs::path& socket, const std::string& job) {
  const ProcessResult r = run_process({ZEUS_CLI_PATH, "job-energy", "report", job, "--format",
                                       "json", "--zeusd-socket", socket.string()});
  if (r.exit_code != 0) {
    return nlohmann::json();
  }
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_array() && j.size() == 1 ? j[0] : nlohmann::json();
}

TEST(SlurmJobEnergy, ThePrologAndEpilogMeasureAJobAsItsGpusCountersSay) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  nvml.set_gpu_value(1, "power_mw", 200'000);
  SharedDir dir;
  ZeusdProcess daemon(dir);
  const fs::path slurm_dir = dir / "slurm";
  const auto started = run_process({ZEUS_SLURM_FIXTURE, "start", slurm_dir.string(),
                                    wrapper(dir.path(), "prolog", daemon.socket()).string(),
                                    wrapper(dir.path(), "epilog", daemon.socket()).string()});
  if (started.exit_code == 3) {
    ZEUS_SKIP_WITHOUT_SERVER("a real Slurm cannot start here: " + started.err);
  }
  ASSERT_EQ(started.exit_code, 0) << started.err << started.out;
  ScopedEnv conf("SLURM_CONF", (slurm_dir / "slurm.conf").string());
  const ProcessResult sbatch = run_process({"/usr/bin/sbatch", "--wait", "--parsable", "-N1", "-o",
                                            (dir / "job.out").string(), "--wrap", "sleep 2"},
                                           120s);
  ASSERT_EQ(sbatch.exit_code, 0) << sbatch.err;
  const std::string job = sbatch.out.substr(0, sbatch.out.find_first_of(";\n"));

  nlohmann::json r;
  ASSERT_TRUE(eventually(
      [&] {
        r = report(daemon.socket(), job);
        return r.is_object() && r.value("state", "") == "finished";
      },
      30s))
      << "the epilog stopped the record: " << r.dump();
  run_process({ZEUS_SLURM_FIXTURE, "stop", slurm_dir.string()});

  const double time_s = r.at("time_s").get<double>();
  EXPECT_GE(time_s, 2.0) << "the job slept 2 s between its prolog and its epilog";
  EXPECT_LT(time_s, 30.0);
  ASSERT_EQ(r.at("gpus").size(), 4u) << "no GPU gres: every GPU of the node";
  // The fake's counters grow at each GPU's power: the record is power x the record's time.
  double total = 0;
  for (const auto& g : r.at("gpus")) {
    const int gpu = g.at("gpu").get<int>();
    const double watts = gpu == 1 ? 200 : four_a40s()[static_cast<size_t>(gpu)].power_mw / 1000.0;
    EXPECT_NEAR(g.at("energy_j").get<double>(), watts * time_s, 0.02 * watts * time_s)
        << "GPU " << gpu << ": " << r.dump();
    total += g.at("energy_j").get<double>();
  }
  EXPECT_NEAR(r.at("energy_j").get<double>(), total, 1e-6 * total);
  EXPECT_NEAR(r.at("average_power_w").get<double>(), total / time_s, 1e-6 * total);

  const ProcessResult table = run_process(
      {ZEUS_CLI_PATH, "job-energy", "report", "--zeusd-socket", daemon.socket().string()});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr(job));
  EXPECT_THAT(table.out, HasSubstr("finished"));
  const ProcessResult csv = run_process({ZEUS_CLI_PATH, "job-energy", "report", job, "--format",
                                         "csv", "--zeusd-socket", daemon.socket().string()});
  EXPECT_THAT(csv.out, HasSubstr("job_id,state,gpu,time_s,energy_j,average_power_w,pod\n"));
  EXPECT_THAT(csv.out, HasSubstr(job + ",finished,all,"));
}

TEST(SlurmJobEnergy, MistakesAreNamedAndOnlyTheAdminTokenStartsARecord) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml(four_a40s(), false, {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir);
  const std::string socket = daemon.socket().string();
  const std::string token = (daemon.state_dir() / "admin.token").string();
  const auto cli = [&](std::vector<std::string> args) {
    if (args[0] != "report") {
      args.insert(args.end(), {"--admin-token-file", token});
    }
    args.insert(args.begin(), {ZEUS_CLI_PATH, "job-energy"});
    args.insert(args.end(), {"--zeusd-socket", socket});
    return run_process(args);
  };
  ProcessResult r = cli({"stop", "--job", "4242"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("job 4242 was never started here"));
  r = cli({"report", "4242"});
  EXPECT_THAT(r.err, HasSubstr("no energy record for job(s) 4242"));
  r = cli({"start", "--job", "a/b"});
  EXPECT_THAT(r.err, HasSubstr("job id 'a/b'"));
  r = cli({"start", "--job", "7", "--gpus", "9"});
  EXPECT_THAT(r.err, HasSubstr("GPU 9 not found"));
  EXPECT_EQ(cli({"start", "--job", "7", "--gpus", "0,2"}).exit_code, 0);
  r = cli({"start", "--job", "7"});
  EXPECT_THAT(r.err, HasSubstr("job 7 is already being measured"));
  const ProcessResult as_user = run_as(
      kUserA, {ZEUS_CLI_PATH, "job-energy", "stop", "--job", "7", "--zeusd-socket", socket}, {});
  EXPECT_EQ(as_user.exit_code, 1) << "403: only the admin token's holder stops a record";
  // Root without zeusd's admin token (a root pod) is refused too (issue #52).
  const ProcessResult rootless =
      run_process({ZEUS_CLI_PATH, "job-energy", "stop", "--job", "7", "--zeusd-socket", socket});
  EXPECT_EQ(rootless.exit_code, 1) << rootless.err;
  EXPECT_THAT(rootless.err, HasSubstr("admin token"));
  const auto running = nlohmann::json::parse(cli({"report", "7", "--format", "json"}).out);
  EXPECT_EQ(running[0]["state"], "running");
  EXPECT_EQ(running[0]["gpus"].size(), 2u);
  EXPECT_EQ(cli({"stop", "--job", "7"}).exit_code, 0);
  // Over TCP without a token (gpu-read served keyless), a record cannot be started or stopped.
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  SharedDir tcp_dir;
  ZeusdProcess tcp(tcp_dir,
                   {"--mode", "tcp", "--tcp-bind-address", address, "--enable", "gpu-read"});
  EXPECT_EQ(tcp.call("POST", "/job_energy/start?job_id=8").status, 403);
  EXPECT_EQ(tcp.call("GET", "/job_energy/report").status, 200) << "reading is gpu-read's";
  // A restarted daemon keeps its records.
  daemon.kill9();
  daemon.start();
  const auto kept = nlohmann::json::parse(cli({"report", "7", "--format", "json"}).out);
  EXPECT_EQ(kept[0]["state"], "finished");
}

}  // namespace
}  // namespace zeus::test
