#include <gtest/gtest.h>

#include <regex>

#include "zeus/dist/libtorch_info.h"

namespace zeus::dist {
namespace {

TEST(Libtorch, LinksAndReportsItsVersion) {
  EXPECT_TRUE(std::regex_match(libtorch_version(), std::regex(R"(\d+\.\d+(\.\d+)?.*)")))
      << libtorch_version();
  EXPECT_GE(libtorch_num_threads(), 1);
}

}  // namespace
}  // namespace zeus::dist
