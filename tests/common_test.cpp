#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/sinks/sink.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <thread>

#include "support/test_support.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/build_info.h"
#include "zeus/common/csv.h"
#include "zeus/common/directories.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/mac.h"
#include "zeus/common/malloc_tuning.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"
#include "zeus/common/random.h"
#include "zeus/common/signal_pipe.h"
#include "zeus/common/units.h"
#include "zeus/config.h"
#include "zeus/process/child.h"

using namespace std::chrono_literals;
using ::testing::HasSubstr;

namespace zeus {
namespace {

// Every environment read goes through common/env.h (one registry, one place that logs what was
// read): no other source file of the library, the CLI or the Python extension calls getenv.
TEST(EnvRegistry, NoSourceOutsideEnvCppReadsTheEnvironmentItself) {
  const std::filesystem::path root =
      std::filesystem::path(ZEUS_SOURCE_TRACE_DIR).parent_path().parent_path();
  const std::regex raw_read(R"((std::)?(secure_)?getenv\s*\()");
  int files = 0;
  for (const char* dir : {"src", "apps", "python/ext"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / dir)) {
      const auto ext = entry.path().extension();
      if ((ext != ".cpp" && ext != ".h") || entry.path().filename() == "env.cpp") {
        continue;
      }
      std::ifstream in(entry.path());
      const std::string text((std::istreambuf_iterator<char>(in)), {});
      EXPECT_FALSE(std::regex_search(text, raw_read))
          << entry.path() << " reads the environment; declare an EnvVar in common/env.h";
      ++files;
    }
  }
  EXPECT_GT(files, 100);
  // And the registry knows the variables it is read with.
  bool found = false;
  for (const auto& v : all_env_vars()) {
    found = found || v.name == kEnvCudaVisibleDevices.name;
  }
  EXPECT_TRUE(found);
}

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(parse_duration("100ms", "--interval"), 100ms);
  EXPECT_EQ(parse_duration("1.5s", "--interval"), 1500ms);
  EXPECT_EQ(parse_duration("2m", "--interval"), 120s);
  EXPECT_EQ(parse_duration("1h", "--interval"), 3600s);
  EXPECT_EQ(parse_duration("250us", "--interval"), 250us);
  EXPECT_EQ(parse_duration("7ns", "--interval"), 7ns);
  EXPECT_EQ(parse_duration("0", "--duration"), 0ns);
}

TEST(ParseDuration, RejectsWithFlagAndValueInMessage) {
  for (const char* bad : {"", "10", "ms", "1x", "-5s", "1.2.3s", "nan s", "1e30h"}) {
    try {
      parse_duration(bad, "--interval");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr("--interval"));
      EXPECT_THAT(e.what(), HasSubstr(std::string("'") + bad + "'"));
    }
  }
}

TEST(FormatDuration, RoundTripsCommonValues) {
  EXPECT_EQ(format_duration(100ms), "100ms");
  EXPECT_EQ(format_duration(3s), "3s");
  EXPECT_EQ(format_duration(1500ms), "1.5s");
  EXPECT_EQ(format_duration(5ms), "5ms");
  EXPECT_EQ(format_duration(0ns), "0s");
  EXPECT_EQ(format_duration(250us), "250us");
}

