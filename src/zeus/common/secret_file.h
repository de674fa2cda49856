// Shared secrets kept in files (the metrics exporter's bearer token, the rendezvous token): the
// file must be readable by its owner only, and its first line, trimmed, is the secret.
#pragma once

#include <filesystem>
#include <string>

namespace zeus {

// Throws ConfigError naming `what` and the path when the file is missing, readable by group or
// others (the secret would be everyone's), or empty.
std::string read_secret_file(const std::filesystem::path& path, const std::string& what);

// The same checks for a binary key (zeusd's signing key): the whole file is the key, bytes as
// they are. Throws ConfigError as read_secret_file does.
std::string read_secret_key_file(const std::filesystem::path& path, const std::string& what);

}  // namespace zeus
