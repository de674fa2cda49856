// The batch-size service's C++ client (bso_client/client.h) against a real `zeus bso-server`:
// upstream's protocol, zeus-cpp's extra grant fields, and every error a user can cause, said
// with the URL and what to do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "bso_support.h"
#include "zeus/bso_client/client.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/tune/tuner.h"

namespace zeus::test {
namespace {

using ::testing::HasSubstr;

bso::JobSpecRequest spec(const std::string& job_id, std::vector<int64_t> sizes, int64_t dflt) {
  bso::JobSpecRequest r;
  r.params.job_id = job_id;
  r.params.job_id_prefix = job_id.substr(0, job_id.find('-'));
  r.params.batch_sizes = std::move(sizes);
  r.params.default_batch_size = dflt;
  r.params.max_power_w = 300;
  r.params.number_of_gpus = 1;
  r.params.gpu_model = "A40";
  return r;
}

TEST(BsoClient, SpeaksUpstreamsProtocolAndHearsTheThresholdAndTheEnd) {
  TempDir dir;
  BsoServerProcess server("sqlite:///" + (dir / "bso.db").string());
  bso::BsoClient client({.url = server.url() + "/"});
  const bso::JobParams job = client.register_job(spec("c-1", {32, 16, 64}, 32));
  EXPECT_EQ(job.job_id, "c-1");
  EXPECT_EQ(job.batch_sizes, (std::vector<int64_t>{16, 32, 64}));  // sorted, as upstream's
  EXPECT_EQ(client.register_job(spec("c-1", {16, 32, 64}, 32)), job) << "the same spec: 200";

  // The default first; no threshold before any cost is known.
  const bso::TrialGrant first = client.next_trial("c-1");
  EXPECT_EQ(first.key.batch_size, 32);
  EXPECT_EQ(first.key.trial_number, 1);
  EXPECT_FALSE(first.cost_threshold);
  const bso::ReportAnswer keep_going = client.report("c-1", {1, 32, 5.0, 500.0, 0.1, 1});
  EXPECT_FALSE(keep_going.stop_train);
  const bso::ReportAnswer done = client.report("c-1", {1, 32, 10.0, 1000.0, 0.9, 2});
  EXPECT_TRUE(done.stop_train);
  EXPECT_TRUE(done.converged);
  EXPECT_EQ(done.message, "Train succeeded");

  // Down from the default; the threshold is beta x the best cost: 2 x (0.5 x 1000 J + 0.5 x 300 W
  // x 10 s).
  const bso::TrialGrant second = client.next_trial("c-1");
  EXPECT_EQ(second.key.batch_size, 16);
  ASSERT_TRUE(second.cost_threshold);
  EXPECT_DOUBLE_EQ(*second.cost_threshold, 2 * (0.5 * 1000 + 0.5 * 300 * 10));
  client.end_trial(second.key);
  const bso::ReportAnswer late = client.report("c-1", {2, 16, 1.0, 1.0, 0.9, 1});
  EXPECT_TRUE(late.stop_train) << "an ended trial takes no more reports";
  EXPECT_EQ(late.message, "Result for this trial(2) is already reported.");

  // A job id with another spec, an unknown job, an unknown trial: ConfigError with the
  // service's own message.
  try {
    client.register_job(spec("c-1", {16, 32, 64}, 64));
    FAIL() << "a mismatched re-registration was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("HTTP 409"));
    EXPECT_THAT(e.what(), HasSubstr("JobSpec doesn't match"));
    EXPECT_THAT(e.what(), HasSubstr("new job id"));
  }
  EXPECT_THROW(
      try { client.next_trial("nobody-1"); } catch (const ConfigError& e) {
        EXPECT_THAT(e.what(), HasSubstr("Unknown job(nobody-1)"));
        throw;
      },
      ConfigError);
  EXPECT_THROW(client.end_trial({"c-1", 16, 99}), ConfigError);
  // What upstream's validators refuse comes back as the field and the rule.
  try {
    client.register_job(spec("c-2", {16, 32}, 64));
    FAIL() << "a default outside the list was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("HTTP 422"));
    EXPECT_THAT(e.what(), HasSubstr("default_batch_size"));
  }
}

TEST(BsoClient, AnUnreachableServiceOrABadUrlIsNamed) {
  const std::string url = "http://127.0.0.1:" + std::to_string(free_port());
  bso::BsoClient client({.url = url, .connect_timeout = std::chrono::milliseconds(2000)});
  try {
    client.next_trial("c-1");
    FAIL() << "no service answered, yet no error";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr(url));
    EXPECT_THAT(e.what(), HasSubstr("zeus bso-server"));
  }
  EXPECT_THROW(bso::BsoClient({.url = "127.0.0.1:8000"}), ConfigError);
  EXPECT_THROW(bso::BsoClient({.url = "ftp://127.0.0.1:8000"}), ConfigError);
}

TEST(BsoWire, ErrorBodiesAreSaidAsTheServiceMeantThem) {
  EXPECT_EQ(bso::error_text(R"({"message":"Unknown job x"})"), "Unknown job x");
  EXPECT_EQ(bso::error_text(
                R"({"detail":[{"loc":["body","batch_sizes"],"msg":"field required","type":"x"},)"
                R"({"loc":["body","eta_knob"],"msg":"eta_knob: must be in [0, 1]"}]})"),
            "batch_sizes: field required; eta_knob: must be in [0, 1]");
  EXPECT_EQ(bso::error_text(R"({"detail":"Not Found"})"), "Not Found");
  EXPECT_EQ(bso::error_text("Internal Server Error"), "Internal Server Error");
  EXPECT_EQ(bso::error_text(std::string(400, 'x')).size(), 303u) << "shortened";
  // The grant's extra fields are optional: upstream's server sends a bare TrialId.
  const bso::TrialGrant bare =
      bso::parse_trial_grant(R"({"job_id":"a","batch_size":8,"trial_number":3})");
  EXPECT_EQ(bare.key.trial_number, 3);
  EXPECT_FALSE(bare.cost_threshold);
  EXPECT_FALSE(bare.epoch_cap);
  const bso::TrialGrant full = bso::parse_trial_grant(
      bso::trial_grant_json({.key = {"a", 8, 3}, .cost_threshold = 12.5, .epoch_cap = 4}));
  EXPECT_EQ(full.cost_threshold, 12.5);
  EXPECT_EQ(full.epoch_cap, 4);
}

// A training command for zeus tune: 256 never reaches the target; energy grows away from 64.
constexpr const char* kFakeTrainer = R"(#!/bin/sh
bs=$1
echo "bs=$bs threshold=$ZEUS_COST_THRESH target=$ZEUS_TARGET_METRIC" >> "$ZEUS_LOG_DIR/calls.log"
reached=true
[ "$bs" -ge 256 ] && reached=false
energy=$(( (bs - 64) * (bs - 64) / 10 + 100 ))
printf '{"energy": %d, "time": 1.5, "cost": %d, "num_epochs": 2, "reached": %s}\n' \
  "$energy" "$energy" "$reached" > "$ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs$bs.train.json"
)";

