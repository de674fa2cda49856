#include "zeus/device/sim/shared_state_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"

namespace zeus::device::sim {

namespace {

// Unmaps on every path out of the constructor until the object owns the mapping.
struct Mapping {
  void* mem = MAP_FAILED;
  ~Mapping() {
    if (mem != MAP_FAILED) {
      ::munmap(mem, sizeof(detail::SharedState));
    }
  }
};

}  // namespace

SharedStateFile::SharedStateFile(std::filesystem::path path,
                                 const std::function<void(detail::SharedState&, bool)>& setup)
    : path_(std::move(path)) {
  Mapping map;
  if (path_.empty()) {
    map.mem = ::mmap(nullptr, sizeof(detail::SharedState), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map.mem == MAP_FAILED) {
      throw_posix_error("mapping simulated GPU state", "anonymous memory", errno);
    }
    auto* state = static_cast<detail::SharedState*>(map.mem);
    std::memset(static_cast<void*>(state), 0, sizeof(detail::SharedState));
    setup(*state, true);
    state_ = state;
    map.mem = MAP_FAILED;
    return;
  }
  const std::string where = path_.string();
  fd_ = UniqueFd(check_posix(::open(where.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644),
                             "opening simulated GPU state file", where));
  flock_exclusive();
  try {
    struct stat st {};
    check_posix(::fstat(fd_.get(), &st), "stat of simulated GPU state file", where);
    const bool fresh = st.st_size == 0;
    if (fresh) {
      check_posix(::ftruncate(fd_.get(), sizeof(detail::SharedState)),
                  "sizing simulated GPU state file", where);
    } else if (static_cast<size_t>(st.st_size) != sizeof(detail::SharedState)) {
      throw ConfigError(fmt::format(
          "simulated GPU state file '{}' has {} bytes, expected {}: it is not a zeus-cpp state "
          "file of this version; remove it or point {} elsewhere",
          where, st.st_size, sizeof(detail::SharedState), kEnvSimState.name));
    }
    map.mem = ::mmap(nullptr, sizeof(detail::SharedState), PROT_READ | PROT_WRITE, MAP_SHARED,
                     fd_.get(), 0);
    if (map.mem == MAP_FAILED) {
      throw_posix_error("mapping simulated GPU state file", where, errno);
    }
    auto* state = static_cast<detail::SharedState*>(map.mem);
    if (fresh) {
      std::memset(static_cast<void*>(state), 0, sizeof(detail::SharedState));
    }
    setup(*state, fresh);
    state_ = state;
    map.mem = MAP_FAILED;
  } catch (...) {
    unlock();
    throw;
  }
  unlock();
}

SharedStateFile::~SharedStateFile() {
  ::munmap(state_, sizeof(detail::SharedState));
}

void SharedStateFile::flock_exclusive() {
  if (fd_.get() < 0) {
    return;
  }
  while (::flock(fd_.get(), LOCK_EX) != 0) {
    if (errno != EINTR) {
      throw_posix_error("locking simulated GPU state", path_.string(), errno);
    }
  }
}

void SharedStateFile::unlock() {
  if (fd_.get() >= 0) {
    ::flock(fd_.get(), LOCK_UN);
  }
}

SharedStateFile::Lock::Lock(SharedStateFile& file) : guard_(file.mu_), file_(file) {
  file_.flock_exclusive();
}

SharedStateFile::Lock::~Lock() {
  file_.unlock();
}

}  // namespace zeus::device::sim
