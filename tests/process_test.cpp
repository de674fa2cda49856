// The process-supervision library (src/zeus/process): starting a child from a spec, an exec
// failure as an error, grace then SIGKILL, parent-death signal, reaping by pid only, watching a
// process that is not a child; and that nothing else in src/, apps/ or python/ext starts, waits
// for or pidfd-opens processes itself.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/process/child.h"
#include "zeus/process/watch.h"

namespace zeus::process {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) {
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

struct Pipe {
  UniqueFd read, write;
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read = UniqueFd(fds[0]);
    write = UniqueFd(fds[1]);
  }
};

// Runs `script` under /bin/sh with stdout on a pipe; returns the child and the pipe.
Child shell(const std::string& script, Pipe& out, ChildSpec spec = {}) {
  spec.argv = {"/bin/sh", "-c", script};
  spec.stdout_fd = ChildFd::from(out.write.get());
  if (spec.what.empty()) {
    spec.what = "a test shell";
  }
  Child child = Child::start(spec);
  out.write.reset();
  return child;
}

TEST(Process, AChildGetsItsArgumentsEnvironmentAndDescriptors) {
  Pipe out;
  Child child = shell("echo \"$1 $ZEUS_PROCESS_TEST\"; echo err >&2", out,
                      {.env_overrides = {{"ZEUS_PROCESS_TEST", "from the spec"}},
                       .stderr_fd = ChildFd::dev_null()});
  const ExitStatus status = child.wait();
  EXPECT_TRUE(status.ok()) << status.describe();
  EXPECT_EQ(read_all(out.read.get()), " from the spec\n");
}

TEST(Process, AProgramThatCannotBeExecutedIsAnErrorFromStartNamingIt) {
  try {
    (void)Child::start({.argv = {"/nonexistent/zeus-program"}, .what = "rank 3"});
    FAIL() << "started a program that does not exist";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot execute '/nonexistent/zeus-program' (rank 3)"));
    EXPECT_THAT(e.what(), HasSubstr("No such file"));
  }
  try {
    (void)Child::start({.argv = {"zeus-no-such-command"}, .search_path = true, .what = "tune"});
    FAIL() << "found a command that is not in PATH";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'zeus-no-such-command' (tune): not found in PATH"));
  }
}

TEST(Process, ExitCodesAndSignalsAreReported) {
  Pipe out;
  EXPECT_EQ(shell("exit 3", out).wait().exit_code, 3);
  Pipe out2;
  const ExitStatus killed = shell("kill -9 $$", out2).wait();
  EXPECT_EQ(killed.signal, SIGKILL);
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL);
  EXPECT_EQ(killed.describe(), "was killed by signal 9 (SIGKILL)");
}

TEST(Process, StopGivesTheGracePeriodThenKillsTheWholeGroup) {
  Pipe out;
  // Ignores SIGTERM, and leaves a grandchild in its group.
  Child child = shell("trap '' TERM; sleep 60 & echo $!; echo ready; wait", out);
  std::string text;
  char buf[256];
  while (text.find("ready") == std::string::npos) {
    const ssize_t n = ::read(out.read.get(), buf, sizeof(buf));
    ASSERT_GT(n, 0);
    text.append(buf, static_cast<size_t>(n));
  }
  const int grandchild = std::stoi(text);
  const auto t0 = std::chrono::steady_clock::now();
  const ExitStatus status = child.stop(300ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(status.signal, SIGKILL) << "SIGTERM was ignored, so SIGKILL ended it";
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 10s);
  EXPECT_TRUE(test::eventually([&] { return !process_alive(grandchild); }, 10s))
      << "the grandchild in its group is gone too";
}

