// An ImageNet-layout directory as a zeus::DataLoader dataset: DIR/<class>/<image>.{jpg,jpeg,png},
// classes sorted by name (label = index), images decoded with libjpeg-turbo / libpng on the
// loader's threads, with torchvision's training augmentation (random resized crop, horizontal
// flip) or its evaluation transform (resize, center crop), then normalized.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "zeus/data/data_loader.h"

namespace zeus::data {

struct ImageFolderOptions {
  int image_size = 64;  // output side (pixels)
  bool train = true;    // true: random resized crop + flip; false: resize + center crop
  uint64_t seed = 0;    // augmentation randomness (with the sample index and a draw counter)
  // torchvision's random resized crop: area fraction and aspect-ratio ranges.
  std::pair<double, double> scale{0.08, 1.0};
  std::pair<double, double> ratio{3.0 / 4.0, 4.0 / 3.0};
  // Per-channel normalization (ImageNet's by default).
  std::array<double, 3> mean{0.485, 0.456, 0.406};
  std::array<double, 3> std{0.229, 0.224, 0.225};
};

// Contract: get_batch() is thread-safe (num_workers > 0 decodes in parallel). Batches are
// data float32 [B, 3, S, S] and target int64 [B].
class ImageFolderDataset final : public BatchDataset {
 public:
  // Throws ConfigError naming the directory when it is missing, has no class folders, or a
  // class folder holds no JPEG/PNG file.
  ImageFolderDataset(std::filesystem::path dir, ImageFolderOptions options);

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  // A corrupt image throws ConfigError naming its path.
  Batch get_batch(std::span<const int64_t> indices) override;

  const std::vector<std::string>& classes() const { return classes_; }
  const std::vector<std::pair<std::filesystem::path, int64_t>>& samples() const { return samples_; }

 private:
  std::filesystem::path dir_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::filesystem::path, int64_t>> samples_;
  std::atomic<uint64_t> draws_{0};
};

}  // namespace zeus::data
