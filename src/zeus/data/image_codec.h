// Decoding (and, for tests and tools, encoding) JPEG and PNG files with Debian's libjpeg-turbo
// and libpng. The C libraries' errors are caught at this boundary and become ConfigErrors
// naming the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace zeus::data {

// 8-bit RGB, rows top to bottom, pixels interleaved (HWC).
struct Rgb8Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3
};

// JPEG or PNG, told apart by their signatures; grey, palette and alpha images become RGB.
// Throws ConfigError naming `source` for anything else or a corrupt file.
Rgb8Image decode_image(std::span<const uint8_t> bytes, std::string_view source);
Rgb8Image read_image(const std::filesystem::path& path);

// Throw IoError/ConfigError naming the path.
void write_png(const std::filesystem::path& path, const Rgb8Image& image);
void write_jpeg(const std::filesystem::path& path, const Rgb8Image& image, int quality = 90);

}  // namespace zeus::data
