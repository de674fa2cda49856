// zeus::data: the IDX reader (plain and gzip) and the Fashion-MNIST loader, on generated files
// and, when Debian's dataset-fashion-mnist is installed, on the real ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>

#include "support/test_support.h"
#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/data/fashion_mnist.h"
#include "zeus/data/idx.h"
#include "zeus/data/image_codec.h"
#include "zeus/data/image_folder.h"

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

// A w x h image of one colour with a diagonal gradient, so crops and flips change pixels.
Rgb8Image test_image(int w, int h, uint8_t r, uint8_t g, uint8_t b) {
  Rgb8Image img{w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &img.pixels[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>(r / 2 + x * 2);
      p[1] = static_cast<uint8_t>(g / 2 + y * 2);
      p[2] = b;
    }
  }
  return img;
}

TEST(ImageCodec, PngRoundTripsExactlyAndJpegClosely) {
  test::TempDir dir;
  const Rgb8Image img = test_image(37, 21, 200, 40, 90);
  write_png(dir / "a.png", img);
  const Rgb8Image png = read_image(dir / "a.png");
  EXPECT_EQ(png.width, 37);
  EXPECT_EQ(png.height, 21);
  EXPECT_EQ(png.pixels, img.pixels);
  write_jpeg(dir / "a.jpg", img, 95);
  const Rgb8Image jpg = read_image(dir / "a.jpg");
  ASSERT_EQ(jpg.pixels.size(), img.pixels.size());
  double err = 0;
  for (size_t i = 0; i < img.pixels.size(); ++i)
    err += std::abs(static_cast<int>(jpg.pixels[i]) - static_cast<int>(img.pixels[i]));
  EXPECT_LT(err / static_cast<double>(img.pixels.size()), 4.0);
}

TEST(ImageCodec, CorruptOrForeignFilesNameThePath) {
  test::TempDir dir;
  write_jpeg(dir / "ok.jpg", test_image(16, 16, 1, 2, 3));
  std::string bytes = read_file(dir / "ok.jpg");
  write_file_atomic(dir / "cut.jpg", bytes.substr(0, bytes.size() / 3));
  write_file_atomic(dir / "text.png", "hello");
  try {
    read_image(dir / "cut.jpg");
    FAIL() << "a truncated JPEG decoded";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr((dir / "cut.jpg").string()));
  }
  EXPECT_THROW(read_image(dir / "text.png"), ConfigError);
  EXPECT_THROW(read_image(dir / "missing.png"), IoError);
}

TEST(ImageFolder, FindsClassesDecodesAndAugments) {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "b_cat");
  std::filesystem::create_directories(dir / "a_dog");
  std::filesystem::create_directories(dir / "empty_is_ignored_file_only");
  write_file_atomic(dir / "empty_is_ignored_file_only" / "notes.txt", "x");
  write_png(dir / "a_dog" / "1.png", test_image(40, 30, 250, 0, 0));
  write_jpeg(dir / "a_dog" / "2.JPG", test_image(30, 50, 250, 0, 0));
  write_png(dir / "b_cat" / "1.png", test_image(64, 64, 0, 0, 250));
  EXPECT_THROW(ImageFolderDataset(dir.path(), {}), ConfigError) << "a class without images";
  std::filesystem::remove_all(dir / "empty_is_ignored_file_only");

  ImageFolderDataset eval(dir.path(), {.image_size = 16, .train = false});
  EXPECT_EQ(eval.classes(), (std::vector<std::string>{"a_dog", "b_cat"}));
  ASSERT_EQ(eval.size(), 3);
  const std::vector<int64_t> all{0, 1, 2};
  const Batch a = eval.get_batch(all);
  EXPECT_EQ(a.data.sizes(), (std::vector<int64_t>{3, 3, 16, 16}));
  ASSERT_EQ(a.target.numel(), 3);
  EXPECT_EQ(std::vector<int64_t>(a.target.data_ptr<int64_t>(), a.target.data_ptr<int64_t>() + 3),
            (std::vector<int64_t>{0, 0, 1}));
  EXPECT_TRUE(a.data.equal(eval.get_batch(all).data)) << "evaluation is deterministic";
  // Normalized with ImageNet's statistics: the blue class has a high blue channel.
  EXPECT_GT(a.data[2][2].mean().item<double>(), 1.5);
  EXPECT_LT(a.data[0][2].mean().item<double>(), -1.5);

  ImageFolderDataset train(dir.path(), {.image_size = 16, .train = true, .seed = 3});
  const Batch t1 = train.get_batch(all);
  const Batch t2 = train.get_batch(all);
  EXPECT_EQ(t1.data.sizes(), a.data.sizes());
  EXPECT_FALSE(t1.data.equal(t2.data)) << "augmentation draws new crops";

  write_file_atomic(dir / "b_cat" / "2.png", "not a png");
  ImageFolderDataset broken(dir.path(), {.image_size = 16});
  const std::vector<int64_t> last{3};
  try {
    broken.get_batch(last);
    FAIL() << "a corrupt image decoded";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("2.png"));
  }
  EXPECT_THROW(ImageFolderDataset(dir / "nope", {}), ConfigError);
}

}  // namespace
}  // namespace zeus::data
