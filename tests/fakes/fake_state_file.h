// The machine state behind a fake vendor library (fake_nvml.cpp, fake_amdsmi.cpp): one JSON file
// that every process using the fake shares, as every process shares one driver. Each call
// re-reads the file when it changed (inode, size or mtime); a setter's change is written back
// under a lock file (read-modify-write, then rename), so that what one process set is what every
// other reads, and several processes' sets all land.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace fake_state {

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

struct StateFile {
  nlohmann::json state;
  std::string path;
  ino_t inode = 0;
  off_t size = 0;
  timespec mtime{};

  // Reads the file again when it changed since the last read; a missing file keeps the state.
  void refresh() {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return;
    }
    if (st.st_ino == inode && st.st_size == size && st.st_mtim.tv_sec == mtime.tv_sec &&
        st.st_mtim.tv_nsec == mtime.tv_nsec) {
      return;
    }
    state = read_json(path);
    inode = st.st_ino;
    size = st.st_size;
    mtime = st.st_mtim;
  }

  // Applies mutate(json) to the file on disk under its lock, and to this copy. False: the file
  // could not be locked or replaced.
  template <typename F>
  bool update(F mutate) {
    const std::string lock_path = path + ".lock";
    const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX) != 0) {
      return false;
    }
    nlohmann::json on_disk = read_json(path);
    mutate(on_disk);
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp);
      out << on_disk.dump(2);
    }
    const bool ok = std::rename(tmp.c_str(), path.c_str()) == 0;
    ::close(lock_fd);  // releases the lock
    if (ok) {
      inode = 0;  // read our own write again at the next call
      state = std::move(on_disk);
    }
    return ok;
  }
};

}  // namespace fake_state
