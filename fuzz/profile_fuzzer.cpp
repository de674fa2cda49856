#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zeus::fuzz::fuzz_profile_json(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