TEST(FormatUtcNs, MatchesZeusPowerLogFormat) {
  const std::chrono::system_clock::time_point t{std::chrono::seconds(1'700'000'000) + 123456789ns};
  EXPECT_EQ(format_utc_ns(t), "2023-11-14 22:13:20.123456789");
  EXPECT_EQ(format_utc_ns(std::chrono::system_clock::time_point{}),
            "1970-01-01 00:00:00.000000000");
}

TEST(ParseUtcNs, InvertsFormatUtcNsAndRejectsGarbage) {
  EXPECT_EQ(parse_utc_ns("2023-11-14 22:13:20.123456789"), 1'700'000'000'123'456'789LL);
  EXPECT_EQ(parse_utc_ns("2023-11-14 22:13:20.5"), 1'700'000'000'500'000'000LL);
  EXPECT_EQ(parse_utc_ns("1970-01-01 00:00:00"), 0);
  EXPECT_FALSE(parse_utc_ns("2023-11-14T22:13:20"));
  EXPECT_FALSE(parse_utc_ns("2023-13-14 22:13:20"));
  EXPECT_FALSE(parse_utc_ns("2023-11-14 22:13:20."));
  EXPECT_FALSE(parse_utc_ns("2023-11-14 22:13:20.1234567890"));
  EXPECT_FALSE(parse_utc_ns(""));
}

TEST(AtomicFile, WritesReplacesAndLeavesNoTemporary) {
  test::TempDir dir;
  const auto path = dir / "sub/result.json";
  write_file_atomic(path, "first");
  EXPECT_EQ(read_file(path), "first");
  write_file_atomic(path, "second");
  EXPECT_EQ(read_file(path), "second");
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(path.parent_path())) {
    ++files;
  }
  EXPECT_EQ(files, 1) << "temporary file left behind";
}

// make_directory: every level of a new path, an existing directory accepted, and a path that
// cannot be a directory refused naming the part in the way, the role and the absolute path.
TEST(MakeDirectory, MakesEveryLevelAndNamesWhatIsInTheWay) {
  test::TempDir dir;
  make_directory(dir / "a/b/c", "log directory");
  EXPECT_TRUE(std::filesystem::is_directory(dir / "a/b/c"));
  make_directory(dir / "a/b/c", "log directory");  // already there: fine
  std::ofstream(dir / "a/file") << "x";
  for (const auto& bad : {dir / "a/file", dir / "a/file/deeper/still"}) {
    try {
      make_directory(bad, "job's log directory");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const IoError& e) {
      EXPECT_THAT(e.what(), HasSubstr("'" + (dir / "a/file").string() + "' is a file"));
      EXPECT_THAT(e.what(), HasSubstr("job's log directory"));
      EXPECT_THAT(e.what(), HasSubstr(bad.string()));
    }
  }
  EXPECT_EQ(directory_of("name.json"), std::filesystem::path("."));
  EXPECT_EQ(directory_of("a/name.json"), std::filesystem::path("a"));
}

// Not writable: only an unprivileged user meets it (root writes anywhere but on a read-only file
// system); its message names the directory and the uid.
TEST(MakeDirectory, ADirectoryThisUserCannotWriteIsNamedWithTheUid) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "root may write any directory: the check needs an unprivileged user";
  }
  test::TempDir dir;
  std::filesystem::create_directories(dir / "locked");
  std::filesystem::permissions(
      dir / "locked", std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  try {
    make_directory(dir / "locked/new", "log directory");
    ADD_FAILURE() << "a directory under a read-only one was made";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'" + (dir / "locked").string() + "' is not writable"));
    EXPECT_THAT(e.what(), HasSubstr("uid " + std::to_string(::geteuid())));
  }
  std::filesystem::permissions(dir / "locked", std::filesystem::perms::owner_all);
}

TEST(AtomicFile, FailureKeepsOldContentAndNamesPath) {
  test::TempDir dir;
  const auto path = dir / "result.json";
  write_file_atomic(path, "old");
  // A directory where the file should go cannot be replaced by rename().
  const auto blocked = dir / "blocked";
  std::filesystem::create_directories(blocked / "inner");
  EXPECT_THROW(
      {
        try {
          write_file_atomic(blocked, "new");
        } catch (const IoError& e) {
          EXPECT_THAT(e.what(), HasSubstr(blocked.string()));
          throw;
        }
      },
      IoError);
  EXPECT_EQ(read_file(path), "old");
  EXPECT_TRUE(std::filesystem::is_directory(blocked / "inner"));
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_FALSE(e.path().filename().string().starts_with(".blocked.tmp."))
        << e.path() << ": the failed write's temporary was left";
  }
}