std::vector<std::string> tune_argv(const std::string& url, const std::filesystem::path& log,
                                   const std::filesystem::path& script, int recurrences) {
  return {ZEUS_CLI_PATH,
          "tune",
          "--batch-sizes",
          "32,64,128,256",
          "--default-batch-size",
          "64",
          "--recurrences",
          std::to_string(recurrences),
          "--log-dir",
          log.string(),
          "--server",
          url,
          "--job-id",
          "shared",
          "--target-metric",
          "0.5",
          "--gpus",
          "1",
          "--gpu-model",
          "A40",
          "--gpu-max-power-w",
          "300",
          "--",
          "/bin/sh",
          script.string(),
          "{bs}"};
}

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    out.push_back(line);
  }
  return out;
}

TEST(ZeusTuneServer, TunersOnTwoMachinesShareOneJobAtTheService) {
  TempDir dir;
  BsoServerProcess server("sqlite:///" + (dir / "bso.db").string());
  const auto script = dir / "trainer.sh";
  write_file_atomic(script, kFakeTrainer);

  // Machine A runs two recurrences: the default, then down.
  const ProcessResult a =
      run_process(tune_argv(server.url(), dir / "a", script, 2), std::chrono::seconds(120));
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  const auto tries_a = tune::read_tries(dir / "a" / "tune-tries.jsonl");
  ASSERT_EQ(tries_a.size(), 2u) << a.out << a.err;
  EXPECT_EQ(tries_a[0].batch_size, 64);
  EXPECT_EQ(tries_a[1].batch_size, 32);
  EXPECT_EQ(tries_a[0].trial_number, 1);
  EXPECT_EQ(tries_a[1].trial_number, 2);
  // The service's threshold reaches the command: 2 x (0.5 x 100 J + 0.5 x 300 W x 1.5 s).
  const auto calls_a = lines_of(dir / "a" / "calls.log");
  ASSERT_EQ(calls_a.size(), 2u);
  EXPECT_EQ(calls_a[0], "bs=64 threshold=inf target=0.5");
  EXPECT_EQ(calls_a[1], "bs=32 threshold=550 target=0.5");

  // Machine B goes on where the service is: up from the default, then 256 fails and the next
  // round starts; its trial numbers follow A's.
  const ProcessResult b =
      run_process(tune_argv(server.url(), dir / "b", script, 2), std::chrono::seconds(120));
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  const auto tries_b = tune::read_tries(dir / "b" / "tune-tries.jsonl");
  ASSERT_GE(tries_b.size(), 3u) << b.out << b.err;
  EXPECT_EQ(tries_b[0].batch_size, 128);
  EXPECT_EQ(tries_b[1].batch_size, 256);
  EXPECT_FALSE(tries_b[1].reached);
  for (size_t i = 0; i < tries_b.size(); ++i) {
    EXPECT_EQ(tries_b[i].trial_number, static_cast<int64_t>(i) + 3);
  }
  EXPECT_THAT(b.out,
              HasSubstr("job 'shared' is kept by the batch-size service at " + server.url()));

  // Upstream's client sees the same job: the next trial is the next number.
  const HttpReply next = http_call("GET", server.url() + "/jobs/batch_size?job_id=shared");
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_THAT(next.body, HasSubstr(fmt::format(R"("trial_number":{})", tries_b.size() + 3)));
}

