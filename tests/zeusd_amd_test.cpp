// zeusd over AMD GPUs (`--gpu-backend amdsmi`, upstream zeusd's flag), as root over the fake
// libamd_smi: upstream Zeus 0.16's own ZeusdClient, unchanged, as an unprivileged user sets a cap
// in mW (zeusd writes uW to the library); its process is SIGKILLed and the cap is back within 5 s.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "support/fake_amdsmi_machine.h"
#include "zeusd_support.h"

namespace zeus::test {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
using std::chrono::seconds;

TEST(ZeusdOnAmd, UpstreamZeusClientSetsACapThatComesBackWhenItDies) {
  ZEUSD_SKIP_UNLESS_ROOT();
  const fs::path python = fs::path(ZEUS_SOURCE_DIR) / ".venv-zeus016" / "bin" / "python";
  if (!fs::exists(python)) {
    GTEST_SKIP() << python << " is missing: run scripts/install-zeus016.sh (make test does)";
  }
  FakeAmdsmi amd(mi300xs(4), {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir, {"--gpu-backend", "amdsmi"});
  auto env = daemon.client_env();
  env["PYTHONDONTWRITEBYTECODE"] = "1";
  Child client(
      {ZEUS_AS_UID_PATH, std::to_string(kUserA), python.string(),
       std::string(ZEUS_SOURCE_DIR) + "/tests/zeusd_upstream/upstream_client.py", "2", "500000"},
      env);
  ASSERT_TRUE(client.wait_for_output("ready", seconds(60))) << client.wait().out;
  EXPECT_EQ(amd.cap_uw(2), 500'000'000u) << "500000 mW through the daemon is 500000000 uW";
  client.kill(SIGKILL);
  const ProcessResult r = client.wait();
  const auto seen = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
  EXPECT_EQ(seen["gpu_ids"], nlohmann::json::parse("[0,1,2,3]"));
  EXPECT_EQ(seen["names"][0], "AMD Instinct MI300X");
  EXPECT_TRUE(seen["can_control_gpu"].get<bool>());
  EXPECT_EQ(seen["limits"]["2"], 750'000);
  EXPECT_EQ(seen["constraints"]["2"], nlohmann::json::parse("[200000,750000]"));
  EXPECT_EQ(seen["after"], 500'000);
  EXPECT_THAT(seen["out_of_range"].get<std::string>(), HasSubstr("refused"));
  EXPECT_TRUE(eventually([&] { return amd.cap_uw(2) == 750'000'000u; }, seconds(5)))
      << "the client was killed: its cap is back within 5 s";
}

std::string set_cap(int gpu, int64_t mw) {
  return "/gpu/set_power_limit?gpu_ids=" + std::to_string(gpu) +
         "&block=true&power_limit_mw=" + std::to_string(mw);
}

// --require-gpu-process on AMD: the processes come from amdsmi_get_gpu_process_list (ids are AMD
// SMI's order, as the wire's): user A may cap only the GPU its training process runs on.
TEST(ZeusdOnAmd, RequireGpuProcessReadsAmdsProcessList) {
  ZEUSD_SKIP_UNLESS_ROOT();
  FakeAmdsmi amd(mi300xs(4), {.permissive = false});
  SharedDir dir;
  ZeusdProcess daemon(dir, {"--gpu-backend", "amdsmi", "--require-gpu-process"});
  auto training = client_as(kUserA, daemon, {"GET", "/time"}, true);
  amd.set_gpu_value(1, "processes", {training->pid()});
  auto user_a =
      client_as(kUserA, daemon, {"POST", set_cap(1, 500'000), "POST", set_cap(2, 500'000)}, false);
  EXPECT_THAT(user_a->wait().out, HasSubstr("status=200 body=\nstatus=403"));
  EXPECT_EQ(amd.cap_uw(2), 750'000'000u);
  EXPECT_TRUE(eventually([&] { return amd.cap_uw(1) == 750'000'000u; }, seconds(5)))
      << "user A's client ended: GPU 1's cap is back";
}

}  // namespace
}  // namespace zeus::test
