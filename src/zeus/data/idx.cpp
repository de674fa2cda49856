#include "zeus/data/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "zeus/common/errors.h"

namespace zeus::data {
namespace {

// IDX files of the MNIST family are at most tens of MB; anything claiming more is corrupt.
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 32;
constexpr uint8_t kUnsignedByte = 0x08;

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::vector<uint8_t> read_maybe_gzip(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw ConfigError(
        fmt::format("IDX file {} does not exist or is not a regular file", path.string()));
  }
  // gzread reads plain files unchanged, so one path serves both.
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) {
    throw ConfigError(
        fmt::format("cannot open IDX file {}: {}", path.string(), std::strerror(errno)));
  }
  gzbuffer(file.get(), 1u << 17);
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> chunk(1u << 20);
  for (;;) {
    const int n = gzread(file.get(), chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int zerr = 0;
      const char* message = gzerror(file.get(), &zerr);
      throw ConfigError(fmt::format("IDX file {} is corrupt (gzip: {})", path.string(), message));
    }
    if (n == 0)
      break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
    if (bytes.size() > kMaxIdxBytes) {
      throw ConfigError(fmt::format("IDX file {} is larger than 4 GiB", path.string()));
    }
  }
  return bytes;
}

}  // namespace

IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& origin) {
  auto corrupt = [&](const std::string& why) {
    return ConfigError(fmt::format("{} is not a valid IDX file: {}", origin, why));
  };
  if (bytes.size() < 4)
    throw corrupt("shorter than its 4-byte magic");
  if (bytes[0] != 0 || bytes[1] != 0)
    throw corrupt("magic does not start with two zero bytes");
  if (bytes[2] != kUnsignedByte) {
    throw corrupt(
        fmt::format("element type 0x{:02x}; only unsigned byte (0x08) is supported", bytes[2]));
  }
  const size_t rank = bytes[3];
  if (rank == 0)
    throw corrupt("rank 0");
  const size_t header = 4 + 4 * rank;
  if (bytes.size() < header)
    throw corrupt("truncated header");
  IdxArray array;
  uint64_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    const uint32_t extent = big_endian_u32(&bytes[4 + 4 * d]);
    array.shape.push_back(extent);
    count *= extent;
    if (count > kMaxIdxBytes)
      throw corrupt("dimensions multiply to more than 4 GiB");
  }
  if (bytes.size() - header != count) {
    throw corrupt(
        fmt::format("header promises {} values, file holds {}", count, bytes.size() - header));
  }
  array.values.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

IdxArray read_idx(const std::filesystem::path& path) {
  return parse_idx(read_maybe_gzip(path), path.string());
}

}  // namespace zeus::data