TEST(ZeusTuneServer, MissingJobIdOrTargetOrAServiceDownExitsSayingWhat) {
  TempDir dir;
  const auto script = dir / "trainer.sh";
  write_file_atomic(script, kFakeTrainer);
  auto argv = tune_argv("http://127.0.0.1:1", dir / "t", script, 1);
  auto without = [&](const std::string& flag) {
    auto v = argv;
    const auto it = std::find(v.begin(), v.end(), flag);
    v.erase(it, it + 2);
    return v;
  };
  const ProcessResult no_id = run_process(without("--job-id"));
  EXPECT_EQ(no_id.exit_code, 2);
  EXPECT_THAT(no_id.err, HasSubstr("--server needs --job-id"));
  const ProcessResult no_target = run_process(without("--target-metric"));
  EXPECT_EQ(no_target.exit_code, 2);
  EXPECT_THAT(no_target.err, HasSubstr("--server needs --target-metric"));
  const std::string url = "http://127.0.0.1:" + std::to_string(free_port());
  const ProcessResult down = run_process(tune_argv(url, dir / "d", script, 1));
  EXPECT_NE(down.exit_code, 0);
  EXPECT_THAT(down.err, HasSubstr("cannot reach the batch-size service at " + url));
  EXPECT_FALSE(std::filesystem::exists(dir / "d" / "calls.log")) << "nothing ran";
}

}  // namespace
}  // namespace zeus::test
