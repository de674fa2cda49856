// torchrun's command line under `zeus run` (and `zeus tune`): the `--` separator, and every
// torchrun flag zeus run accepts doing what torchrun does with it, or refused with what is
// supported. Through the real binary, and resolve() in process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/launch/launch_options.h"

namespace zeus::launch {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

test::ProcessResult zeus(const std::vector<std::string>& args) {
  std::vector<std::string> argv{ZEUS_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::run_process(argv);
}

TEST(ZeusRunCommandLine, DoubleDashSeparatesTheProgram) {
  const auto r = zeus({"run", "--nproc-per-node", "2", "-t", "0", "--", "/bin/sh", "-c",
                       "echo rank=$RANK args=$0", "--"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[0] rank=0 args=--"));
  EXPECT_THAT(r.out, HasSubstr("[1] rank=1 args=--"));
  // After the program, a `--` is the program's own argument.
  const auto own = zeus({"run", "/bin/echo", "a", "--", "b"});
  ASSERT_EQ(own.exit_code, 0) << own.err;
  EXPECT_THAT(own.out, HasSubstr("[0] a -- b"));
  const auto nothing = zeus({"run", "--nproc-per-node", "2", "--"});
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_THAT(nothing.err, HasSubstr("no program given"));
}

TEST(ZeusRunCommandLine, TuneTakesItsCommandAfterDoubleDash) {
  test::TempDir dir;
  // /bin/true writes no train result: the tuner stops at its first try, naming the command's
  // missing output, which shows the command after `--` (placeholders filled) was the one run.
  const auto r = zeus({"tune", "--batch-sizes", "8,16", "--default-batch-size", "8",
                       "--recurrences", "1", "--log-dir", (dir / "t").string(), "--", "/bin/sh",
                       "-c", "echo bs={bs} > " + (dir / "seen").string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("wrote 0 train results"));
  EXPECT_EQ(read_file(dir / "seen"), "bs=8\n");
}

TEST(ZeusRunCommandLine, TorchrunFlagsDoWhatTorchrunDoes) {
  // --role names the workers' role; --start-method is accepted (every worker is its own program);
  // --local-ranks-filter keeps other ranks off the console; --monitor-interval is accepted.
  const auto r = zeus({"run", "--nproc_per_node", "3", "--role", "trainer", "--start_method",
                       "fork", "--local_ranks_filter", "0,2", "--monitor_interval", "0.5", "--",
                       "/bin/sh", "-c", "echo role=$ROLE_NAME local=$LOCAL_RANK"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[0] role=trainer local=0"));
  EXPECT_THAT(r.out, HasSubstr("[2] role=trainer local=2"));
  EXPECT_THAT(r.out, Not(HasSubstr("[1]")));
  // --rdzv-backend c10d --rdzv-endpoint localhost:0 on one node: a free port, as torchrun.
  const auto c10d = zeus({"run", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0",
                          "--nnodes", "1:1", "--", "/bin/sh", "-c", "echo port=$MASTER_PORT"});
  ASSERT_EQ(c10d.exit_code, 0) << c10d.err;
  EXPECT_THAT(c10d.out, HasSubstr("[0] port="));
  EXPECT_THAT(c10d.out, Not(HasSubstr("port=0\n")));
}

TEST(ZeusRunCommandLine, UnsupportedTorchrunFlagsAreRefusedWithWhatIsSupported) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--nnodes", "1:4"}, "elastic membership: add --rdzv-backend c10d --rdzv-endpoint"},
      {{"--nnodes", "3:2"}, "1 <= MIN <= MAX"},
      {{"--rdzv-backend", "zookeeper"}, "use static (each node gives --node-rank"},
      {{"--rdzv-backend", "etcd"}, "needs --rdzv-endpoint HOST:PORT[,HOST:PORT...]"},
      {{"--rdzv-backend", "etcd", "--rdzv-endpoint", "127.0.0.1:99999"}, "port in 1..65535"},
      {{"--rdzv-backend", "c10d", "--nnodes", "1:2", "--rdzv-endpoint", "a:1,b:2"},
       "only --rdzv-backend etcd takes a list"},
      {{"--rdzv-backend", "c10d", "--nnodes", "1:2", "--rdzv-endpoint", "127.0.0.1:1",
        "--rdzv-conf", "cacert=/x.pem"},
       "cacert is an etcd key"},
      {{"--rdzv-backend", "etcd", "--rdzv-endpoint", "127.0.0.1:2379", "--rdzv-conf", "user=root"},
       "needs password_file=PATH"},
      {{"--rdzv-backend", "etcd", "--rdzv-endpoint", "127.0.0.1:2379", "--rdzv-conf",
        "protocol=https,cert=/c.pem"},
       "cert and key go together"},
      {{"--rdzv-backend", "etcd", "--rdzv-endpoint", "127.0.0.1:2379", "--rdzv-conf",
        "token_file=/nonexistent/token"},
       "rendezvous token file /nonexistent/token: cannot be read"},
      {{"--rdzv-backend", "c10d", "--nnodes", "2"}, "needs --rdzv-endpoint HOST[:PORT]"},
      {{"--rdzv-backend", "c10d", "--nnodes", "1:2", "--rdzv-endpoint", "127.0.0.1:1",
        "--node-rank", "0"},
       "the rendezvous numbers the nodes"},
      {{"--rdzv-backend", "c10d", "--nnodes", "1:2", "--rdzv-endpoint", "127.0.0.1:1",
        "--rdzv-conf", "timeout=3"},
       "join_timeout, last_call_timeout and read_timeout"},
      {{"--rdzv-conf", "join_timeout=60"}, "this run is static: drop it"},
      {{"--local-addr", "10.0.0.2"}, "--local-addr 10.0.0.2"},
      {{"--run-path"}, "give the script itself"},
      {{"--start-method", "thread"}, "use spawn, fork or forkserver"},
      {{"--local-ranks-filter", "x"}, "is not a local rank"},
      {{"--monitor-interval", "-1"}, "must be > 0"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> args{"run"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "/bin/echo", "started"});
    const auto r = zeus(args);
    EXPECT_EQ(r.exit_code, 2) << flags.front() << ": " << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(message)) << flags.front();
    EXPECT_THAT(r.out, Not(HasSubstr("started"))) << flags.front() << ": nothing runs";
  }
}

TEST(ZeusRunCommandLine, ParseNnodes) {
  EXPECT_EQ(parse_nnodes("3").min, 3);
  EXPECT_EQ(parse_nnodes("3").max, 3);
  EXPECT_EQ(parse_nnodes("2:2").min, 2);
  EXPECT_EQ(parse_nnodes("1:4").min, 1);
  EXPECT_EQ(parse_nnodes("1:4").max, 4);
  EXPECT_THROW(parse_nnodes("0"), ConfigError);
  EXPECT_THROW(parse_nnodes("3:2"), ConfigError);
  EXPECT_THROW(parse_nnodes("a:b"), ConfigError);
  EXPECT_THROW(parse_nnodes("two"), ConfigError);
}

}  // namespace
}  // namespace zeus::launch
