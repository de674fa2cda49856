#include "zeus/data/image_codec.h"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
// clang-format on
#include <fmt/format.h>
#include <png.h>

#include <csetjmp>
#include <cstdlib>
#include <cstring>

#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"

namespace zeus::data {

namespace {

// libjpeg reports errors by calling error_exit, which must not return: it longjmps back to the
// function that called setjmp. Those functions hold no C++ objects with destructors between
// setjmp and the libjpeg calls, so the jump skips nothing.
struct JpegErrorManager {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void jpeg_quiet(j_common_ptr /*cinfo*/, int /*level*/) {}

// Returns malloc'ed RGB pixels, or null with `message` set.
uint8_t* decode_jpeg_c(const uint8_t* data, size_t size, int* width, int* height, char* message) {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  uint8_t* volatile out = nullptr;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_quiet;
  if (setjmp(err.jump) != 0) {
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", err.message);
    jpeg_destroy_decompress(&cinfo);
    std::free(out);
    return nullptr;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  const size_t stride = static_cast<size_t>(cinfo.output_width) * 3;
  out = static_cast<uint8_t*>(std::malloc(stride * cinfo.output_height));
  if (out == nullptr) {
    std::snprintf(message, JMSG_LENGTH_MAX, "out of memory");
    jpeg_destroy_decompress(&cinfo);
    return nullptr;
  }
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out + stride * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  *width = static_cast<int>(cinfo.output_width);
  *height = static_cast<int>(cinfo.output_height);
  jpeg_destroy_decompress(&cinfo);
  return out;
}

// Returns false with `message` set.
bool encode_jpeg_c(std::FILE* file, const uint8_t* pixels, int width, int height, int quality,
                   char* message) {
  jpeg_compress_struct cinfo;
  JpegErrorManager err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  if (setjmp(err.jump) != 0) {
    std::snprintf(message, JMSG_LENGTH_MAX, "%s", err.message);
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, file);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const size_t stride = static_cast<size_t>(width) * 3;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels + stride * cinfo.next_scanline);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

void check_size(const Rgb8Image& image, const std::filesystem::path& path) {
  if (image.width < 1 || image.height < 1 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height * 3) {
    throw ConfigError(fmt::format("{}: image of {}x{} with {} bytes of pixels is not RGB8",
                                  path.string(), image.width, image.height, image.pixels.size()));
  }
}

}  // namespace

Rgb8Image decode_image(std::span<const uint8_t> bytes, std::string_view source) {
  static constexpr uint8_t kPng[] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  Rgb8Image image;
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) {
    char message[JMSG_LENGTH_MAX] = {};
    int width = 0;
    int height = 0;
    uint8_t* pixels = decode_jpeg_c(bytes.data(), bytes.size(), &width, &height, message);
    if (pixels == nullptr) {
      throw ConfigError(fmt::format("{}: corrupt JPEG: {}", source, message));
    }
    image.width = width;
    image.height = height;
    image.pixels.assign(pixels, pixels + static_cast<size_t>(width) * height * 3);
    std::free(pixels);
    return image;
  }
  if (bytes.size() >= sizeof(kPng) && std::memcmp(bytes.data(), kPng, sizeof(kPng)) == 0) {
    png_image png{};
    png.version = PNG_IMAGE_VERSION;
    if (png_image_begin_read_from_memory(&png, bytes.data(), bytes.size()) == 0) {
      throw ConfigError(fmt::format("{}: corrupt PNG: {}", source, png.message));
    }
    png.format = PNG_FORMAT_RGB;
    image.width = static_cast<int>(png.width);
    image.height = static_cast<int>(png.height);
    image.pixels.resize(PNG_IMAGE_SIZE(png));
    if (png_image_finish_read(&png, nullptr, image.pixels.data(), 0, nullptr) == 0) {
      const std::string message = png.message;
      png_image_free(&png);
      throw ConfigError(fmt::format("{}: corrupt PNG: {}", source, message));
    }
    return image;
  }
  throw ConfigError(fmt::format("{}: not a JPEG or PNG file ({} bytes)", source, bytes.size()));
}

Rgb8Image read_image(const std::filesystem::path& path) {
  const std::string bytes = read_file(path);
  return decode_image(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                      path.string());
}

void write_png(const std::filesystem::path& path, const Rgb8Image& image) {
  check_size(image, path);
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = PNG_FORMAT_RGB;
  if (png_image_write_to_file(&png, path.c_str(), 0, image.pixels.data(), 0, nullptr) == 0) {
    throw IoError(fmt::format("writing PNG {}: {}", path.string(), png.message));
  }
}

void write_jpeg(const std::filesystem::path& path, const Rgb8Image& image, int quality) {
  check_size(image, path);
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    throw IoError(fmt::format("writing JPEG {}: cannot open the file", path.string()));
  }
  char message[JMSG_LENGTH_MAX] = {};
  const bool ok =
      encode_jpeg_c(file, image.pixels.data(), image.width, image.height, quality, message);
  const bool closed = std::fclose(file) == 0;
  if (!ok || !closed) {
    throw IoError(fmt::format("writing JPEG {}: {}", path.string(), ok ? "close failed" : message));
  }
}

}  // namespace zeus::data
