#include "zeus/common/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "zeus/common/directories.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"

namespace zeus {
namespace {

// Closes the descriptor and unlinks the temporary file unless released.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {
    fd_ = check_posix(::mkstemp(path_.data()), "creating temporary file", path_);
  }
  ~TempFile() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    if (!committed_) {
      ::unlink(path_.c_str());
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write_all(std::string_view data) { zeus::write_all(fd_, data, "writing", path_); }

  void commit(const std::filesystem::path& target, unsigned mode) {
    check_posix(::fchmod(fd_, static_cast<mode_t>(mode)), "setting permissions of", path_);
    check_posix(::fsync(fd_), "fsync of", path_);
    check_posix(::close(fd_), "closing", path_);
    fd_ = -1;
    check_posix(::rename(path_.c_str(), target.c_str()), "renaming temporary file to",
                target.string());
    committed_ = true;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view content, unsigned mode) {
  const std::filesystem::path dir = directory_of(path);
  make_directory(dir, fmt::format("directory of '{}'", path.filename().string()));
  // fmt, not "." + string: GCC 12 at -O3 reports a false -Wrestrict inside operator+ (bug 105329).
  TempFile tmp((dir / fmt::format(".{}.tmp.XXXXXX", path.filename().string())).string());
  tmp.write_all(content);
  tmp.commit(path, mode);
  // Persist the rename itself; a failure here leaves the data written, so only report it.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw_posix_error("opening", path.string(), errno != 0 ? errno : ENOENT);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    throw IoError(fmt::format("reading '{}' failed", path.string()));
  }
  return ss.str();
}

void append_line_durable(const std::filesystem::path& path, std::string_view line,
                         std::string_view what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw_posix_error(fmt::format("opening {}", what), path.string(), errno);
  }
  const ssize_t n = ::write(fd, line.data(), line.size());
  const int write_errno = errno;
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size()) || !synced) {
    throw_posix_error(fmt::format("appending to {}", what), path.string(), write_errno);
  }
}

void for_each_line(const std::filesystem::path& path,
                   const std::function<void(std::string_view line, const std::string& where)>& fn) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return;
  }
  const std::vector<std::string> lines = split(read_file(path), '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!lines[i].empty()) {
      fn(lines[i], fmt::format("{}:{}", path.string(), i + 1));
    }
  }
}

}  // namespace zeus