// A writer SIGKILLed before its rename leaves `.NAME.tmp.XXXXXX`, locked while it lived: the next
// write of NAME removes it once its writer is gone, and no other file (a living writer's, another
// target's, a name not of that form).
TEST(AtomicFile, TheNextWriteRemovesTemporariesWhoseWritersAreGone) {
  test::TempDir dir;
  const auto path = dir / "result.json";
  for (const char* name : {".result.json.tmp.dead01", ".other.json.tmp.dead02",
                           ".result.json.tmp.toolong", ".result.json.tmp.live01"}) {
    std::ofstream(dir / name) << "half";
  }
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const std::string live = (dir / ".result.json.tmp.live01").string();
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    const int fd = ::open(live.c_str(), O_RDWR);
    const bool locked = fd >= 0 && ::flock(fd, LOCK_EX) == 0;
    (void)!::write(ready[1], locked ? "y" : "n", 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char answer = 0;
  ASSERT_EQ(::read(ready[0], &answer, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(answer, 'y');
  write_file_atomic(path, "whole");
  EXPECT_EQ(read_file(path), "whole");
  EXPECT_FALSE(std::filesystem::exists(dir / ".result.json.tmp.dead01"));
  EXPECT_TRUE(std::filesystem::exists(live)) << "a living writer's temporary was removed";
  EXPECT_TRUE(std::filesystem::exists(dir / ".other.json.tmp.dead02"));
  EXPECT_TRUE(std::filesystem::exists(dir / ".result.json.tmp.toolong"));
  ::kill(writer, SIGKILL);
  ASSERT_EQ(::waitpid(writer, nullptr, 0), writer);
  write_file_atomic(path, "again");
  EXPECT_FALSE(std::filesystem::exists(live)) << "a killed writer's temporary was kept";
  EXPECT_EQ(read_file(path), "again");
}

// write() may write less than asked, or nothing, when a signal arrives: a timer interrupts
// a large write to a pipe that is read slowly, again and again; every byte still arrives once.
TEST(WriteAll, ContinuesAfterShortWritesAndEintr) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  struct sigaction action {};
  action.sa_handler = [](int) {};
  action.sa_flags = 0;  // no SA_RESTART: the write returns short or with EINTR
  struct sigaction previous {};
  ASSERT_EQ(::sigaction(SIGALRM, &action, &previous), 0);
  itimerval every_ms{{0, 1000}, {0, 1000}};
  ASSERT_EQ(::setitimer(ITIMER_REAL, &every_ms, nullptr), 0);
  std::string data(4 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<char>('a' + i % 26);
  }
  std::string got;
  std::thread reader([&] {
    char chunk[4096];
    for (ssize_t n; (n = ::read(read_end.get(), chunk, sizeof chunk)) != 0;) {
      if (n > 0) {
        got.append(chunk, static_cast<size_t>(n));
      }
    }
  });
  write_all(write_end.get(), data, "writing", "the test pipe");
  write_end.reset();
  reader.join();
  itimerval off{};
  ::setitimer(ITIMER_REAL, &off, nullptr);
  ::sigaction(SIGALRM, &previous, nullptr);
  EXPECT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
  try {
    write_all(-1, "x", "writing", "nowhere");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("nowhere"));
  }
}

TEST(ReadFile, MissingFileIsIoErrorNamingPath) {
  try {
    read_file("/nonexistent/zeus/file");
    FAIL() << "no exception";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/zeus/file"));
    EXPECT_THAT(e.what(), HasSubstr("No such file"));
  }
}

TEST(Csv, ParsesAndTypesFields) {
  const auto table = CsvTable::parse("a,b\n1,2.5\r\n\n3,4\n", "mem.csv");
  ASSERT_EQ(table.rows().size(), 2u);
  EXPECT_EQ(table.column("b"), 1u);
  EXPECT_EQ(table.as_int(1, 0), 3);
  EXPECT_DOUBLE_EQ(table.as_double(0, 1), 2.5);
}

TEST(Csv, ErrorsNameSourceLineAndColumn) {
  try {
    CsvTable::parse("a,b\n1,2\n3\n", "x.csv");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("x.csv:3"));
  }
  const auto table = CsvTable::parse("a,b\n1,zz\n", "y.csv");
  try {
    table.as_double(0, 1);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("y.csv:2"));
    EXPECT_THAT(e.what(), HasSubstr("'b'"));
    EXPECT_THAT(e.what(), HasSubstr("zz"));
  }
  EXPECT_THROW(table.column("c"), ConfigError);
  EXPECT_THROW(CsvTable::parse("", "empty.csv"), ConfigError);
}

