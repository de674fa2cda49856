#include "zeus/daemon/query.h"

#include <fmt/format.h>

#include <algorithm>

#include "zeus/common/parse.h"

namespace zeus::daemon {

namespace {

std::optional<uint64_t> decimal(std::string_view s) {
  if (s.empty() || s.size() > 20 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return parse_number<uint64_t>(s);
}

}  // namespace

Query::Query(const http::Request& request, std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : request.query) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string expected;
      for (const auto a : allowed) {
        expected += fmt::format("{}`{}`", expected.empty() ? "" : ", ", a);
      }
      throw QueryError(
          fmt::format("Query deserialize error: unknown field `{}`, expected {}", key,
                      expected.empty() ? std::string("no parameters") : "one of " + expected));
    }
    if (get(key)) {
      throw QueryError(fmt::format("Query deserialize error: duplicate field `{}`", key));
    }
    params_.emplace_back(key, value);
  }
}

std::optional<std::string> Query::get(std::string_view name) const {
  for (const auto& [k, v] : params_) {
    if (k == name) {
      return v;
    }
  }
  return std::nullopt;
}

uint32_t Query::required_u32(std::string_view name) const {
  const auto v = get(name);
  if (!v) {
    throw QueryError(fmt::format("Query deserialize error: missing field `{}`", name));
  }
  const auto n = decimal(*v);
  if (!n || *n > UINT32_MAX) {
    throw QueryError(fmt::format(
        "Query deserialize error: invalid digit found in string (field `{}`: '{}' is not a "
        "number from 0 to 4294967295)",
        name, *v));
  }
  return static_cast<uint32_t>(*n);
}

std::optional<bool> Query::optional_bool(std::string_view name) const {
  const auto v = get(name);
  if (!v) {
    return std::nullopt;
  }
  if (*v == "true") {
    return true;
  }
  if (*v == "false") {
    return false;
  }
  throw QueryError(fmt::format(
      "Query deserialize error: provided string was not `true` or `false` (field `{}`)", name));
}

bool Query::required_bool(std::string_view name) const {
  const auto v = optional_bool(name);
  if (!v) {
    throw QueryError(fmt::format("Query deserialize error: missing field `{}`", name));
  }
  return *v;
}

std::optional<std::vector<int>> Query::ids(std::string_view name, std::string_view noun) const {
  const auto v = get(name);
  if (!v) {
    return std::nullopt;
  }
  std::vector<int> out;
  for (const auto& part : split(*v, ',')) {
    const std::string_view t = trim(part);
    const auto n = decimal(t);
    if (!n || *n > 1'000'000) {
      throw IdListError(fmt::format("Invalid {} index: {}", noun, t));
    }
    out.push_back(static_cast<int>(*n));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace zeus::daemon
