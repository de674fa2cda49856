// Fashion-MNIST (and MNIST: same file names and format) as tensors, read directly from the IDX
// files, gzip-compressed as Debian's dataset-fashion-mnist ships them or plain.
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>

namespace zeus::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// Per-pixel statistics of the Fashion-MNIST training set, for normalization.
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;

enum class Split { kTrain, kTest };

// A whole split in memory: images float32 [N, 1, 28, 28], labels int64 [N].
struct ImageDataset {
  at::Tensor images;
  at::Tensor labels;
  int64_t size() const { return labels.size(0); }
};

struct FashionMnistOptions {
  std::filesystem::path dir = kFashionMnistDir;
  // Pixels become (x / 255 - mean) / std; false leaves x / 255.
  bool normalize = true;
};

// Loads `{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]` from options.dir. Throws
// ConfigError naming the path (and the Debian package) when files are missing or corrupt, or
// when images and labels disagree.
ImageDataset load_fashion_mnist(Split split, const FashionMnistOptions& options = {});

}  // namespace zeus::data