TEST(SignalPipe, DeliversSignalNumberAndRestoresPreviousAction) {
  struct sigaction before {};
  sigaction(SIGUSR1, nullptr, &before);
  {
    SignalPipe pipe({SIGUSR1});
    EXPECT_EQ(pipe.wait_for(10ms), 0);
    ::raise(SIGUSR1);
    EXPECT_EQ(pipe.wait_for(1s), SIGUSR1);
    {
      // A nested instance takes the signal over, then hands it back.
      SignalPipe inner({SIGUSR1});
      ::raise(SIGUSR1);
      EXPECT_EQ(inner.wait_for(1s), SIGUSR1);
      EXPECT_EQ(pipe.wait_for(10ms), 0);
    }
    ::raise(SIGUSR1);
    EXPECT_EQ(pipe.wait_for(1s), SIGUSR1);
  }
  struct sigaction after {};
  sigaction(SIGUSR1, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST(RankLogging, PrefixesRankAndWritesPerRankFiles) {
  test::TempDir dir;
  configure_rank_logging(
      {.rank = 3, .world_size = 8, .local_master = false, .file = dir / "rank{rank}.log"});
  EXPECT_EQ(logger().sinks()[0]->level(), spdlog::level::off) << "console only on local masters";
  logger().warn("hello from a worker");
  logger().flush();
  const std::string text = read_file(dir / "rank3.log");
  EXPECT_THAT(text, HasSubstr("[rank 3/8 "));
  EXPECT_THAT(text, HasSubstr("hello from a worker"));
  configure_rank_logging({.rank = 0, .world_size = 8, .local_master = true});
  EXPECT_NE(logger().sinks()[0]->level(), spdlog::level::off);
  EXPECT_EQ(logger().sinks().size(), 1u);
  write_file_atomic(dir / "blocker", "a file, not a directory");
  EXPECT_THROW(configure_rank_logging({.file = dir / "blocker" / "x.log"}), IoError);
}

TEST(Assert, ThrowsInternalErrorSayingItIsABug) {
  try {
    ZEUS_ASSERT_EQ(1 + 1, 3);
    FAIL();
  } catch (const InternalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("2 != 3"));
    EXPECT_THAT(e.what(), HasSubstr("bug"));
  }
}

}  // namespace
}  // namespace zeus

TEST(MallocTuning, AcceptedByGlibcUnlessTheUserSetTunables) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator replaces glibc's malloc and refuses mallopt()";
#endif
  {
    zeus::test::ScopedEnv unset("GLIBC_TUNABLES", std::nullopt);
    EXPECT_TRUE(zeus::tune_malloc_for_training());
  }
  zeus::test::ScopedEnv user("GLIBC_TUNABLES", "glibc.malloc.tcache_count=7");
  EXPECT_FALSE(zeus::tune_malloc_for_training());
}

TEST(Parse, WholeStringNumbersOnly) {
  EXPECT_EQ(zeus::parse_number<int>("42"), 42);
  EXPECT_EQ(zeus::parse_number<int>("-7"), -7);
  EXPECT_EQ(zeus::parse_number<double>("1.5"), 1.5);
  EXPECT_EQ(zeus::parse_number<int>(""), std::nullopt);
  EXPECT_EQ(zeus::parse_number<int>("4x"), std::nullopt);
  EXPECT_EQ(zeus::parse_number<int>(" 4"), std::nullopt);
  EXPECT_EQ(zeus::parse_number<int>("99999999999"), std::nullopt) << "out of range";
  EXPECT_EQ(zeus::parse_number<uint64_t>("-1"), std::nullopt);
}

TEST(Parse, SplitKeepsEmptyFields) {
  using V = std::vector<std::string>;
  EXPECT_EQ(zeus::split("a,b,,c", ','), (V{"a", "b", "", "c"}));
  EXPECT_EQ(zeus::split("", ','), (V{""}));
  EXPECT_EQ(zeus::split("v100:imagenet", ':'), (V{"v100", "imagenet"}));
}

namespace zeus {
namespace {

// RFC 4231's test case 2, and the compare's edges: the one HMAC every token scheme signs with.
TEST(Mac, HmacSha256MatchesTheRfcAndComparesInConstantTime) {
  EXPECT_EQ(hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hmac_sha256("Jefe", "what do ya want for nothing?").size(), 32u);
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secret", "secreT"));
  EXPECT_FALSE(constant_time_equal("secret", "secret2")) << "lengths differ";
  EXPECT_FALSE(constant_time_equal("", "")) << "an empty secret matches nothing";
}

}  // namespace
}  // namespace zeus

