// Elastic `zeus run` over the c10d rendezvous with a token, with real processes: a stranger's
// join, a launcher with another token and a replayed valid message are refused while the
// workers run on, and the serving launcher logs each refusal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "support/line_peer.h"
#include "support/test_support.h"
#include "zeus/launch/c10d/channel.h"

namespace zeus {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

using Raw = test::LinePeer;

fs::path secret_file(const test::TempDir& dir, const std::string& name, const std::string& text) {
  const fs::path path = dir.path() / name;
  std::ofstream(path) << text << "\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

TEST(ElasticC10dToken, StrangersWrongTokensAndReplaysAreRefusedAndNoWorkerRestarts) {
  test::TempDir dir;
  const std::string finish = (dir.path() / "finish").string();
  const fs::path token = secret_file(dir, "token", "s3cret");
  const fs::path other = secret_file(dir, "other", "not-the-secret");
  const int port = test::free_port();
  const auto node = [&](const fs::path& token_file) {
    return std::vector<std::string>{ZEUS_CLI_PATH,
                                    "run",
                                    "--nnodes",
                                    "2:2",
                                    "--nproc-per-node",
                                    "2",
                                    "--rdzv-backend",
                                    "c10d",
                                    "--rdzv-endpoint",
                                    "127.0.0.1:" + std::to_string(port),
                                    "--rdzv-id",
                                    "tokened",
                                    "--local-addr",
                                    "127.0.0.1",
                                    "--rdzv-conf",
                                    "last_call_timeout=1,token_file=" + token_file.string(),
                                    ZEUS_LAUNCH_WORKER_PATH,
                                    "elastic",
                                    finish};
  };
  test::Child a(node(token), {}, test::Child::Stderr::kMerged);
  std::this_thread::sleep_for(300ms);
  test::Child b(node(token), {}, test::Child::Stderr::kMerged);
  ASSERT_TRUE(a.wait_for_output("world=4 restart=0 nodes=2", 60s)) << a.output();
  ASSERT_TRUE(b.wait_for_output("world=4 restart=0 nodes=2", 60s)) << b.output();
  {  // the attack of the issue: a join line with the run id and a host of its choosing
    Raw raw(port);
    raw.send(R"({"v":2,"op":"hello","run_id":"tokened","nonce":"x","auth":false})"
             "\n"
             R"({"v":2,"op":"join","host":"10.66.66.66","nproc":2})"
             "\n");
    EXPECT_THAT(raw.line(), HasSubstr("requires a token"));
  }
  // A launcher with another token is refused, saying so.
  const auto wrong = test::run_process(node(other), 60s);
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_THAT(wrong.err, HasSubstr("token differs")) << wrong.err;
  {  // a valid join, recorded, then replayed on a connection of its own
    Raw first(port);
    launch::c10d::Channel channel(launch::c10d::Channel::Side::kClient, "s3cret");
    first.send(channel.seal(launch::c10d::Hello{"tokened", {}, false}) + "\n");
    channel.open(first.line());
    const std::string join = channel.seal(launch::c10d::Join{"10.66.66.66", 2}) + "\n";
    first.send(join);  // the round is full: this node waits for a later one
    Raw replay(port);
    replay.send(R"({"v":2,"op":"hello","run_id":"tokened","nonce":"x","auth":true})"
                "\n");
    EXPECT_THAT(replay.line(), HasSubstr("welcome"));
    replay.send(join);
    EXPECT_THAT(replay.line(), HasSubstr("recorded on another connection"));
  }
  std::this_thread::sleep_for(1s);
  EXPECT_THAT(a.output() + b.output(), Not(HasSubstr("restart=1"))) << "no worker restarted";
  EXPECT_THAT(a.output() + b.output(), Not(HasSubstr("10.66.66.66:")))
      << "no stranger became the master";
  std::ofstream(finish) << "done\n";
  const auto ra = a.wait();
  const auto rb = b.wait();
  EXPECT_EQ(ra.exit_code, 0) << ra.out;
  EXPECT_EQ(rb.exit_code, 0) << rb.out;
  EXPECT_THAT(ra.out, HasSubstr("refused 127.0.0.1:")) << "the serving launcher logs refusals";
}

}  // namespace
}  // namespace zeus
