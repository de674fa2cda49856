#include "zeus/data/image_folder.h"

#include <ATen/Functions.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/data/image_codec.h"

namespace zeus::data {

namespace fs = std::filesystem;

namespace {

bool is_image(const fs::path& path) {
  const std::string ext = to_lower(path.extension().string());
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

struct Crop {
  int64_t top, left, height, width;
};

// torchvision's RandomResizedCrop parameters: 10 tries at a random area and aspect ratio, else
// the largest central crop within the ratio range.
Crop random_resized_crop(int64_t h, int64_t w, const ImageFolderOptions& o, std::mt19937_64& rng) {
  const double area = static_cast<double>(h * w);
  std::uniform_real_distribution<double> scale(o.scale.first, o.scale.second);
  std::uniform_real_distribution<double> log_ratio(std::log(o.ratio.first),
                                                   std::log(o.ratio.second));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * scale(rng);
    const double aspect = std::exp(log_ratio(rng));
    const auto cw = static_cast<int64_t>(std::lround(std::sqrt(target * aspect)));
    const auto ch = static_cast<int64_t>(std::lround(std::sqrt(target / aspect)));
    if (cw > 0 && ch > 0 && cw <= w && ch <= h) {
      std::uniform_int_distribution<int64_t> top(0, h - ch);
      std::uniform_int_distribution<int64_t> left(0, w - cw);
      return {top(rng), left(rng), ch, cw};
    }
  }
  const double in_ratio = static_cast<double>(w) / static_cast<double>(h);
  int64_t cw = w;
  int64_t ch = h;
  if (in_ratio < o.ratio.first) {
    ch = static_cast<int64_t>(std::lround(static_cast<double>(w) / o.ratio.first));
  } else if (in_ratio > o.ratio.second) {
    cw = static_cast<int64_t>(std::lround(static_cast<double>(h) * o.ratio.second));
  }
  return {(h - ch) / 2, (w - cw) / 2, ch, cw};
}

at::Tensor resize(const at::Tensor& chw, int64_t h, int64_t w) {
  return at::upsample_bilinear2d(chw.unsqueeze(0), {h, w}, /*align_corners=*/false).squeeze(0);
}

}  // namespace

ImageFolderDataset::ImageFolderDataset(fs::path dir, ImageFolderOptions options)
    : dir_(std::move(dir)), options_(options) {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) {
    throw ConfigError(fmt::format(
        "image folder '{}' does not exist or is not a directory; expected DIR/<class>/<image>",
        dir_.string()));
  }
  if (options_.image_size < 8) {
    throw ConfigError(fmt::format("image_size {} must be at least 8", options_.image_size));
  }
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.is_directory()) {
      classes_.push_back(e.path().filename().string());
    }
  }
  std::sort(classes_.begin(), classes_.end());
  if (classes_.empty()) {
    throw ConfigError(
        fmt::format("image folder '{}' has no class subfolders; expected DIR/<class>/<image>.jpg",
                    dir_.string()));
  }
  for (size_t label = 0; label < classes_.size(); ++label) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir_ / classes_[label])) {
      if (e.is_regular_file() && is_image(e.path())) {
        files.push_back(e.path());
      }
    }
    if (files.empty()) {
      throw ConfigError(fmt::format("class folder '{}' holds no .jpg, .jpeg or .png file",
                                    (dir_ / classes_[label]).string()));
    }
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      samples_.emplace_back(std::move(f), static_cast<int64_t>(label));
    }
  }
}

Batch ImageFolderDataset::get_batch(std::span<const int64_t> indices) {
  const int64_t s = options_.image_size;
  at::Tensor data = at::empty({static_cast<int64_t>(indices.size()), 3, s, s}, at::kFloat);
  at::Tensor target = at::empty({static_cast<int64_t>(indices.size())}, at::kLong);
  const at::Tensor mean =
      at::tensor({options_.mean[0], options_.mean[1], options_.mean[2]}, at::kFloat)
          .view({3, 1, 1});
  const at::Tensor stdev =
      at::tensor({options_.std[0], options_.std[1], options_.std[2]}, at::kFloat).view({3, 1, 1});
  for (size_t i = 0; i < indices.size(); ++i) {
    const int64_t index = indices[i];
    if (index < 0 || index >= size()) {
      throw ConfigError(fmt::format("image index {} is outside 0-{}", index, size() - 1));
    }
    const auto& [path, label] = samples_[static_cast<size_t>(index)];
    Rgb8Image image = read_image(path);
    at::Tensor chw = at::from_blob(image.pixels.data(), {image.height, image.width, 3}, at::kByte)
                         .permute({2, 0, 1})
                         .to(at::kFloat)
                         .div_(255.0);
    const int64_t h = image.height;
    const int64_t w = image.width;
    if (options_.train) {
      std::mt19937_64 rng(options_.seed * 0x9E3779B97F4A7C15ULL ^
                          draws_.fetch_add(1, std::memory_order_relaxed) * 0xBF58476D1CE4E5B9ULL ^
                          static_cast<uint64_t>(index));
      const Crop c = random_resized_crop(h, w, options_, rng);
      chw = resize(chw.narrow(1, c.top, c.height).narrow(2, c.left, c.width), s, s);
      if (std::bernoulli_distribution(0.5)(rng)) {
        chw = chw.flip({2});
      }
    } else {
      // Resize the shorter side to s * 8 / 7 (ImageNet's 256 for 224), then crop the center.
      const int64_t shorter = (s * 8 + 6) / 7;
      const int64_t rh = h <= w ? shorter : std::max<int64_t>(s, shorter * h / w);
      const int64_t rw = h <= w ? std::max<int64_t>(s, shorter * w / h) : shorter;
      chw = resize(chw, rh, rw).narrow(1, (rh - s) / 2, s).narrow(2, (rw - s) / 2, s);
    }
    data[static_cast<int64_t>(i)].copy_(chw.sub(mean).div_(stdev));
    target[static_cast<int64_t>(i)] = label;
  }
  return {data, target};
}

}  // namespace zeus::data
