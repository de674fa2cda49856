// zeusd's pure parts: tokens, query parameters, the lease book.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/daemon/command_overrides.h"
#include "zeus/daemon/gpu_set_control.h"
#include "zeus/daemon/leases.h"
#include "zeus/daemon/query.h"
#include "zeus/daemon/token.h"
#include "zeus/device/discovery.h"
#include "zeus/device/restore_rule.h"
#include "zeus/device/zeusd/zeusd_gpu_set.h"
#include "zeus/http/peer_limits.h"

namespace zeus::daemon {
namespace {

using std::chrono::seconds;
using std::chrono::system_clock;

const system_clock::time_point kNow = system_clock::time_point(seconds(1'800'000'000));

// zeusd's GpuControl is a view of the device layer (issue #39): any backend's GPUs, here the
// simulator's, are read and changed through it with the wire API's units and identities.
TEST(GpuSetControl, ServesAnyBackendsGpus) {
  const auto sim = device::open_gpu_set("sim:a40", {.sim_clock = device::SimClock::kVirtual});
  GpuSetControl gpus(*sim);
  ASSERT_EQ(gpus.count(), 1);
  EXPECT_THAT(gpus.identity(0).name, ::testing::HasSubstr("A40"));
  EXPECT_EQ(gpus.identity(0).pci_address, "") << "a simulated GPU has no bus";
  EXPECT_TRUE(gpus.identity(0).energy_available);
  EXPECT_THROW(gpus.identity(1), ConfigError);
  const PowerLimitRange range = gpus.power_limit_constraints_mw(0);
  const auto target = static_cast<uint32_t>(range.min_mw);
  gpus.set_power_limit_mw(0, target);
  EXPECT_EQ(gpus.power_limit_mw(0), target);
  EXPECT_THROW(gpus.set_power_limit_mw(0, static_cast<uint32_t>(range.max_mw + 1)), ConfigError);
  EXPECT_THROW(gpus.set_persistence_mode(0, true), NotSupported)
      << "what the backend cannot do is refused, naming it";
  EXPECT_TRUE(gpus.compute_pids(0).empty());
}

TEST(ZeusdToken, IssuedTokenVerifiesWithItsClaims) {
  const std::string token =
      issue_token("key", {"alice", {"gpu-read", "gpu-control"}, 1'800'003'600});
  const TokenCheck check = verify_token("key", token, kNow);
  ASSERT_TRUE(check.claims) << check.rejection.reason;
  EXPECT_EQ(check.claims->sub, "alice");
  EXPECT_EQ(check.claims->scopes, (std::vector<std::string>{"gpu-read", "gpu-control"}));
  EXPECT_EQ(check.claims->exp, 1'800'003'600);
}

TEST(ZeusdToken, ATokenWithoutExpiryNeverExpires) {
  const std::string token = issue_token("key", {"bob", {"cpu-read"}, std::nullopt});
  const TokenCheck check = verify_token("key", token, kNow + seconds(86400LL * 3650));
  ASSERT_TRUE(check.claims) << check.rejection.reason;
  EXPECT_FALSE(check.claims->exp);
}

TEST(ZeusdToken, AnotherKeysSignatureIsRefused) {
  const std::string token = issue_token("other key", {"mallory", {"gpu-control"}, std::nullopt});
  const TokenCheck check = verify_token("key", token, kNow);
  EXPECT_FALSE(check.claims);
  EXPECT_FALSE(check.rejection.expired);
}

TEST(ZeusdToken, AnEditedPayloadIsRefused) {
  std::string token = issue_token("key", {"alice", {"gpu-read"}, std::nullopt});
  // Swap the payload for one that grants gpu-control, keeping the signature.
  const std::string forged_payload = issue_token("key", {"alice", {"gpu-control"}, std::nullopt});
  const auto dot1 = token.find('.');
  const auto dot2 = token.rfind('.');
  const auto fdot1 = forged_payload.find('.');
  const auto fdot2 = forged_payload.rfind('.');
  token = token.substr(0, dot1 + 1) + forged_payload.substr(fdot1 + 1, fdot2 - fdot1 - 1) +
          token.substr(dot2);
  EXPECT_FALSE(verify_token("key", token, kNow).claims);
}

TEST(ZeusdToken, ExpiryHasSixtySecondsOfLeeway) {
  const std::string token = issue_token("key", {"alice", {"gpu-read"}, 1'800'000'000});
  EXPECT_TRUE(verify_token("key", token, kNow + seconds(59)).claims);
  const TokenCheck late = verify_token("key", token, kNow + seconds(61));
  EXPECT_FALSE(late.claims);
  EXPECT_TRUE(late.rejection.expired);
}

TEST(ZeusdToken, GarbageAndUnsignedTokensAreRefused) {
  for (const std::string bad : {"", "abc", "a.b", "a.b.c", "..", "eyJhbGciOiJub25lIn0.e30."}) {
    EXPECT_FALSE(verify_token("key", bad, kNow).claims) << bad;
  }
}

TEST(ZeusdToken, LifetimesParse) {
  EXPECT_EQ(parse_token_lifetime("1h"), seconds(3600));
  EXPECT_EQ(parse_token_lifetime("7d"), seconds(7 * 86400));
  EXPECT_EQ(parse_token_lifetime("45m"), seconds(45 * 60));
  EXPECT_EQ(parse_token_lifetime("never"), std::nullopt);
  EXPECT_THROW(parse_token_lifetime("soon"), ConfigError);
  EXPECT_THROW(parse_token_lifetime("-1h"), ConfigError);
}

http::Request request_with(std::vector<std::pair<std::string, std::string>> query) {
  http::Request r;
  r.method = "POST";
  r.path = "/gpu/set_power_limit";
  r.query = std::move(query);
  return r;
}

TEST(ZeusdQuery, UnknownAndRepeatedParametersAreRefused) {
  EXPECT_THROW(Query(request_with({{"gpu_ids", "0"}, {"power", "1"}}), {"gpu_ids"}), QueryError);
  EXPECT_THROW(Query(request_with({{"gpu_ids", "0"}, {"gpu_ids", "1"}}), {"gpu_ids"}), QueryError);
  EXPECT_NO_THROW(Query(request_with({{"gpu_ids", "0"}}), {"gpu_ids", "block"}));
}

TEST(ZeusdQuery, U32IsPlainDecimalInRange) {
  const Query ok(request_with({{"power_limit_mw", "200000"}}), {"power_limit_mw"});
  EXPECT_EQ(ok.required_u32("power_limit_mw"), 200000u);
  for (const std::string bad : {"", "-1", "+5", "1e5", "0x10", "4294967296", "12a", " 1"}) {
    const Query q(request_with({{"power_limit_mw", bad}}), {"power_limit_mw"});
    EXPECT_THROW(q.required_u32("power_limit_mw"), QueryError) << "'" << bad << "'";
  }
  const Query none(request_with({}), {"power_limit_mw"});
  EXPECT_THROW(none.required_u32("power_limit_mw"), QueryError);
}

TEST(ZeusdQuery, BoolsAreTrueOrFalse) {
  EXPECT_TRUE(Query(request_with({{"block", "true"}}), {"block"}).required_bool("block"));
  EXPECT_FALSE(Query(request_with({{"block", "false"}}), {"block"}).required_bool("block"));
  EXPECT_THROW(Query(request_with({{"block", "1"}}), {"block"}).required_bool("block"), QueryError);
  EXPECT_FALSE(Query(request_with({}), {"block"}).optional_bool("block"));
}

TEST(ZeusdQuery, IdListsAreTrimmedSortedAndDeduplicated) {
  const Query q(request_with({{"gpu_ids", " 3, 1,3 ,0"}}), {"gpu_ids"});
  EXPECT_EQ(q.ids("gpu_ids", "GPU"), (std::vector<int>{0, 1, 3}));
  EXPECT_FALSE(Query(request_with({}), {"gpu_ids"}).ids("gpu_ids", "GPU"));
  for (const std::string bad : {"", "a", "1,,2", "-1", "1;2"}) {
    const Query b(request_with({{"gpu_ids", bad}}), {"gpu_ids"});
    EXPECT_THROW(b.ids("gpu_ids", "GPU"), IdListError) << "'" << bad << "'";
  }
}

Actor user(uid_t uid, pid_t pid) {
  return Actor{false, uid, Holder{uid, pid, 1000ULL + static_cast<unsigned>(pid)}, "u"};
}

TEST(ZeusdLeases, AnotherUidConflictsOnAHeldGpuOnly) {
  LeaseBook book;
  book.acquire(user(1000, 10), 0, Setting::kPowerLimit, 300'000);
  const auto holder = book.conflict(user(1001, 20), 0);
  ASSERT_TRUE(holder);
  EXPECT_EQ(holder->uid, 1000u);
  EXPECT_EQ(holder->pid, 10);
  EXPECT_FALSE(book.conflict(user(1001, 20), 1));
  EXPECT_FALSE(book.conflict(user(1000, 11), 0));  // same uid, another process
  EXPECT_FALSE(book.conflict(Actor{true, 0, std::nullopt, "root"}, 0));
}

TEST(ZeusdLeases, TheFirstOriginalComesBackWhenTheLastHolderEnds) {
  LeaseBook book;
  EXPECT_TRUE(book.acquire(user(1000, 10), 0, Setting::kPowerLimit, 300'000));
  EXPECT_FALSE(book.acquire(user(1000, 10), 0, Setting::kPowerLimit, 250'000))
      << "the same process again: nothing to journal";
  EXPECT_TRUE(book.acquire(user(1000, 11), 0, Setting::kPowerLimit, 200'000));  // lowered by 10
  EXPECT_TRUE(book.release(Holder{1000, 10, 1010}).empty());
  const auto freed = book.release(Holder{1000, 11, 1011});
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_EQ(freed[0].original, 300'000);
  EXPECT_EQ(freed[0].holders, (std::vector<Holder>{{1000, 11, 1011}})) << "the last holder";
  EXPECT_EQ(book.pending().size(), 1u);
  book.restored(0, Setting::kPowerLimit);
  EXPECT_TRUE(book.empty());
}

TEST(ZeusdLeases, AReleasedLeaseStaysPendingUntilItsRestoreReadsBack) {
  LeaseBook book;
  book.acquire(user(1000, 10), 0, Setting::kPowerLimit, 300'000);
  ASSERT_EQ(book.release(Holder{1000, 10, 1010}).size(), 1u);
  ASSERT_EQ(book.pending().size(), 1u) << "a failed restore must not lose the lease";
  EXPECT_TRUE(book.holders().empty()) << "a pending lease's holder ended: nothing to watch";
  EXPECT_TRUE(book.release(Holder{1000, 10, 1010}).empty()) << "released once only";
  EXPECT_TRUE(book.conflict(user(1001, 20), 0)) << "another uid waits for the restore";
  const LeaseBook back = LeaseBook::from_json(book.to_json(), "test");
  EXPECT_EQ(back.pending().size(), 1u) << "pending survives a restart of the daemon";
  book.restored(0, Setting::kPowerLimit);
  EXPECT_TRUE(book.empty());
}

TEST(ZeusdLeases, ANewProcessOfTheUidTakesOverAPendingLeaseWithItsFirstOriginal) {
  LeaseBook book;
  book.acquire(user(1000, 10), 0, Setting::kPowerLimit, 300'000);
  book.release(Holder{1000, 10, 1010});
  EXPECT_TRUE(book.acquire(user(1000, 11), 0, Setting::kPowerLimit, 200'000));
  EXPECT_TRUE(book.pending().empty());
  ASSERT_EQ(book.leases().size(), 1u);
  EXPECT_EQ(book.leases()[0].original, 300'000);
  EXPECT_EQ(book.leases()[0].holders, (std::vector<Holder>{{1000, 11, 1011}}));
}

TEST(ZeusdLeases, RetriesBackOffFromHalfASecondToTenSeconds) {
  using std::chrono::milliseconds;
  EXPECT_EQ(device::restore_retry_delay(1), milliseconds(500));
  EXPECT_EQ(device::restore_retry_delay(2), milliseconds(1000));
  EXPECT_EQ(device::restore_retry_delay(5), milliseconds(8000));
  EXPECT_EQ(device::restore_retry_delay(6), milliseconds(10'000));
  EXPECT_EQ(device::restore_retry_delay(1000), milliseconds(10'000));
}

TEST(ZeusdLeases, APidReusedByAnotherProcessIsNotTheHolder) {
  LeaseBook book;
  book.acquire(user(1000, 10), 0, Setting::kPowerLimit, 300'000);
  EXPECT_TRUE(book.release(Holder{1000, 10, 999999}).empty());
  EXPECT_FALSE(book.empty());
}

TEST(ZeusdLeases, AnAdminChangeEndsTheLeaseWithoutRestore) {
  LeaseBook book;
  book.acquire(user(1000, 10), 0, Setting::kPowerLimit, 300'000);
  book.acquire(user(1000, 10), 0, Setting::kPersistenceMode, 0);
  EXPECT_EQ(book.end(0, Setting::kPowerLimit).size(), 1u);
  EXPECT_EQ(book.leases().size(), 1u);
  EXPECT_EQ(book.leases()[0].setting, Setting::kPersistenceMode);
  EXPECT_THROW(book.acquire(Actor{true, 0, std::nullopt, "root"}, 0, Setting::kPowerLimit, 1),
               InternalError);
}

TEST(ZeusdLeases, TheJournalRoundTripsAndRefusesWhatIsNotOne) {
  LeaseBook book;
  book.acquire(user(1000, 10), 2, Setting::kGpuLockedClocks, 0);
  book.acquire(user(1000, 11), 2, Setting::kGpuLockedClocks, 0);
  book.acquire(user(1001, 12), 3, Setting::kPowerLimit, 250'000);
  const LeaseBook back = LeaseBook::from_json(book.to_json(), "test");
  EXPECT_EQ(back.to_json(), book.to_json());
  EXPECT_EQ(back.holders().size(), 3u);

  auto bad_version = book.to_json();
  bad_version["version"] = 99;
  EXPECT_THROW(LeaseBook::from_json(bad_version, "j"), ConfigError);
  auto no_holders = book.to_json();
  no_holders["leases"][0]["holders"] = nlohmann::json::array();
  EXPECT_THROW(LeaseBook::from_json(no_holders, "j"), ConfigError);
  auto bad_setting = book.to_json();
  bad_setting["leases"][0]["setting"] = "fan_speed";
  EXPECT_THROW(LeaseBook::from_json(bad_setting, "j"), ConfigError);
  EXPECT_THROW(LeaseBook::from_json(nlohmann::json::array(), "j"), ConfigError);
}

TEST(HttpPeerLimits, APeerGetsItsCapAndOthersKeepTheirs) {
  http::PeerLimits limits(2);
  EXPECT_TRUE(limits.acquire("uid 1000"));
  EXPECT_TRUE(limits.acquire("uid 1000"));
  EXPECT_FALSE(limits.acquire("uid 1000")) << "its cap";
  EXPECT_EQ(limits.held("uid 1000"), 2u) << "a refusal takes nothing";
  EXPECT_TRUE(limits.acquire("uid 1001")) << "another peer is not affected";
  limits.release("uid 1000");
  EXPECT_TRUE(limits.acquire("uid 1000")) << "a slot given back is free again";
  EXPECT_EQ(http::default_per_peer(256), 64u);
  EXPECT_EQ(http::default_per_peer(2), 1u);
}

TEST(ZeusdOverrides, WordsSplitAsAShellSplitsThem) {
  EXPECT_EQ(split_words("nvidia-smi -i {gpu_id}  -pl {power_limit_w}"),
            (std::vector<std::string>{"nvidia-smi", "-i", "{gpu_id}", "-pl", "{power_limit_w}"}));
  EXPECT_EQ(split_words(R"(sh -c 'echo "a b" $x' "c\"d" e\ f)"),
            (std::vector<std::string>{"sh", "-c", "echo \"a b\" $x", "c\"d", "e f"}));
  EXPECT_THROW(split_words("echo 'open"), ConfigError);
  EXPECT_THROW(split_words("echo \"open"), ConfigError);
}

std::filesystem::path write_overrides(const test::TempDir& dir, const std::string& text,
                                      mode_t mode = 0644) {
  const auto path = dir / "overrides.toml";
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

TEST(ZeusdOverrides, AValidFileLoads) {
  test::TempDir dir;
  const auto o = load_command_overrides(write_overrides(dir, R"(
[set_power_limit]
commands = ["tool --gpu {gpu_id} --watts {power_limit_w}", "tool --check {gpu_id}"]
error_pattern = "(?i)failed"
timeout_s = 5

[reset_locked_clocks]
commands = ["tool --reset {gpu_id}"]
)"));
  ASSERT_EQ(o.size(), 2u);
  const CommandOverride& pl = o.at("set_power_limit");
  ASSERT_EQ(pl.commands.size(), 2u);
  EXPECT_EQ(pl.commands[0],
            (std::vector<std::string>{"tool", "--gpu", "{gpu_id}", "--watts", "{power_limit_w}"}));
  EXPECT_EQ(pl.timeout, std::chrono::seconds(5));
  EXPECT_EQ(pl.error_pattern, "(?i)failed");
  EXPECT_EQ(o.at("reset_locked_clocks").timeout, std::chrono::seconds(60));
}

TEST(ZeusdOverrides, WhatUpstreamRefusesIsRefusedNamingIt) {
  test::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[set_fan_speed]\ncommands = [\"x\"]\n", "unknown table [set_fan_speed]"},
      {"[set_power_limit]\ncommands = []\n", "non-empty"},
      {"[set_power_limit]\ncommands = [\"x {min_clock_mhz}\"]\n", "{min_clock_mhz}"},
      {"[set_power_limit]\ncommands = [\"x\"]\ntimeout_s = 0\n", "timeout_s"},
      {"[set_power_limit]\ncommands = [\"x\"]\nretries = 2\n", "unknown key 'retries'"},
      {"[set_power_limit]\ncommands = [\"x\"]\nerror_pattern = \"(\"\n", "regular expression"},
      {"[set_power_limit\n", "not TOML"},
  };
  for (const auto& [text, why] : bad) {
    try {
      load_command_overrides(write_overrides(dir, text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(why)) << text;
      EXPECT_THAT(e.what(), ::testing::HasSubstr("overrides.toml")) << text;
    }
  }
  EXPECT_THROW(
      load_command_overrides(write_overrides(dir, "[set_power_limit]\ncommands = [\"x\"]\n", 0666)),
      ConfigError)
      << "a file others may write";
}

// Note [GPU identity] (issue #52): a client finds its GPUs among the daemon's by UUID, then PCI
// address (upstream HEAD's zeusd), and sends an index only where the daemon knows neither
// (upstream's tagged zeusd) or the GPU has no identity a daemon could know (a simulated one).
TEST(ZeusdGpuIdentity, AClientFindsItsGpusAmongTheDaemonsByUuidThenPciAddress) {
  std::vector<test::FakeGpu> node(8);
  std::vector<device::zeusd::DaemonGpu> ours;
  std::vector<device::zeusd::DaemonGpu> head;
  std::vector<device::zeusd::DaemonGpu> tagged;
  for (int i = 0; i < 8; ++i) {
    node[static_cast<size_t>(i)].uuid = fmt::format("GPU-{}", i);
    const std::string pci = fmt::format("0000:{:02x}:00.0", i + 1);
    ours.push_back({i, "NVIDIA A40", fmt::format("GPU-{}", i), pci});
    head.push_back({i, "NVIDIA A40", "", pci});
    tagged.push_back({i, "NVIDIA A40", "", ""});
  }
  test::FakeNvml nvml(node);
  test::ScopedEnv view("FAKE_NVML_VISIBLE_UUIDS", "GPU-4,GPU-5");  // a pod's view
  const auto pod = device::open_gpu_set("nvml", {.zeusd_from_env = false});
  ASSERT_EQ(pod->count(), 2);
  for (int g = 0; g < 2; ++g) {
    EXPECT_EQ(pod->machine_index(g), g) << "the pod numbers its GPUs from 0";
    EXPECT_EQ(device::zeusd::daemon_gpu_id(*pod, g, ours, "zeusd"), 4 + g);
    EXPECT_EQ(device::zeusd::daemon_gpu_id(*pod, g, head, "zeusd"), 4 + g);
    EXPECT_EQ(device::zeusd::daemon_gpu_id(*pod, g, tagged, "zeusd"), g) << "upstream's rule";
  }
  const std::vector<device::zeusd::DaemonGpu> other_node(ours.begin(), ours.begin() + 4);
  try {
    device::zeusd::daemon_gpu_id(*pod, 0, other_node, "zeusd at /run/zeusd.sock");
    FAIL() << "a GPU the daemon does not have was given an id";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("GPU-4"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("zeusd at /run/zeusd.sock"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("3 GPU-3"));
  }
  const auto sim = device::open_gpu_set("sim:a40,a40", {.zeusd_from_env = false});
  EXPECT_EQ(device::zeusd::daemon_gpu_id(*sim, 1, ours, "zeusd"), 1) << "a simulated GPU";
}

}  // namespace
}  // namespace zeus::daemon
