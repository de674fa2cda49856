#include "zeus/data/fashion_mnist.h"

#include <ATen/ops/from_blob.h>

#include <string>

#include "zeus/common/errors.h"
#include "zeus/data/idx.h"

namespace zeus::data {
namespace {

std::filesystem::path find_file(const std::filesystem::path& dir, const std::string& stem) {
  for (const char* suffix : {".gz", ""}) {
    std::filesystem::path candidate = dir / (stem + suffix);
    std::error_code ec;
    if (std::filesystem::exists(candidate, ec))
      return candidate;
  }
  throw ConfigError(fmt::format(
      "Fashion-MNIST file {} (or {}.gz) not found in {}; install the Debian package "
      "dataset-fashion-mnist (files in {}) or pass the directory that holds the IDX files",
      stem, stem, dir.string(), kFashionMnistDir));
}

}  // namespace

ImageDataset load_fashion_mnist(Split split, const FashionMnistOptions& options) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const auto images_path = find_file(options.dir, prefix + "-images-idx3-ubyte");
  const auto labels_path = find_file(options.dir, prefix + "-labels-idx1-ubyte");
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  if (images.shape.size() != 3) {
    throw ConfigError(fmt::format("{} holds a rank-{} array; images need rank 3 (N, rows, cols)",
                                  images_path.string(), images.shape.size()));
  }
  if (labels.shape.size() != 1 || labels.size(0) != images.size(0)) {
    throw ConfigError(fmt::format("{} holds {} labels for the {} images of {}",
                                  labels_path.string(), labels.shape.empty() ? 0 : labels.size(0),
                                  images.size(0), images_path.string()));
  }
  const auto n = static_cast<int64_t>(images.size(0));
  const auto rows = static_cast<int64_t>(images.size(1));
  const auto cols = static_cast<int64_t>(images.size(2));
  ImageDataset dataset;
  // from_blob borrows; the conversions copy, so the IdxArrays may go.
  dataset.images =
      at::from_blob(images.values.data(), {n, 1, rows, cols}, at::kByte).to(at::kFloat).div_(255.0);
  if (options.normalize)
    dataset.images.sub_(kFashionMnistMean).div_(kFashionMnistStd);
  dataset.labels = at::from_blob(labels.values.data(), {n}, at::kByte).to(at::kLong);
  for (uint8_t label : labels.values) {
    if (label > 9) {
      throw ConfigError(fmt::format("{} holds label {}; Fashion-MNIST has classes 0-9",
                                    labels_path.string(), static_cast<int>(label)));
    }
  }
  return dataset;
}

}  // namespace zeus::data
