#include "zeus/common/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>

#include "zeus/common/directories.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"
#include "zeus/common/random.h"

namespace zeus {
namespace {

// A temporary of target NAME is `.NAME.tmp.XXXXXX` beside it, and its writer holds an exclusive
// flock on it from before it has a name until it has been renamed over NAME. A SIGKILL or a power
// cut between the two leaves it behind; its lock then can be taken, and the next write of NAME
// removes it. The open() is O_TMPFILE where the file system has it: the file gets its name only
// for the rename, so a killed writer leaves nothing behind at all but in that moment.
constexpr std::string_view kTempInfix = ".tmp.";
constexpr size_t kTempSuffixChars = 6;

std::string temp_prefix(const std::filesystem::path& target) {
  return fmt::format(".{}{}", target.filename().string(), kTempInfix);
}

bool same_file(int fd, const std::string& path) {
  struct stat by_fd {};
  struct stat by_name {};
  return ::fstat(fd, &by_fd) == 0 && ::lstat(path.c_str(), &by_name) == 0 &&
         by_fd.st_dev == by_name.st_dev && by_fd.st_ino == by_name.st_ino;
}

// Removes the temporaries of `target` whose writers are gone (their lock is free). Best effort:
// one it cannot open (another user's, 0600) or lock (NFS without flock) is left as it is.
void remove_abandoned_temporaries(const std::filesystem::path& dir,
                                  const std::filesystem::path& target) {
  const std::string prefix = temp_prefix(target);
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != prefix.size() + kTempSuffixChars || !name.starts_with(prefix)) {
      continue;
    }
    const std::string path = it->path().string();
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (fd.get() >= 0 && ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0 && same_file(fd.get(), path)) {
      ::unlink(path.c_str());
    }
  }
}

std::string random_suffix() {
  static constexpr std::string_view kChars =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}() ^ static_cast<uint64_t>(::getpid())
                                                                << 32};
  std::string s(kTempSuffixChars, ' ');
  for (char& c : s) {
    c = kChars[uniform_index(rng, kChars.size())];
  }
  return s;
}

// The temporary: locked, and named (mkostemp) or not yet (O_TMPFILE). Unlinked on destruction
// unless renamed over its target.
class TempFile {
 public:
  TempFile(const std::filesystem::path& dir, const std::filesystem::path& target)
      : dir_(dir), prefix_((dir / temp_prefix(target)).string()) {
    // Naming an O_TMPFILE file takes /proc (linkat of /proc/self/fd/N), which a bare chroot
    // lacks; EOPNOTSUPP/EISDIR/EINVAL: a file system or kernel without O_TMPFILE. Any other
    // error mkostemp meets again and reports.
    if (::access("/proc/self/fd", X_OK) == 0) {
      fd_ = UniqueFd(::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
    }
    if (fd_.get() < 0) {
      open_named();
    } else {
      check_posix(::flock(fd_.get(), LOCK_EX), "locking temporary file in", dir_.string());
    }
  }
  ~TempFile() {
    if (!path_.empty() && !renamed_) {
      ::unlink(path_.c_str());
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write_all(std::string_view data) { zeus::write_all(fd_.get(), data, "writing", where()); }

  void commit(const std::filesystem::path& target, unsigned mode) {
    check_posix(::fchmod(fd_.get(), static_cast<mode_t>(mode)), "setting permissions of", where());
    check_posix(::fsync(fd_.get()), "fsync of", where());
    if (path_.empty()) {
      link_name();
    }
    check_posix(::rename(path_.c_str(), target.c_str()), "renaming temporary file to",
                target.string());
    renamed_ = true;
    // The data is on disk (fsync); closing only drops the lock now that no temporary has a name.
    fd_.reset();
  }

 private:
  std::string where() const { return path_.empty() ? dir_.string() : path_; }

  void open_named() {
    // A sweeper of another writer may unlink the file between mkostemp and flock: then again.
    for (int attempt = 0;; ++attempt) {
      std::string path = prefix_ + std::string(kTempSuffixChars, 'X');
      UniqueFd fd(check_posix(::mkostemp(path.data(), O_CLOEXEC), "creating temporary file", path));
      check_posix(::flock(fd.get(), LOCK_EX), "locking temporary file", path);
      if (same_file(fd.get(), path) || attempt == 3) {
        fd_ = std::move(fd);
        path_ = std::move(path);
        return;
      }
    }
  }

  // Gives the O_TMPFILE file its name, just before the rename.
  void link_name() {
    const std::string self = fmt::format("/proc/self/fd/{}", fd_.get());
    for (int attempt = 0;; ++attempt) {
      std::string path = prefix_ + random_suffix();
      if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        path_ = std::move(path);
        return;
      }
      if (errno != EEXIST || attempt == 8) {
        throw_posix_error("naming temporary file", path, errno);
      }
    }
  }

  std::filesystem::path dir_;
  std::string prefix_;
  UniqueFd fd_;
  std::string path_;  // "" while an O_TMPFILE file has no name
  bool renamed_ = false;
};

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view content, unsigned mode) {
  const std::filesystem::path dir = directory_of(path);
  make_directory(dir, fmt::format("directory of '{}'", path.filename().string()));
  remove_abandoned_temporaries(dir, path);
  TempFile tmp(dir, path);
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
