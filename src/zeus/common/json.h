// Checked reads from parsed JSON: nlohmann's get<int64_t>() converts a float such as 1e49 with
// undefined behaviour (found by fuzzing), so integers are read through here.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "zeus/common/errors.h"

namespace zeus {

// The integer at `value`; ConfigError naming `what` when it is not an integer in range.
inline int64_t json_int(const nlohmann::json& value, std::string_view what) {
  if (value.is_number_integer() &&
      (value.is_number_unsigned()
           ? value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
           : true)) {
    return value.get<int64_t>();
  }
  throw ConfigError(fmt::format("{} is {}, expected an integer", what, value.dump()));
}

}  // namespace zeus
