// Writing result files so that a reader sees either the old file or the whole new one.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace zeus {

// Writes `content` to `path` atomically: a temporary file in the same directory, fsync, rename
// over `path`, fsync the directory. Creates missing parent directories. Throws IoError
// (PermissionError when denied) naming the path; on failure `path` is untouched and the
// temporary file is removed. `mode`: the file's permissions (0600 for what only its owner may
// read). A writer killed mid-write (SIGKILL, a power cut) can leave its temporary,
// `.NAME.tmp.XXXXXX`, only in the moment of the rename where the file system has O_TMPFILE, and
// all through the write where it has not; the next write of `path` removes every such temporary
// whose writer is gone (each writer holds a flock on its own).
void write_file_atomic(const std::filesystem::path& path, std::string_view content,
                       unsigned mode = 0644);

// Appends `line` (which should end in '\n') with one O_APPEND write, then fsync, so a crash
// leaves whole lines only. Creates the file. Throws IoError naming `what` and the path.
void append_line_durable(const std::filesystem::path& path, std::string_view line,
                         std::string_view what);

// Calls `fn(line, "path:N")` for each non-empty line of the file (N counts from 1): the reader of
// the project's JSON-lines files. Does nothing when the file does not exist; throws IoError when
// it exists but cannot be read.
void for_each_line(const std::filesystem::path& path,
                   const std::function<void(std::string_view line, const std::string& where)>& fn);

// Reads a whole file. Throws IoError naming the path when it is missing or unreadable.
std::string read_file(const std::filesystem::path& path);

}  // namespace zeus
