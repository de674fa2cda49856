#include "zeus/common/build_info.h"

#include <fmt/format.h>

#include <algorithm>

// Set by src/CMakeLists.txt on this file only.
#ifndef ZEUS_VERSION_STRING
#error "ZEUS_VERSION_STRING is set by src/CMakeLists.txt"
#endif

namespace zeus {

std::string_view version() {
  return ZEUS_VERSION_STRING;
}

bool is_wheel_build() {
#ifdef ZEUS_WHEEL_BUILD
  return true;
#else
  return false;
#endif
}

std::string_view build_kind() {
#ifdef ZEUS_WHEEL_BUILD
  return "pip wheel (manylinux_2_28 " ZEUS_WHEEL_ARCH ")";
#else
  return "source build";
#endif
}

const std::vector<Feature>& features() {
  static const std::vector<Feature> kFeatures = {
      {"http-client", "libcurl4-openssl-dev", ZEUS_FEATURE_HTTP_CLIENT != 0},
      {"tokens", "libssl-dev", ZEUS_FEATURE_TOKENS != 0},
      {"zeusd", "libmicrohttpd-dev, libssl-dev, libtomlplusplus-dev", ZEUS_FEATURE_ZEUSD != 0},
      {"bso-server", "libsqlite3-dev", ZEUS_FEATURE_BSO_SERVER != 0},
      {"postgresql", "libpq-dev", ZEUS_FEATURE_POSTGRESQL != 0},
      {"kubelet", "libgrpc++-dev, protobuf-compiler, protobuf-compiler-grpc",
       ZEUS_FEATURE_KUBELET != 0},
  };
  return kFeatures;
}

std::string version_text(std::string_view program) {
  std::string text = fmt::format("{} {}\nbuild: {}\n", program, version(), build_kind());
  std::vector<std::string_view> with;
  std::vector<std::string_view> without;
  for (const auto& f : features()) {
    (f.present ? with : without).push_back(f.name);
  }
  text += fmt::format("features: {}\n",
                      with.empty() ? "none" : fmt::format("{}", fmt::join(with, " ")));
  if (!without.empty()) {
    text += fmt::format("left out: {} ({})\n", fmt::join(without, " "),
                        is_wheel_build() ? "the source build has them: docs/packaging.md"
                                         : "rebuild with their -dev packages: docs/packaging.md");
  }
  return text;
}

std::string left_out_message(std::string_view feature, std::string_view what) {
  if (is_wheel_build()) {
    return fmt::format(
        "{}: the pip wheel of zeus-cpp leaves out '{}'; the source build (docs/packaging.md) and "
        "the container image (deploy/Dockerfile) have it",
        what, feature);
  }
  const auto& all = features();
  const auto it =
      std::find_if(all.begin(), all.end(), [&](const Feature& f) { return f.name == feature; });
  return fmt::format(
      "{}: this build of zeus-cpp was configured without '{}'; install {} "
      "(scripts/install-deps.sh) and rebuild",
      what, feature, it == all.end() ? "its -dev packages" : it->debian_packages);
}

}  // namespace zeus
