// zeusd end to end: the daemon as root over a fake NVML that, like the real one, refuses setters
// that are not root; clients as unprivileged uids. Leases, ownership, restart, bad requests,
// tokens, streams.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "support/raw_connection.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/daemon/token.h"
#include "zeus/device/discovery.h"
#include "zeus/device/zeusd/zeusd_gpu_set.h"
#include "zeusd_support.h"

namespace zeus::test {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
using std::chrono::seconds;

FakeNvml strict_nvml() {
  return FakeNvml(four_a40s(), false, {.permissive = false});
}

bool limit_becomes(const FakeNvml& nvml, int gpu, int64_t mw, seconds deadline = seconds(10)) {
  return eventually([&] { return nvml.limit_mw(gpu) == mw; }, deadline);
}

TEST(Zeusd, AnUnprivilegedJobSetsLimitsOnlyThroughTheDaemonAndTheyComeBackWhenItDies) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  ZeusdProcess daemon(dir);
  const std::string journal = (dir.scratch() / "guard.json").string();

  // Without the daemon, the fake refuses a non-root setter as the driver does.
  const ProcessResult alone =
      run_as(kUserA, {ZEUS_LIMIT_SETTER_PATH, "nvml", journal, "200000"}, {});
  EXPECT_EQ(alone.exit_code, 1);
  EXPECT_EQ(nvml.limit_mw(0), 300'000);

  // With it, the same program sets its limit, and SIGKILL (no cleanup in the job) undoes it.
  std::vector<std::string> argv{
      ZEUS_AS_UID_PATH, std::to_string(kUserA), ZEUS_LIMIT_SETTER_PATH, "nvml", journal, "200000",
      "150000"};
  Child setter(argv, daemon.client_env());
  ASSERT_TRUE(setter.wait_for_output("ready", seconds(20)));
  EXPECT_EQ(nvml.limit_mw(0), 200'000);
  EXPECT_EQ(nvml.limit_mw(1), 150'000);
  setter.kill(SIGKILL);
  setter.wait();
  EXPECT_TRUE(limit_becomes(nvml, 0, 300'000));
  EXPECT_TRUE(limit_becomes(nvml, 1, 300'000));

  // A client that exits normally: back too.
  auto once = client_as(kUserA, daemon, {"POST", set_limit(2, 120'000)}, false);
  const ProcessResult r = once->wait();
  EXPECT_THAT(r.out, HasSubstr("status=200"));
  EXPECT_TRUE(limit_becomes(nvml, 2, 300'000));

  // The audit names who, what, old and new, and the restores (written just after each restore).
  std::set<std::string> changes;
  std::set<std::string> restores;
  const auto read_audit = [&] {
    changes.clear();
    restores.clear();
    std::ifstream audit(daemon.state_dir() / "audit.jsonl");
    std::string line;
    while (std::getline(audit, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.value("uid", 0) != static_cast<int>(kUserA)) {
        continue;
      }
      EXPECT_TRUE(j.contains("pid") && j.contains("gpu") && j.contains("old") && j.contains("new"))
          << line;
      const std::string what =
          j["gpu"].dump() + ":" + j["old"].get<std::string>() + "->" + j["new"].get<std::string>();
      (j.value("event", "") == "change" ? changes : restores).insert(what);
    }
    return restores.size() >= 3;
  };
  EXPECT_TRUE(eventually(read_audit, seconds(10)));
  for (const std::string c : {"0:300000->200000", "1:300000->150000", "2:300000->120000"}) {
    EXPECT_TRUE(changes.contains(c)) << c;
  }
  EXPECT_EQ(restores,
            (std::set<std::string>{"0:200000->300000", "1:150000->300000", "2:120000->300000"}));
}

// "Through zeusd" wraps any backend (issue #39): a simulated GPU's changes go to the daemon,
// which makes them on the machine's GPU of the same index; its reads stay the simulator's.
TEST(Zeusd, AnyBackendsChangesGoThroughTheDaemonAndItsReadsStayLocal) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  ZeusdProcess daemon(dir);
  device::zeusd::ZeusdGpuSet gpus(device::open_gpu_set("sim:a40", {}),
                                  {.socket_path = daemon.socket().string()});
  EXPECT_THAT(gpus.locator(), ::testing::StartsWith("sim:a40")) << "the wrapped set's";
  EXPECT_THAT(gpus.limits_through(), HasSubstr(daemon.socket().string()));
  EXPECT_THAT(gpus.describe(0), HasSubstr(daemon.socket().string()));
  const int64_t simulated = gpus.power_limit_mw(0);
  gpus.set_power_limit_mw(0, 200'000);
  EXPECT_EQ(nvml.limit_mw(0), 200'000) << "the daemon made the change";
  EXPECT_EQ(gpus.power_limit_mw(0), simulated) << "reads are the wrapped backend's";
  EXPECT_THROW(gpus.set_power_limit_mw(0, 10'000), ConfigError) << "refused before the daemon";
  EXPECT_EQ(nvml.limit_mw(0), 200'000);
  gpus.set_gpu_locked_clocks(0, 500, 1000);
  EXPECT_EQ(nvml.state()["gpus"][0]["gpu_locked_clocks"], nlohmann::json({500, 1000}));
}

TEST(Zeusd, AnotherUserIsRefusedAHeldGpuGetsAnotherAndOneUidSharesALease) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  ZeusdProcess daemon(dir);

  auto a1 = client_as(kUserA, daemon, {"POST", set_limit(0, 200'000)}, true);
  auto b = client_as(kUserB, daemon,
                     {"POST", set_limit(0, 100'000), "POST", set_limit(1, 250'000), "GET",
                      "/gpu/get_power_limit?gpu_ids=0"},
                     false);
  const std::string out = b->wait().out;
  EXPECT_THAT(out, HasSubstr("status=409"));
  EXPECT_THAT(out, HasSubstr("uid 61001 (pid " + std::to_string(a1->pid()) + ")"));
  EXPECT_THAT(out, HasSubstr("status=200 body={\"0\":{\"power_limit_mw\":200000}}"))
      << "reads stay open";
  EXPECT_EQ(nvml.limit_mw(0), 200'000);
  EXPECT_TRUE(limit_becomes(nvml, 1, 300'000)) << "user B's process ended";

  // A second process of user A lowers it further; the GPU goes back to the value before the
  // first lease only when both have ended.
  auto a2 = client_as(kUserA, daemon, {"POST", set_limit(0, 150'000)}, true);
  EXPECT_EQ(nvml.limit_mw(0), 150'000);
  a1->kill(SIGKILL);
  a1->wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(nvml.limit_mw(0), 150'000) << "one holder is still alive";
  a2->kill(SIGKILL);
  a2->wait();
  EXPECT_TRUE(limit_becomes(nvml, 0, 300'000));
}

// --require-gpu-process: a user may change only a GPU on which NVML lists a process of its uid.
TEST(Zeusd, RequireGpuProcessLetsAUserChangeOnlyTheGpusItRunsOn) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  ZeusdProcess daemon(dir, {"--require-gpu-process"});
  // A "training process" of user A on GPU 0 (it sets nothing itself).
  auto training = client_as(kUserA, daemon, {"GET", "/time"}, true);
  nvml.set_gpu_value(0, "processes", {training->pid()});
  auto user_a = client_as(kUserA, daemon,
                          {"POST", set_limit(0, 200'000), "POST", set_limit(1, 200'000)}, false);
  const std::string out = user_a->wait().out;
  EXPECT_THAT(out, HasSubstr("status=200 body=\nstatus=403"));
  EXPECT_THAT(out, HasSubstr("--require-gpu-process"));
  auto user_b = client_as(kUserB, daemon, {"POST", set_limit(2, 200'000)}, false);
  EXPECT_THAT(user_b->wait().out, HasSubstr("status=403"));
  EXPECT_EQ(daemon.call("POST", set_limit(3, 250'000)).status, 200)
      << "an administrator is not bound by it";
  EXPECT_TRUE(limit_becomes(nvml, 0, 300'000)) << "user A's client ended";
  EXPECT_EQ(nvml.limit_mw(1), 300'000);
  EXPECT_EQ(nvml.limit_mw(2), 300'000);
}

// Issue #52: being root is not being an administrator (a training pod runs as root): root
// without zeusd's admin token is refused another uid's GPU and is leased; the token's holder's
// changes stay and end leases.
TEST(Zeusd, AnAdminsChangesStayAndEndALeaseAndRootAloneIsNoAdmin) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  ZeusdProcess daemon(dir);
  auto a = client_as(kUserA, daemon, {"POST", set_limit(3, 200'000)}, true);
  const auto refused = daemon.call_as_root("POST", set_limit(3, 230'000));
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_THAT(refused.body, HasSubstr("held by uid 61001"));
  EXPECT_EQ(nvml.limit_mw(3), 200'000) << "root without the token ended no lease";
  device::zeusd::ZeusdClient wrong(
      {.socket_path = daemon.socket().string(), .admin_token = "not-the-token"});
  const auto forged = wrong.request("POST", set_limit(3, 230'000));
  EXPECT_EQ(forged.status, 403) << forged.body;
  EXPECT_THAT(forged.body, HasSubstr("admin.token"));
  EXPECT_EQ(daemon.call("POST", set_limit(3, 220'000)).status, 200);
  EXPECT_EQ(daemon.call("POST", set_limit(2, 250'000)).status, 200);
  auto b = client_as(kUserB, daemon, {"POST", set_limit(3, 210'000)}, false);
  EXPECT_THAT(b->wait().out, HasSubstr("status=200")) << "root's change ended user A's lease";
  a->kill(SIGKILL);
  a->wait();
  EXPECT_TRUE(limit_becomes(nvml, 3, 220'000)) << "user B's lease restores root's value";
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(nvml.limit_mw(3), 220'000);
  EXPECT_EQ(nvml.limit_mw(2), 250'000) << "an admin's change stays";
}

TEST(Zeusd, ADaemonKilledWithLeasesRestoresThemWhenStartedAgain) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  ZeusdProcess daemon(dir);
  auto dies = client_as(kUserA, daemon,
                        {"POST", set_limit(0, 200'000), "POST", set_limit(1, 180'000)}, true);
  auto lives = client_as(kUserB, daemon, {"POST", set_limit(2, 160'000)}, true);
  daemon.kill9();
  dies->kill(SIGKILL);
  dies->wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(nvml.limit_mw(0), 200'000) << "nobody restores while the daemon is down";

  daemon.start();
  EXPECT_TRUE(limit_becomes(nvml, 0, 300'000));
  EXPECT_TRUE(limit_becomes(nvml, 1, 300'000));
  EXPECT_EQ(nvml.limit_mw(2), 160'000) << "its holder is alive: still leased";
  // The restarted daemon watches the living holder, and still enforces its ownership.
  auto other = client_as(kUserA, daemon, {"POST", set_limit(2, 100'000)}, false);
  EXPECT_THAT(other->wait().out, HasSubstr("status=409"));
  lives->kill(SIGKILL);
  lives->wait();
  EXPECT_TRUE(limit_becomes(nvml, 2, 300'000));
}

TEST(Zeusd, ACorruptJournalStopsTheDaemonNamingIt) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  fs::create_directories(dir / "state");
  fs::permissions(dir / "state", fs::perms::owner_all);
  std::ofstream(dir / "state" / "leases.json") << "{\"version\": 1, \"leases\": [";
  const ProcessResult r =
      run_process({ZEUSD_PATH, "serve", "--socket-path", (dir / "s.sock").string(), "--state-dir",
                   (dir / "state").string()},
                  seconds(20));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr((dir / "state" / "leases.json").string()));
}

TEST(Zeusd, BadRequestsChangeNothingAndTheDaemonLives) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  ZeusdProcess daemon(dir, {"--idle-timeout-s", "2"});
  struct Case {
    std::string method, target;
    long status;
    std::string body;
  };
  const std::vector<Case> cases{
      {"POST", "/gpu/set_power_limit?gpu_ids=0&block=true&power_limit_mw=abc", 400, "invalid"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0&block=true&power_limit_mw=-5", 400, "invalid"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0&block=true&power_limit_mw=1&x=1", 400,
       "unknown field `x`"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000", 400, "`block`"},
      {"POST", set_limit(9, 200'000), 400, "GPU index 9 does not exist."},
      {"POST", "/gpu/set_power_limit?gpu_ids=0,x&block=true&power_limit_mw=200000", 400,
       "{\"error\":\"Invalid GPU index: x\"}"},
      {"POST", set_limit(0, 50'000), 400, "{\"errors\":{\"0\":"},
      {"GET", "/gpu/get_power_limit?gpu_ids=7", 400, "{\"error\":\"GPU 7 not found\"}"},
      {"GET", "/gpu/set_power_limit?gpu_ids=0&block=true&power_limit_mw=200000", 404, ""},
      {"GET", "/nothing/here", 404, ""},
  };
  for (const Case& c : cases) {
    const auto reply = daemon.call(c.method, c.target);
    EXPECT_EQ(reply.status, c.status) << c.method << " " << c.target << ": " << reply.body;
    EXPECT_THAT(reply.body, HasSubstr(c.body)) << c.target;
  }

  // A body over 64 KiB: 413, nothing applied.
  RawConnection big(daemon.socket());
  ASSERT_TRUE(big.connected());
  const std::string body(70 * 1024, 'x');
  big.send("POST " + set_limit(0, 200'000) + " HTTP/1.1\r\nHost: zeusd\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n");
  big.send(body);
  EXPECT_THAT(big.read_until("\r\n\r\n"), HasSubstr("HTTP/1.1 413"));

  // Hundreds of idle connections and one that sends a byte at a time: others are still served,
  // and the idle ones are closed after --idle-timeout-s.
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 300; ++i) {
    idle.push_back(std::make_unique<RawConnection>(daemon.socket()));
  }
  std::thread slow([&] {
    RawConnection c(daemon.socket());
    for (const char ch : "POST " + set_limit(0, 110'000) + " HTTP/1.1\r\nHost: z") {
      if (!c.send(std::string(1, ch))) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  EXPECT_TRUE(eventually(
      [&] {
        try {
          return daemon.call("GET", "/discover").status == 200;
        } catch (const std::exception&) {
          return false;  // refused at accept while the idle ones fill the connection limit
        }
      },
      seconds(10)));
  EXPECT_TRUE(idle.front()->closed_by_server()) << "idle past --idle-timeout-s";
  slow.join();
  idle.clear();
  EXPECT_EQ(daemon.call("GET", "/gpu/get_power_limit?gpu_ids=0").body,
            "{\"0\":{\"power_limit_mw\":300000}}");
  EXPECT_EQ(nvml.limit_mw(0), 300'000);
  EXPECT_EQ(nvml.state()["settings_history"].size(), 0u) << nvml.state().dump();
}

TEST(Zeusd, PerGpuFailuresAreReportedWithTheWorstStatus) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  ZeusdProcess daemon(dir);
  nvml.set_gpu_value(1, "faults", {{"set_error", 4}});  // NVML_ERROR_NO_PERMISSION
  const auto r =
      daemon.call("POST", "/gpu/set_power_limit?gpu_ids=0,1&block=true&power_limit_mw=200000");
  EXPECT_EQ(r.status, 403) << r.body;
  const auto j = nlohmann::json::parse(r.body);
  ASSERT_TRUE(j["errors"].contains("1")) << r.body;
  EXPECT_FALSE(j["errors"].contains("0")) << r.body;
  EXPECT_EQ(nvml.limit_mw(0), 200'000) << "the GPU that could be changed was";
  EXPECT_EQ(nvml.limit_mw(1), 300'000);
}

std::string zeusd_token(const fs::path& key, const std::string& scope) {
  const ProcessResult r = run_process({ZEUSD_PATH, "token", "issue", "--signing-key-path",
                                       key.string(), "--user", "alice", "--scope", scope});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string token = r.out;
  while (!token.empty() && (token.back() == '\n' || token.back() == ' ')) {
    token.pop_back();
  }
  return token;
}

TEST(Zeusd, OverTcpOnlyAValidTokenWithTheScopeControls) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  const fs::path key = dir / "key";
  std::ofstream(key) << "a signing key of this test";
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);  // zeusd refuses others'
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);  // zeusd refuses others'
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  ZeusdProcess daemon(
      dir, {"--mode", "tcp", "--tcp-bind-address", address, "--signing-key-path", key.string()});
  const auto call = [&](const std::string& token, const std::string& method,
                        const std::string& target) {
    device::zeusd::ZeusdClient client({.host_port = address, .token = token});
    return client.request(method, target);
  };
  const std::string reader = zeusd_token(key, "gpu-read");
  const std::string controller = zeusd_token(key, "gpu-read,gpu-control");
  const auto now = std::chrono::system_clock::now();
  const std::string expired = daemon::issue_token(
      "a signing key of this test",
      {"alice",
       {"gpu-control"},
       std::chrono::duration_cast<seconds>(now.time_since_epoch()).count() - 3600});
  const std::string forged = daemon::issue_token("another key", {"alice", {"gpu-control"}, {}});

  EXPECT_EQ(call(reader, "GET", "/gpu/get_power_limit").status, 200);
  EXPECT_EQ(call("", "GET", "/gpu/get_power_limit").status, 401);
  EXPECT_EQ(call(reader, "POST", set_limit(0, 200'000)).status, 403);
  EXPECT_EQ(call(expired, "POST", set_limit(0, 200'000)).status, 401);
  EXPECT_EQ(call(forged, "POST", set_limit(0, 200'000)).status, 401);
  EXPECT_EQ(call("", "POST", set_limit(0, 200'000)).status, 401);
  EXPECT_EQ(nvml.limit_mw(0), 300'000);
  EXPECT_THAT(call(controller, "GET", "/auth/whoami").body, HasSubstr("alice"));
  EXPECT_EQ(call(controller, "POST", set_limit(0, 200'000)).status, 200);
  EXPECT_EQ(nvml.limit_mw(0), 200'000) << "a token holder's change persists, as an admin's";
}

TEST(Zeusd, TcpControlWithoutASigningKeyIsRefusedAtStart) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  const ProcessResult r = run_process(
      {ZEUSD_PATH, "serve", "--mode", "tcp", "--tcp-bind-address",
       "127.0.0.1:" + std::to_string(free_port()), "--state-dir", (dir / "state").string()},
      seconds(20));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--signing-key-path"));
}

TEST(Zeusd, APowerStreamSendsTheCurrentValueThenChanges) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  ZeusdProcess daemon(dir, {"--gpu-power-poll-hz", "50"});
  RawConnection stream(daemon.socket());
  stream.send("GET /gpu/stream_power?gpu_ids=1 HTTP/1.1\r\nHost: zeusd\r\n\r\n");
  const std::string head = stream.read_until("\n\n");
  EXPECT_THAT(head, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(head, HasSubstr("text/event-stream"));
  // The fake's instantaneous power field reads power_mw + 1 W: 111 W for GPU 1, at once.
  EXPECT_THAT(stream.read_until("\"power_mw\":111000"), HasSubstr("data: {\"gpu_id\":1,"));
  nvml.set_gpu_value(1, "power_mw", 123'000);
  EXPECT_THAT(stream.read_until("\"power_mw\":124000"), HasSubstr("\"gpu_id\":1"));
}

// Upstream Zeus 0.16's python (PyPI's zeus==0.16.0, scripts/install-zeus016.sh).
const fs::path kZeus016Python = fs::path(ZEUS_SOURCE_DIR) / ".venv-zeus016" / "bin" / "python";

// tests/zeusd_upstream/`script` run by upstream's python as an unprivileged user on the socket.
std::unique_ptr<Child> upstream_as_user(const ZeusdProcess& daemon, const std::string& script,
                                        const std::vector<std::string>& args = {}) {
  auto env = daemon.client_env();
  env["PYTHONDONTWRITEBYTECODE"] = "1";
  std::vector<std::string> argv{ZEUS_AS_UID_PATH, std::to_string(kUserA), kZeus016Python.string(),
                                std::string(ZEUS_SOURCE_DIR) + "/tests/zeusd_upstream/" + script};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<Child>(argv, env);
}

#define SKIP_WITHOUT_ZEUS016()                                                  \
  do {                                                                          \
    if (!fs::exists(kZeus016Python)) {                                          \
      GTEST_SKIP() << kZeus016Python                                            \
                   << " is missing: run scripts/install-zeus016.sh (make test " \
                      "does)";                                                  \
    }                                                                           \
  } while (false)

// Upstream Zeus 0.16's own client (PyPI's zeus==0.16.0, scripts/install-zeus016.sh), unchanged,
// as an unprivileged user: discovers, reads limits and constraints, sets a limit; the daemon puts
// it back when the client is killed.
TEST(Zeusd, UpstreamZeusClientWorksUnchanged) {
  ZEUSD_SKIP_UNLESS_ROOT();
  SKIP_WITHOUT_ZEUS016();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  ZeusdProcess daemon(dir);
  auto client = upstream_as_user(daemon, "upstream_client.py", {"2", "175000"});
  ASSERT_TRUE(client->wait_for_output("ready", seconds(60))) << client->wait().out;
  client->kill(SIGKILL);
  const ProcessResult r = client->wait();
  const auto first_line = r.out.substr(0, r.out.find('\n'));
  const auto seen = nlohmann::json::parse(first_line);
  EXPECT_EQ(seen["zeus_version"], "0.16.0");
  EXPECT_EQ(seen["gpu_ids"], nlohmann::json::parse("[0,1,2,3]"));
  EXPECT_EQ(seen["names"][0], "NVIDIA A40");
  EXPECT_TRUE(seen["can_control_gpu"].get<bool>());
  EXPECT_EQ(seen["limits"]["2"], 300'000);
  EXPECT_EQ(seen["constraints"]["2"], nlohmann::json::parse("[100000,300000]"));
  EXPECT_EQ(seen["after"], 175'000) << "set through the daemon, read back";
  EXPECT_THAT(seen["out_of_range"].get<std::string>(), HasSubstr("refused"));
  EXPECT_TRUE(limit_becomes(nvml, 2, 300'000)) << "the client was killed: its limit is back";
}

// Upstream Zeus 0.16's own PowerStreamingClient (its SSE parser over httpx, its clock offset from
// /time), unchanged, as an unprivileged user on the socket: both GPUs' power, and a change.
TEST(Zeusd, UpstreamPowerStreamingClientReadsTheStreams) {
  ZEUSD_SKIP_UNLESS_ROOT();
  SKIP_WITHOUT_ZEUS016();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  ZeusdProcess daemon(dir);
  auto client = upstream_as_user(daemon, "upstream_power_streaming.py");
  ASSERT_TRUE(client->wait_for_output("ready", seconds(60))) << client->wait().out;
  nvml.set_gpu_value(1, "power_mw", 200'000);
  const ProcessResult r = client->wait();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<nlohmann::json> lines;
  std::istringstream out(r.out);
  for (std::string line; std::getline(out, line);) {
    if (line.starts_with("{")) {
      lines.push_back(nlohmann::json::parse(line));
    }
  }
  ASSERT_EQ(lines.size(), 2u) << r.out;
  const double gpu0 = lines[0]["gpu_power_w"]["0"];
  const double gpu1 = lines[0]["gpu_power_w"]["1"];
  EXPECT_NEAR(gpu0, 100.0, 2.0) << "the fake's 100 W";
  EXPECT_NEAR(gpu1, 110.0, 2.0);
  EXPECT_LT(std::abs(lines[0]["age_s"].get<double>()), 5.0) << "upstream's clock offset";
  EXPECT_NEAR(lines[1]["gpu_power_w"]["1"].get<double>(), 200.0, 2.0);
}

// --gpu-command-overrides: the file's commands replace NVML's setter, for users' changes and for
// the restores of their leases alike; a command that fails, or prints what error_pattern
// matches, is 500 naming it.
TEST(Zeusd, CommandOverridesReplaceNvmlSetters) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  SharedDir dir;
  const fs::path log = dir / "override.log";
  const fs::path file = dir / "overrides.toml";
  std::ofstream(file) << "[set_power_limit]\n"
                      << "commands = [\"/bin/sh -c 'echo gpu={gpu_id} w={power_limit_w} mw="
                         "{power_limit_mw} >> "
                      << log.string() << "'\"]\n"
                      << "[set_persistence_mode]\n"
                      << "commands = [\"/bin/echo FAILED to set {enabled}\"]\n"
                      << "error_pattern = \"FAILED\"\n"
                      << "[reset_gpu_locked_clocks]\n"
                      << "commands = [\"/bin/false\"]\n";
  ZeusdProcess daemon(dir, {"--gpu-command-overrides", file.string()});
  auto user = client_as(kUserA, daemon, {"POST", set_limit(1, 200'000)}, true);
  EXPECT_TRUE(user->wait_for_output("status=200", seconds(1)));
  EXPECT_EQ(nvml.limit_mw(1), 300'000) << "NVML's setter was not called";
  user->kill(SIGKILL);
  user->wait();
  EXPECT_TRUE(eventually(
      [&] {
        return fs::exists(log) &&
               read_file(log) == "gpu=1 w=200 mw=200000\ngpu=1 w=300 mw=300000\n";
      },
      seconds(10)))
      << read_file(log) << " (the lease's restore runs the override too)";

  const auto pm =
      daemon.call("POST", "/gpu/set_persistence_mode?gpu_ids=0&block=true&enabled=true");
  EXPECT_EQ(pm.status, 500);
  EXPECT_THAT(pm.body, HasSubstr("error_pattern"));
  const auto reset = daemon.call("POST", "/gpu/reset_gpu_locked_clocks?gpu_ids=2&block=true");
  EXPECT_EQ(reset.status, 500);
  EXPECT_THAT(reset.body, HasSubstr("/bin/false"));
  EXPECT_THAT(reset.body, HasSubstr("exited with code 1"));
}

TEST(Zeusd, BadFlagsSayWhatIsWrongAndStartNothing) {
  SharedDir dir;
  const std::string sock = (dir / "s.sock").string();
  const std::string state = (dir / "state").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--mode", "pipe"}, "--mode pipe"},
      {{"--socket-gid", "no-such-group-zeusd"}, "--socket-gid 'no-such-group-zeusd'"},
      {{"--socket-permissions", "rw"}, "--socket-permissions 'rw'"},
      {{"--enable", "gpu-write"}, "unknown API group 'gpu-write'"},
      {{"--gpu-power-poll-hz", "0"}, "--gpu-power-poll-hz"},
      {{"--gpu-command-overrides", (dir / "missing.toml").string()}, "missing.toml"},
  };
  for (const auto& [flags, why] : cases) {
    std::vector<std::string> argv{ZEUSD_PATH, "serve", "--socket-path", sock, "--state-dir", state};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const ProcessResult r = run_process(argv, seconds(20));
    EXPECT_EQ(r.exit_code, 2) << flags[0] << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(why)) << flags[0];
    EXPECT_FALSE(fs::exists(sock)) << flags[0];
  }
}

TEST(Zeusd, CheckSaysWhatItFound) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeNvml nvml = strict_nvml();
  const ProcessResult r = run_process({ZEUSD_PATH, "serve", "--check"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("GPU 3: NVIDIA A40"));
  EXPECT_THAT(r.out, HasSubstr("(root: may set GPU limits)"));
  const ProcessResult unprivileged = run_as(kUserA, {ZEUSD_PATH, "serve", "--check"}, {});
  EXPECT_NE(unprivileged.exit_code, 0) << "it would not start";
  EXPECT_THAT(unprivileged.out, HasSubstr("privileges: euid 61001\n"));
  EXPECT_THAT(unprivileged.out, HasSubstr("will not start"));
}

}  // namespace
}  // namespace zeus::test
