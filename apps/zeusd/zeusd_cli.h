// The `zeusd` command line (`zeusd serve`, `zeusd token issue`), with Zeus 0.16's flags and
// defaults plus zeus-cpp's own (--state-dir, --require-gpu-process, --check, the bounds).
#pragma once

#include <iosfwd>

namespace zeus::zeusd {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Runs the command; `serve` returns when SIGTERM or SIGINT arrives (leases stay in the journal).
int run_zeusd(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace zeus::zeusd
