#include "zeus/common/parse.h"

#include <algorithm>
#include <cctype>

namespace zeus {

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> out;
  while (true) {
    const size_t at = text.find(separator);
    out.emplace_back(text.substr(0, at));
    if (at == std::string_view::npos) {
      return out;
    }
    text.remove_prefix(at + 1);
  }
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace zeus
