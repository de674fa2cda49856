// Test helper: one worker under `zeus run`. argv[1] names the behaviour:
//   env                 print the launcher's variables, --local_rank and the remaining arguments
//                       as key=value
//   fail RANK CODE      RANK exits CODE after 300 ms; the others leave a grandchild in their
//                       process group, print pgid=, and wait to be stopped
//   sigkill RANK        RANK kills itself with SIGKILL after 300 ms; the others wait
//   trap                print ready; on SIGTERM print "rank R got SIGTERM" and exit 0
//   restart             print restart_count=N; exit 1 while N < 2, then 0
//   sleep               print pid=, then wait (for the launcher-killed test)
//   elastic FILE        print "elastic rank=R world=W restart=N nodes=G master=A:P", then wait
//                       until FILE exists and exit 0 (an elastic run's workers)
//   spam LINES BYTES    print LINES lines of BYTES characters each, "RANK:i:xxx...", at once
//   whoami              print what cluster::detect_env() makes of the environment (rank, world,
//                       local, node, master and its source, port), or error=... (exit 2)
//   limits LOCATOR MW   rank 1 lowers GPU 0 to MW through a PowerLimitGuard journaling to
//                       $ZEUS_LOG_DIR/power-limits.journal, prints limited, then SIGKILLs itself
//   elastic-limit FILE LOCATOR MW
//                       lowers GPU 0 to MW as `limits` does (every rank), prints limited, then
//                       as `elastic`; the guard restores on return and on SIGTERM
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "zeus/cluster/env.h"
#include "zeus/common/errors.h"
#include "zeus/contract/run_files.h"
#include "zeus/device/discovery.h"
#include "zeus/device/power_limit_guard.h"
#include "zeus/device/power_limit_journal.h"
#include "zeus/process/child.h"

namespace {

int g_rank = 0;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : -1;
}

[[noreturn]] void wait_forever() {
  while (true)
    ::pause();
}

// "elastic rank=R world=W restart=N nodes=G master=A:P", then waits until `file` exists.
int elastic(const char* file) {
  const auto var = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr ? v : "?");
  };
  std::printf("elastic rank=%s world=%s restart=%s nodes=%s master=%s:%s\n", var("RANK").c_str(),
              var("WORLD_SIZE").c_str(), var("TORCHELASTIC_RESTART_COUNT").c_str(),
              var("GROUP_WORLD_SIZE").c_str(), var("MASTER_ADDR").c_str(),
              var("MASTER_PORT").c_str());
  std::fflush(stdout);
  while (!std::filesystem::exists(file)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

std::filesystem::path journal_path() {
  const char* dir = std::getenv("ZEUS_LOG_DIR");
  return std::filesystem::path(dir != nullptr ? dir : ".") / zeus::contract::kJournalName;
}

void on_sigterm(int) {
  char line[64];
  const int n = std::snprintf(line, sizeof(line), "rank %d got SIGTERM\n", g_rank);
  ::write(STDOUT_FILENO, line, static_cast<size_t>(n));
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODE [ARGS]\n", argv[0]);
    return 2;
  }
  // torch.distributed.launch style: --local_rank=N comes right after the program.
  std::string local_rank_arg = "<none>";
  if (std::strncmp(argv[1], "--local_rank=", 13) == 0) {
    local_rank_arg = argv[1] + 13;
    ++argv;
    --argc;
  }
  const std::string mode = argv[1];
  g_rank = env_int("RANK");
  if (mode == "whoami") {
    try {
      const zeus::cluster::Env env = zeus::cluster::detect_env();
      std::printf("rank=%d world=%d local=%d local_world=%d node=%d master=%s port=%d from=%s\n",
                  env.rank, env.world_size, env.local_rank, env.local_world_size, env.node_rank,
                  env.master_addr.c_str(), env.master_port, env.master_source.c_str());
      return 0;
    } catch (const zeus::Error& e) {
      std::printf("error=%s\n", e.what());
      return 2;
    }
  }
  if (mode == "env") {
    for (const char* name :
         {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
          "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS", "TORCHELASTIC_RUN_ID",
          "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "ZEUS_RESTART_COUNT",
          "CUDA_VISIBLE_DEVICES"}) {
      const char* v = std::getenv(name);
      std::printf("%s=%s\n", name, v != nullptr ? v : "<unset>");
    }
    std::string args;
    for (int i = 2; i < argc; ++i)
      args += std::string(i > 2 ? " " : "") + argv[i];
    std::printf("ARGS=%s\nLOCAL_RANK_ARG=%s\n", args.c_str(), local_rank_arg.c_str());
    return 0;
  }
  if (mode == "fail" && argc == 4) {
    if (g_rank == std::atoi(argv[2])) {
      ::usleep(300'000);
      std::printf("failing on purpose\n");
      return std::atoi(argv[3]);
    }
    // A grandchild in the worker's process group, left running on purpose.
    zeus::process::Child::fork_function({.own_group = false, .what = "a grandchild"}, [] {
      wait_forever();
      return 0;
    }).detach();
    std::printf("pgid=%d\n", static_cast<int>(::getpgrp()));
    std::fflush(stdout);
    wait_forever();
  }
  if (mode == "sigkill" && argc == 3) {
    if (g_rank == std::atoi(argv[2])) {
      ::usleep(300'000);
      ::raise(SIGKILL);
    }
    wait_forever();
  }
  if (mode == "trap") {
    ::signal(SIGTERM, on_sigterm);
    std::printf("ready\n");
    std::fflush(stdout);
    wait_forever();
  }
  if (mode == "restart") {
    const int count = env_int("ZEUS_RESTART_COUNT");
    std::printf("restart_count=%d\n", count);
    std::fflush(stdout);
    if (count < 2) {
      ::usleep(200'000);  // let every rank print before the first failure stops the others
      return 1;
    }
    return 0;
  }
  if (mode == "elastic" && argc == 3) {
    return elastic(argv[2]);
  }
  if (mode == "elastic-limit" && argc == 5) {
    try {
      auto gpus = zeus::device::open_gpu_set(argv[3], {});
      zeus::device::PowerLimitGuard guard(*gpus, {.journal_path = journal_path()});
      guard.set_power_limit_mw(0, std::atoll(argv[4]));
      std::printf("limited\n");
      return elastic(argv[2]);
    } catch (const zeus::Error& e) {
      std::fprintf(stderr, "launch_worker: %s\n", e.what());
      return 1;
    }
  }
  if (mode == "sleep") {
    std::printf("pid=%d\n", static_cast<int>(::getpid()));
    std::fflush(stdout);
    wait_forever();
  }
  if (mode == "spam" && argc == 4) {
    const int lines = std::atoi(argv[2]);
    const std::string body(static_cast<size_t>(std::atoi(argv[3])), 'x');
    for (int i = 0; i < lines; ++i)
      std::printf("%d:%d:%s\n", g_rank, i, body.c_str());
    return 0;
  }
  if (mode == "limits" && argc == 4) {
    if (g_rank != 1)
      wait_forever();
    try {
      auto gpus = zeus::device::open_gpu_set(argv[2], {});
      zeus::device::PowerLimitGuard guard(*gpus, {.journal_path = journal_path()});
      guard.set_power_limit_mw(0, std::atoll(argv[3]));
      std::printf("limited\n");
      std::fflush(stdout);
      ::raise(SIGKILL);
    } catch (const zeus::Error& e) {
      std::fprintf(stderr, "launch_worker: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "launch_worker: unknown mode or arguments: %s\n", mode.c_str());
  return 2;
}
