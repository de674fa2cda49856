// A reader for the simple comma-separated files this project consumes (the Zeus traces): a
// header line, no quoting, every row with the header's column count.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace zeus {

class CsvTable {
 public:
  // Reads and validates `path`. Throws IoError when missing, ConfigError naming path:line when
  // a row has the wrong number of fields.
  static CsvTable read(const std::filesystem::path& path);
  static CsvTable parse(std::string_view text, std::string_view source_name);

  // Index of the named column; throws ConfigError listing the columns when absent.
  size_t column(std::string_view name) const;
  const std::vector<std::string>& header() const { return header_; }
  const std::vector<std::vector<std::string>>& rows() const { return rows_; }
  const std::string& source() const { return source_; }

  // Typed field access; throws ConfigError naming source, line and column on a bad value.
  double as_double(size_t row, size_t col) const;
  int64_t as_int(size_t row, size_t col) const;

 private:
  std::string source_;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> line_numbers_;
};

}  // namespace zeus
