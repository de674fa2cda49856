#include "zeus/common/secret_file.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <fstream>

#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"

namespace zeus {

namespace {

// Refuses a file other users may read (or that is missing).
void check_owner_only(const std::filesystem::path& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw ConfigError(
        fmt::format("{} {}: cannot be read (it does not exist?)", what, path.string()));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw ConfigError(
        fmt::format("{} {} has mode {:o}: other users can read the secret; chmod 600 it", what,
                    path.string(), st.st_mode & 07777));
  }
}

}  // namespace

std::string read_secret_key_file(const std::filesystem::path& path, const std::string& what) {
  check_owner_only(path, what);
  std::string key = read_file(path);
  if (key.empty()) {
    throw ConfigError(fmt::format(
        "{} {} is empty; write a random key into it (for example `head -c 32 /dev/urandom > {}`, "
        "then chmod 600 it)",
        what, path.string(), path.string()));
  }
  return key;
}

std::string read_secret_file(const std::filesystem::path& path, const std::string& what) {
  check_owner_only(path, what);
  std::ifstream in(path);
  std::string secret;
  std::getline(in, secret);
  const auto first = secret.find_first_not_of(" \t\r\n");
  secret = first == std::string::npos
               ? std::string()
               : secret.substr(first, secret.find_last_not_of(" \t\r\n") - first + 1);
  if (secret.empty()) {
    throw ConfigError(
        fmt::format("{} {} is empty: write the secret on its first line", what, path.string()));
  }
  return secret;
}

}  // namespace zeus
