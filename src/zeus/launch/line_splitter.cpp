#include "zeus/launch/line_splitter.h"

namespace zeus::launch {

void LineSplitter::feed(std::string_view bytes, const Sink& sink) {
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    const size_t take = nl == std::string_view::npos ? bytes.size() : nl;
    const size_t room = max_line_bytes_ - pending_.size();
    if (take >= room) {
      // Over-long line: pass on a full piece.
      pending_.append(bytes.substr(0, room));
      sink(pending_);
      pending_.clear();
      bytes.remove_prefix(room);
      if (take == room && nl != std::string_view::npos) {
        bytes.remove_prefix(1);  // the newline ends exactly the piece just passed on
      }
      continue;
    }
    if (nl == std::string_view::npos) {
      pending_.append(bytes);
      return;
    }
    if (pending_.empty()) {
      sink(bytes.substr(0, nl));
    } else {
      pending_.append(bytes.substr(0, nl));
      sink(pending_);
      pending_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
}

void LineSplitter::finish(const Sink& sink) {
  if (!pending_.empty()) {
    sink(pending_);
    pending_.clear();
  }
}

}  // namespace zeus::launch
