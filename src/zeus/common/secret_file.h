// Shared secrets kept in files (the metrics exporter's bearer token, the rendezvous token): the
// file must be readable by its owner only, and its first line, trimmed, is the secret.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

namespace zeus {

// Throws ConfigError naming `what` and the path when the file is missing, readable by group or
// others (the secret would be everyone's), or empty.
std::string read_secret_file(const std::filesystem::path& path, const std::string& what);

// The same checks for a binary key (zeusd's signing key): the whole file is the key, bytes as
// they are. Throws ConfigError as read_secret_file does.
std::string read_secret_key_file(const std::filesystem::path& path, const std::string& what);

// A secret file that is read again when it changes, so that a server's token can rotate without a
// restart (a Kubernetes Secret volume swaps its "..data" symlink: the path then names a new file).
// Contract: current() may be called from any thread; it stats the file (following links) and
// re-reads it, with read_secret_file's checks, when its inode, size or mtime changed. A change
// that does not read (mid-swap, a mode others can read) keeps the last good secret and is logged
// once until a read succeeds.
class WatchedSecretFile {
 public:
  // Reads it now; throws as read_secret_file does.
  WatchedSecretFile(std::filesystem::path path, std::string what);
  std::string current();

 private:
  struct Stamp {
    unsigned long long inode = 0;
    long long size = -1;
    long long mtime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };
  std::optional<Stamp> stamp() const;

  std::filesystem::path path_;
  std::string what_;
  std::mutex mu_;
  std::string secret_;          // under mu_
  std::optional<Stamp> stamp_;  // under mu_: the file last read
  bool failing_ = false;        // under mu_
};

}  // namespace zeus
