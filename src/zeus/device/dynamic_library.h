// A vendor library loaded at run time (dlopen), so that no SDK is needed at build time: the first
// of several candidate paths that loads, and its entry points resolved into one table. Each
// backend's <vendor>_library.cpp says which paths and which symbols.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace zeus::device {

// One entry point: the names it goes by (newest first) and where its address goes.
struct LibrarySymbol {
  std::initializer_list<const char*> names;
  void** slot;
  bool required;
};

// Slot of a function pointer of any type, for LibrarySymbol.
template <typename F>
void** symbol_slot(F* fn) {
  return reinterpret_cast<void**>(fn);
}

class DynamicLibrary {
 public:
  // Loads the first of `candidates` that dlopen accepts; none: `errors()` says why each failed
  // and `loaded()` is false.
  explicit DynamicLibrary(const std::vector<std::string>& candidates);
  bool loaded() const { return handle_ != nullptr; }
  const std::string& path() const { return path_; }
  const std::vector<std::string>& errors() const { return errors_; }

  // Resolves every symbol (the first of its names the library has); returns the first name of
  // each one missing, required and optional apart.
  struct Missing {
    std::vector<std::string> required;
    std::vector<std::string> optional;
  };
  Missing resolve(std::initializer_list<LibrarySymbol> symbols) const;

 private:
  struct DlClose {
    void operator()(void* handle) const;
  };
  std::unique_ptr<void, DlClose> handle_;
  std::string path_;
  std::vector<std::string> errors_;
};

}  // namespace zeus::device
