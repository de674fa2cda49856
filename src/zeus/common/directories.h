// Making the directory that a file is about to be written in, with an error that says which part
// of the path is in the way and why, instead of a bare "No such file or directory" from the open
// that follows.
#pragma once

#include <filesystem>
#include <string_view>

namespace zeus {

// Makes `dir` and its missing parents (as `mkdir -p`, mode 0777 less the umask), or checks that
// an existing `dir` is a directory this process can create files in. `what` names its role for
// the message ("log directory", "directory of power log 'x'"). Throws IoError naming `what`,
// `dir` (and its absolute form when relative) and the cause: a component that is a file, a
// directory this user may not write (with the uid), a read-only file system. Thread-safe; a
// directory another process makes at the same moment is not an error.
// `mode`: the permissions of each level it makes (0700 for a directory only its owner may read;
// the umask may only narrow them); an existing level keeps its own.
void make_directory(const std::filesystem::path& dir, std::string_view what, unsigned mode = 0777);

// The directory `path` will be written in ("." for a bare file name).
std::filesystem::path directory_of(const std::filesystem::path& path);

}  // namespace zeus
