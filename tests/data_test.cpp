// zeus::data: the IDX reader (plain and gzip) and the Fashion-MNIST loader, on generated files
// and, when Debian's dataset-fashion-mnist is installed, on the real ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>

#include "support/test_support.h"
#include "zeus/common/errors.h"
#include "zeus/data/fashion_mnist.h"
#include "zeus/data/idx.h"

namespace zeus::data {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& shape, const std::vector<uint8_t>& v) {
  std::vector<uint8_t> out{0, 0, 0x08, static_cast<uint8_t>(shape.size())};
  for (uint32_t d : shape) {
    for (int shift = 24; shift >= 0; shift -= 8)
      out.push_back(static_cast<uint8_t>(d >> shift));
  }
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

void write_file(const std::filesystem::path& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    parse_idx(bytes, "t.idx");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Idx, ParsesShapeAndValues) {
  const IdxArray a = parse_idx(idx_bytes({2, 3}, {1, 2, 3, 4, 5, 6}), "t.idx");
  EXPECT_EQ(a.shape, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(a.values, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
}

TEST(Idx, CorruptInputIsAConfigErrorNamingTheFileAndTheProblem) {
  EXPECT_THAT(error_of({0, 0}), HasSubstr("t.idx is not a valid IDX file: shorter"));
  EXPECT_THAT(error_of({1, 0, 8, 1, 0, 0, 0, 0}), HasSubstr("magic"));
  EXPECT_THAT(error_of({0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0}), HasSubstr("element type 0x0d"));
  EXPECT_THAT(error_of({0, 0, 8, 2, 0, 0, 0}), HasSubstr("truncated header"));
  EXPECT_THAT(error_of(idx_bytes({2, 3}, {1, 2, 3})), HasSubstr("promises 6 values, file holds 3"));
  EXPECT_THAT(error_of(idx_bytes({0xFFFFFFFF, 0xFFFFFFFF}, {})), HasSubstr("more than 4 GiB"));
}

TEST(Idx, ReadsGzipAndPlainFiles) {
  test::TempDir dir;
  const auto bytes = idx_bytes({4}, {9, 8, 7, 6});
  write_file(dir.path() / "a.gz", bytes, true);
  write_file(dir.path() / "a", bytes, false);
  EXPECT_EQ(read_idx(dir.path() / "a.gz").values, (std::vector<uint8_t>{9, 8, 7, 6}));
  EXPECT_EQ(read_idx(dir.path() / "a").values, (std::vector<uint8_t>{9, 8, 7, 6}));
  try {
    read_idx(dir.path() / "missing.gz");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir.path() / "missing.gz").string()));
  }
  // A gzip stream cut short is reported, not read as a shorter file.
  std::string gz;
  {
    std::ifstream in(dir.path() / "a.gz", std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(dir.path() / "cut.gz", std::ios::binary).write(gz.data(), 15);
  EXPECT_THROW(read_idx(dir.path() / "cut.gz"), ConfigError);
}

// Three 28x28 images (all pixels = label * 25) in the Debian layout.
void write_tiny_dataset(const std::filesystem::path& dir, std::vector<uint8_t> labels) {
  std::vector<uint8_t> pixels;
  for (uint8_t l : labels)
    pixels.insert(pixels.end(), 28 * 28, static_cast<uint8_t>(l * 25));
  write_file(dir / "t10k-images-idx3-ubyte.gz",
             idx_bytes({static_cast<uint32_t>(labels.size()), 28, 28}, pixels), true);
  write_file(dir / "t10k-labels-idx1-ubyte.gz",
             idx_bytes({static_cast<uint32_t>(labels.size())}, labels), true);
}

TEST(FashionMnist, LoadsTensorsNormalized) {
  test::TempDir dir;
  write_tiny_dataset(dir.path(), {0, 4, 9});
  const ImageDataset raw =
      load_fashion_mnist(Split::kTest, {.dir = dir.path(), .normalize = false});
  EXPECT_EQ(raw.images.sizes(), (std::vector<int64_t>{3, 1, 28, 28}));
  EXPECT_EQ(raw.labels.scalar_type(), at::kLong);
  EXPECT_EQ(raw.labels[2].item<int64_t>(), 9);
  EXPECT_FLOAT_EQ(raw.images[1].max().item<float>(), 100.0f / 255.0f);
  const ImageDataset norm = load_fashion_mnist(Split::kTest, {.dir = dir.path()});
  EXPECT_NEAR(norm.images[0].max().item<float>(), -kFashionMnistMean / kFashionMnistStd, 1e-6);
}

TEST(FashionMnist, MissingOrInconsistentFilesAreClearErrors) {
  test::TempDir dir;
  try {
    load_fashion_mnist(Split::kTrain, {.dir = dir.path()});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("train-images-idx3-ubyte"));
    EXPECT_THAT(e.what(), HasSubstr("dataset-fashion-mnist"));
  }
  write_tiny_dataset(dir.path(), {0, 12});
  EXPECT_THROW(load_fashion_mnist(Split::kTest, {.dir = dir.path()}), ConfigError) << "label 12";
  write_file(dir.path() / "t10k-labels-idx1-ubyte.gz", idx_bytes({1}, {1}), true);
  try {
    load_fashion_mnist(Split::kTest, {.dir = dir.path()});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("1 labels for the 2 images"));
  }
}

TEST(FashionMnist, DebianFilesLoad) {
  if (!std::filesystem::exists(std::filesystem::path(kFashionMnistDir) /
                               "t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (apt install dataset-fashion-mnist)";
  }
  const ImageDataset test = load_fashion_mnist(Split::kTest, {.normalize = false});
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(test.labels.bincount().eq(1000).all().item<bool>(), true) << "1000 per class";
  EXPECT_NEAR(test.images.mean().item<double>(), kFashionMnistMean, 0.01);
}

}  // namespace
}  // namespace zeus::data
