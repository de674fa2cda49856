// Query parameters as Zeus 0.16's routes read them (serde structs with deny_unknown_fields):
// every parameter named by the route and none other, each at most once, u32 as plain decimal
// digits, bools as `true`/`false`, id lists as comma lists (trimmed, sorted, deduplicated).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/http/server.h"

namespace zeus::daemon {

// A parameter that is unknown, repeated, missing or not of its type: upstream answers 400 with
// a plain-text body (actix's query extractor), and so does zeusd.
class QueryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An id list that does not parse: 400 with {"error": message}.
class IdListError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Query {
 public:
  // Throws QueryError for a parameter not in `allowed`, or one given twice.
  Query(const http::Request& request, std::initializer_list<std::string_view> allowed);

  std::optional<std::string> get(std::string_view name) const;
  uint32_t required_u32(std::string_view name) const;
  bool required_bool(std::string_view name) const;
  std::optional<bool> optional_bool(std::string_view name) const;
  // The ids in `name`, or std::nullopt when absent. `noun` is "GPU" or "CPU" for the message.
  std::optional<std::vector<int>> ids(std::string_view name, std::string_view noun) const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
};

}  // namespace zeus::daemon
