// The worker bench/launcher/run.py starts under `zeus run` and torchrun. It records, as Unix
// time in a file $PROBE_DIR/<mode>.<rank>, the moment it reached its milestone:
//   join: after joining the Gloo process group (zeus::dist::init) and one all-reduce
//   fail: rank 1 records the time and exits 1 at once; the other ranks wait to be stopped
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "zeus/dist/context.h"

namespace {

void record(const std::string& mode, const char* rank) {
  const char* dir = std::getenv("PROBE_DIR");
  const std::string path = std::string(dir != nullptr ? dir : ".") + "/" + mode + "." + rank;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f != nullptr) {
    std::fprintf(f, "%.6f\n", now);
    std::fclose(f);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const char* rank = std::getenv("RANK");
  if (rank == nullptr) {
    std::fprintf(stderr, "probe: RANK is not set; start me with zeus run or torchrun\n");
    return 2;
  }
  if (mode == "join") {
    try {
      // Joining Gloo, as the benchmark's torchrun side does, also on a GPU node.
      auto ctx = zeus::dist::init({.device = zeus::dist::DeviceType::kCpu});
      ctx->all_reduce_sum(1.0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "probe: %s\n", e.what());
      return 1;
    }
    record(mode, rank);
    return 0;
  }
  if (mode == "fail") {
    if (std::string(rank) == "1") {
      record(mode, rank);
      return 1;
    }
    while (true)
      ::pause();
  }
  std::fprintf(stderr, "usage: probe join|fail\n");
  return 2;
}