namespace zeus {
namespace {

#if defined(__GLIBCXX__)
// The fixed draws are libstdc++'s for a 64-bit engine, so the source build's numbers (README,
// bench/) stayed what they were when the standard distributions were replaced.
TEST(PortableRandom, UniformIndexDrawsWhatLibstdcxxDraws) {
  std::mt19937_64 ours(7);
  std::mt19937_64 theirs(7);
  for (uint64_t n : {1ULL, 2ULL, 3ULL, 7ULL, 10ULL, 1000ULL, (1ULL << 33) + 5, ~0ULL / 3}) {
    for (int i = 0; i < 2000; ++i) {
      std::uniform_int_distribution<uint64_t> d(0, n - 1);
      ASSERT_EQ(uniform_index(ours, n), d(theirs)) << "n " << n << " draw " << i;
    }
  }
}

TEST(PortableRandom, NormalDrawsWhatLibstdcxxDraws) {
  std::mt19937_64 ours(11);
  std::mt19937_64 theirs(11);
  for (int i = 0; i < 5000; ++i) {
    const double mean = i * 0.5;
    const double sd = 0.1 + i % 7;
    ASSERT_EQ(normal(ours, mean, sd), std::normal_distribution<double>(mean, sd)(theirs)) << i;
  }
}
#endif

TEST(PortableRandom, DrawsAreInRangeAndSpread) {
  std::mt19937_64 rng(3);
  std::vector<int> counts(5);
  for (int i = 0; i < 50000; ++i) {
    const uint64_t k = uniform_index(rng, 5);
    ASSERT_LT(k, 5U);
    ++counts[k];
  }
  for (const int c : counts) {
    EXPECT_NEAR(c, 10000, 500);
  }
  double sum = 0;
  double sum_sq = 0;
  for (int i = 0; i < 50000; ++i) {
    const double x = normal(rng, 2.0, 3.0);
    sum += x;
    sum_sq += x * x;
  }
  const double mean = sum / 50000;
  EXPECT_NEAR(mean, 2.0, 0.1);
  EXPECT_NEAR(std::sqrt(sum_sq / 50000 - mean * mean), 3.0, 0.1);
  std::vector<int> v{0, 1, 2, 3, 4, 5, 6, 7};
  shuffle(v.begin(), v.end(), rng);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_NE(v, sorted);
}

TEST(CloseFdRange, ClosesTheRangeOnlyWithOrWithoutTheSystemCall) {
  int fds[6];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::pipe(fds + 2), 0);
  ASSERT_EQ(::pipe(fds + 4), 0);
  std::sort(std::begin(fds), std::end(fds));
  close_fd_range(static_cast<unsigned>(fds[1]), static_cast<unsigned>(fds[4]));
  const auto open = [](int fd) { return ::fcntl(fd, F_GETFD) != -1; };
  EXPECT_TRUE(open(fds[0]));
  EXPECT_FALSE(open(fds[1]));
  EXPECT_FALSE(open(fds[4]));
  EXPECT_TRUE(open(fds[5]));
  ::close(fds[0]);
  ::close(fds[5]);
}

TEST(BuildInfo, VersionTextListsEveryFeatureOnce) {
  const std::string text = version_text("zeus");
  EXPECT_THAT(text, ::testing::StartsWith(fmt::format("zeus {}\nbuild: ", version())));
  for (const auto& f : features()) {
    const auto count = [&](const std::string& line_start) {
      const auto at = text.find(line_start);
      if (at == std::string::npos) {
        return false;
      }
      const std::string line = text.substr(at, text.find('\n', at) - at) + " ";
      return line.find(" " + std::string(f.name) + " ") != std::string::npos;
    };
    EXPECT_EQ(count("features:"), f.present) << f.name;
    EXPECT_EQ(count("left out:"), !f.present) << f.name;
  }
  const std::string line = left_out_message("kubelet", "--kubelet-socket /x");
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_THAT(line, ::testing::HasSubstr(is_wheel_build() ? "pip wheel" : "libgrpc++-dev"));
}

}  // namespace
}  // namespace zeus

namespace zeus::process {
namespace {

TEST(SignalName, NamesTheStandardSignalsAndNumbersTheRest) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(signal_name(SIGRTMIN + 2), fmt::format("signal {}", SIGRTMIN + 2));
}

}  // namespace
}  // namespace zeus::process
