// Splits a worker's output stream into whole lines, so that the launcher writes each line
// (prefixed with its rank) in one piece and lines of different workers never interleave.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace zeus::launch {

class LineSplitter {
 public:
  using Sink = std::function<void(std::string_view line)>;  // without the '\n'

  // A line longer than max_line_bytes is passed on in pieces of that size (a process writing
  // megabytes without a newline must not grow the launcher without bound).
  explicit LineSplitter(size_t max_line_bytes = 64 * 1024) : max_line_bytes_(max_line_bytes) {}

  void feed(std::string_view bytes, const Sink& sink);
  // Passes on the unterminated last line, if any (at end of stream).
  void finish(const Sink& sink);

 private:
  size_t max_line_bytes_;
  std::string pending_;
};

}  // namespace zeus::launch
