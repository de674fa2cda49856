#include "zeus/common/csv.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>

#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"

namespace zeus {

CsvTable CsvTable::read(const std::filesystem::path& path) {
  return parse(read_file(path), path.string());
}

CsvTable CsvTable::parse(std::string_view text, std::string_view source_name) {
  CsvTable table;
  table.source_ = source_name;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    if (line.empty()) {
      continue;
    }
    auto fields = split(line, ',');
    if (table.header_.empty()) {
      table.header_ = std::move(fields);
      continue;
    }
    if (fields.size() != table.header_.size()) {
      throw ConfigError(fmt::format("{}:{}: expected {} comma-separated fields, found {}",
                                    source_name, line_no, table.header_.size(), fields.size()));
    }
    table.rows_.push_back(std::move(fields));
    table.line_numbers_.push_back(line_no);
  }
  if (table.header_.empty()) {
    throw ConfigError(fmt::format("{}: empty file, expected a CSV header line", source_name));
  }
  return table;
}

size_t CsvTable::column(std::string_view name) const {
  for (size_t i = 0; i < header_.size(); ++i) {
    if (header_[i] == name) {
      return i;
    }
  }
  throw ConfigError(
      fmt::format("{}: no column '{}' (columns: {})", source_, name, fmt::join(header_, ", ")));
}

double CsvTable::as_double(size_t row, size_t col) const {
  const std::string& s = rows_.at(row).at(col);
  const auto v = parse_number<double>(s);
  if (!v || !std::isfinite(*v)) {
    throw ConfigError(fmt::format("{}:{}: column '{}' holds '{}', expected a number", source_,
                                  line_numbers_[row], header_[col], s));
  }
  return *v;
}

int64_t CsvTable::as_int(size_t row, size_t col) const {
  const std::string& s = rows_.at(row).at(col);
  const auto v = parse_number<int64_t>(s);
  if (!v) {
    throw ConfigError(fmt::format("{}:{}: column '{}' holds '{}', expected an integer", source_,
                                  line_numbers_[row], header_[col], s));
  }
  return *v;
}

}  // namespace zeus
