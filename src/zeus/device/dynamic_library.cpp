#include "zeus/device/dynamic_library.h"

#include <dlfcn.h>

namespace zeus::device {

DynamicLibrary::DynamicLibrary(const std::vector<std::string>& candidates) {
  for (const auto& candidate : candidates) {
    dlerror();
    handle_.reset(dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL));
    if (handle_ != nullptr) {
      path_ = candidate;
      return;
    }
    const char* err = dlerror();
    errors_.push_back(err != nullptr ? err : candidate + ": unknown dlopen error");
  }
}

void DynamicLibrary::DlClose::operator()(void* handle) const {
  dlclose(handle);
}

DynamicLibrary::Missing DynamicLibrary::resolve(
    std::initializer_list<LibrarySymbol> symbols) const {
  Missing missing;
  for (const auto& symbol : symbols) {
    *symbol.slot = nullptr;
    for (const char* name : symbol.names) {
      *symbol.slot = dlsym(handle_.get(), name);
      if (*symbol.slot != nullptr) {
        break;
      }
    }
    if (*symbol.slot == nullptr) {
      (symbol.required ? missing.required : missing.optional).emplace_back(*symbol.names.begin());
    }
  }
  return missing;
}

}  // namespace zeus::device