TEST(Process, StopReturnsAsSoonAsTheChildEnds) {
  Pipe out;
  Child child = shell("sleep 60", out);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(child.stop(30s).signal, SIGTERM);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

TEST(Process, AChildIsKilledAndReapedWhenItsOwnerGoes) {
  pid_t pid = -1;
  {
    Pipe out;
    Child child = shell("sleep 60", out);
    pid = child.pid();
    EXPECT_TRUE(child.running());
  }
  // Reaped: no zombie of ours is left under that pid.
  siginfo_t info{};
  EXPECT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(Process, ReapingOneChildLeavesTheOthersToTheirOwners) {
  Pipe a_out, b_out;
  Child a = shell("sleep 0.3; exit 4", a_out);
  Child b = shell("exit 5", b_out);
  // b exits first; waiting for a (waitpid(-1) would return b) must not take b's status.
  EXPECT_EQ(a.wait().exit_code, 4);
  EXPECT_EQ(b.wait().exit_code, 5);
}

TEST(Process, TheParentDeathSignalReachesAChildWhoseParentDied) {
  // A middle process starts a child with SIGTERM as its parent-death signal, then dies.
  Pipe out;
  Child middle = Child::fork_function({.stdout_fd = ChildFd::from(out.write.get())}, [] {
    Child grandchild = Child::start({.argv = {"/bin/sleep", "60"},
                                     .parent_death_signal = SIGTERM,
                                     .stdout_fd = ChildFd::dev_null(),
                                     .what = "the grandchild"});
    std::printf("%d\n", grandchild.pid());
    std::fflush(stdout);
    grandchild.detach();
    ::_exit(0);  // the middle dies without stopping it
    return 0;
  });
  out.write.reset();
  const std::string text = read_all(out.read.get());
  EXPECT_EQ(middle.wait().exit_code, 0);
  const int grandchild = std::stoi(text);
  EXPECT_TRUE(test::eventually([&] { return !process_alive(grandchild); }, 10s))
      << "pid " << grandchild << " outlived its parent";
}

TEST(Process, AWatchSeesAProcessThatIsNotAChildEnd) {
  // A process that is not our child: a grandchild, started by a middle process that exits.
  Pipe out;
  Child middle = Child::fork_function({.stdout_fd = ChildFd::from(out.write.get())}, [] {
    Child sleeper = Child::start(
        {.argv = {"/bin/sleep", "1"}, .stdout_fd = ChildFd::dev_null(), .what = "the sleeper"});
    std::printf("%d\n", sleeper.pid());
    std::fflush(stdout);
    sleeper.detach();
    ::_exit(0);
    return 0;
  });
  out.write.reset();
  const int pid = std::stoi(read_all(out.read.get()));
  middle.wait();
  ProcessWatch watch(pid);
  EXPECT_TRUE(watch.alive());
  EXPECT_FALSE(watch.wait_for(10ms));
  EXPECT_TRUE(watch.wait_for(20s));
  EXPECT_FALSE(watch.alive());
  EXPECT_THROW(ProcessWatch(pid + 4'000'000), ConfigError) << "no such process";
}

// Note [process supervision]: only src/zeus/process calls these in src/, apps/ and python/ext.
TEST(Process, NothingElseStartsOrReapsProcesses) {
  // A call, not a member of that name (x.clone(), work->wait()); with or without "::".
  static const std::regex kCall(
      R"((^|[^.>\w])(::)?(fork|vfork|clone|clone3|execl|execle|execlp|execv|execve|execvp|)"
      R"(execvpe|fexecve|posix_spawn|posix_spawnp|waitpid|waitid|wait3|wait4|pidfd_open|)"
      R"(system|popen)\s*\()");
  static const std::regex kWait(R"((^|[^.>\w])(::)?wait\s*\(\s*(nullptr|NULL|&|0\s*\)))");
  const std::filesystem::path root = ZEUS_SOURCE_DIR;
  std::vector<std::string> offenders;
  size_t scanned = 0;
  for (const char* top : {"src", "apps", "python/ext"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / top)) {
      const auto ext = entry.path().extension();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".cu")) {
        continue;
      }
      const auto rel = std::filesystem::relative(entry.path(), root).string();
      if (rel.starts_with("src/zeus/process/")) {
        continue;
      }
      ++scanned;
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        const auto comment = line.find("//");
        const std::string code = line.substr(0, comment);
        if (std::regex_search(code, kCall) || std::regex_search(code, kWait)) {
          offenders.push_back(rel + ":" + std::to_string(n) + ": " + line);
        }
      }
    }
  }
  EXPECT_GT(scanned, 100u) << "the scan found the sources under " << root;
  EXPECT_THAT(offenders, ::testing::IsEmpty());
}

}  // namespace
}  // namespace zeus::process
