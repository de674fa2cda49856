#include "zeus/common/errors.h"

namespace zeus::detail {

void throw_assert(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format(
      "internal error at {}:{}: `{}` failed: {}; this is a bug in zeus-cpp, please report it", file,
      line, expr, msg));
}

}  // namespace zeus::detail
