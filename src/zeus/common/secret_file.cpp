#include "zeus/common/secret_file.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <fstream>

#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

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

WatchedSecretFile::WatchedSecretFile(std::filesystem::path path, std::string what)
    : path_(std::move(path)), what_(std::move(what)) {
  stamp_ = stamp();
  secret_ = read_secret_file(path_, what_);
}

std::optional<WatchedSecretFile::Stamp> WatchedSecretFile::stamp() const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return std::nullopt;
  }
  return Stamp{static_cast<unsigned long long>(st.st_ino), static_cast<long long>(st.st_size),
               static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000LL + st.st_mtim.tv_nsec};
}

std::string WatchedSecretFile::current() {
  const std::optional<Stamp> now = stamp();
  std::lock_guard lock(mu_);
  if (now && now != stamp_) {
    try {
      secret_ = read_secret_file(path_, what_);
      stamp_ = now;
      logger().info("{} {} changed: its new secret is in use", what_, path_.string());
      failing_ = false;
    } catch (const ConfigError& e) {
      if (!failing_) {
        logger().warn("{}; the last secret read from it stays in use", e.what());
        failing_ = true;
      }
    }
  }
  return secret_;
}

}  // namespace zeus
