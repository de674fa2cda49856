// What this build of zeus-cpp is and which optional features it carries: `zeus --version` and
// `zeusd --version` print it, and a feature a build left out fails with one line from
// left_out_message() saying which build has it. The values are fixed at configure time
// (src/CMakeLists.txt passes them to build_info.cpp alone, so changing one rebuilds one file).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zeus {

struct Feature {
  std::string_view name;             // as `zeus --version` lists it: "kubelet", "postgresql", ...
  std::string_view debian_packages;  // what a source build needs for it
  bool present = false;
};

// The project's version: the repository's VERSION file, one place for the wheel, both programs
// and zeus_cpp.__version__.
std::string_view version();

// "pip wheel (manylinux_2_28 x86_64)" or "source build".
std::string_view build_kind();

bool is_wheel_build();

// Every optional feature, present or not, in a fixed order.
const std::vector<Feature>& features();

// The multi-line text after `<program> <version>` in --version: the build and its features.
std::string version_text(std::string_view program);

// One line for a feature this build left out: which build has it and what to do. `what` names
// what the user asked for (a flag, a URL scheme).
std::string left_out_message(std::string_view feature, std::string_view what);

}  // namespace zeus
