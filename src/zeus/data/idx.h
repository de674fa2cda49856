// Reading IDX files (the MNIST family's format: a big-endian magic with the element type and the
// rank, then one big-endian uint32 per dimension, then the elements in row-major order), plain or
// gzip-compressed (Debian ships them compressed), without libtorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace zeus::data {

// An unsigned-byte IDX array (type code 0x08, the only type the MNIST family uses).
struct IdxArray {
  std::vector<uint32_t> shape;
  std::vector<uint8_t> values;  // row-major, size == product of shape

  size_t size(size_t dim) const { return shape.at(dim); }
};

// Reads `path` (gzip or plain, detected by content). Throws ConfigError naming the path when it
// is missing, unreadable, truncated, not IDX, or of an element type other than unsigned byte.
IdxArray read_idx(const std::filesystem::path& path);

// Parses IDX bytes already in memory (decompressed). `origin` names them in errors.
IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& origin);

}  // namespace zeus::data
