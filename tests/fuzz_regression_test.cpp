// Replays every input under fuzz/corpus/ (seeds and inputs that once crashed a fuzzer) through
// the fuzz targets' bodies, so a fixed crash stays fixed without clang or libFuzzer in CI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz_targets.h"

namespace zeus::fuzz {
namespace {

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void replay(const std::string& corpus, void (*target)(std::string_view)) {
  const std::filesystem::path dir = std::filesystem::path(ZEUS_FUZZ_CORPUS_DIR) / corpus;
  int inputs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_NO_THROW(target(slurp(entry.path()))) << entry.path();
    ++inputs;
  }
  EXPECT_GT(inputs, 0) << "empty corpus " << dir;
}

TEST(FuzzRegression, TraceCorpus) {
  replay("trace", fuzz_trace_csv);
}
TEST(FuzzRegression, ProfileCorpus) {
  replay("profile", fuzz_profile_json);
}

}  // namespace
}  // namespace zeus::fuzz
