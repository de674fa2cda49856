// The bodies of the fuzz targets, shared by the libFuzzer mains (clang, by hand) and by the
// regression test that replays fuzz/corpus/ in CI. Each must return normally for any input: a
// zeus::Error is the expected answer to bad input; anything else (another exception, a crash, a
// sanitizer report) is a bug.
#pragma once

#include <string_view>

namespace zeus::fuzz {

// The trace CSV parsers (power and train) and the lookups the simulator makes on what they parse.
void fuzz_trace_csv(std::string_view text);
// The power-profile JSON loader, a save/load round trip of what it accepts, and the batch-size
// history line parser.
void fuzz_profile_json(std::string_view text);

}  // namespace zeus::fuzz
