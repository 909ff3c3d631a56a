#include "dist/zero/offload/job_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace offload {

namespace fs = std::filesystem;

namespace {

const char* const kPrefix = "tessera-offload-";

std::string host_name() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "host";
  return name;
}

bool same_file(int fd, const std::string& path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// Removes every subdirectory whose lock no live process holds.
std::vector<std::string> remove_stale(const std::string& dir, const std::string& own_lock) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || e.path().extension() != ".lock") continue;
    const std::string lock = e.path().string();
    if (lock == own_lock) continue;
    const int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    // Taken: its holder is dead. Still the file at that path: nobody removed it meanwhile.
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && same_file(fd, lock)) {
      fs::path job = e.path();
      job.replace_extension();
      fs::remove_all(job, ec);
      ::unlink(lock.c_str());
      removed.push_back(job.string());
    }
    ::close(fd);
  }
  return removed;
}

}  // namespace

int64_t free_bytes(const std::string& dir) {
  struct statvfs s;
  TS_CHECK(statvfs(dir.c_str(), &s) == 0, "offload: cannot read the free space of '", dir,
           "': ", std::strerror(errno));
  return static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize);
}

void check_free_space(const std::string& dir, int64_t bytes, const char* who) {
  const int64_t free = free_bytes(dir);
  TS_CHECK(free >= bytes, who, ": the offload directory '", dir, "' has ", free,
           " bytes free, but the state offloaded to it needs ", bytes, " bytes (",
           bytes / (1 << 20), " MiB): free space there, or choose another directory");
}

JobDirectory::JobDirectory(const std::string& dir, const char* who) : dir_(dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  TS_CHECK(fs::is_directory(dir), who, ": the offload directory '", dir,
           "' is not a directory and cannot be created",
           ec ? std::string(": ") + ec.message() : std::string());
  // One process may hold several (one per offloaded optimizer): numbered within it.
  static std::atomic<int> instances{0};
  const std::string job = kPrefix + host_name() + "-" + std::to_string(::getpid()) + "-" +
                          std::to_string(instances++);
  path_ = (fs::path(dir) / job).string();
  lock_path_ = path_ + ".lock";
  // Take our own lock: if a cleaner of another process removed the file between our open and
  // our flock, the lock we hold is on a removed file: open it again.
  for (;;) {
    lock_fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    TS_CHECK(lock_fd_ >= 0, who, ": the offload directory '", dir, "' is not writable: creating '",
             lock_path_, "' failed: ", std::strerror(errno));
    TS_CHECK(flock(lock_fd_, LOCK_EX) == 0, who, ": cannot lock '", lock_path_, "': ",
             std::strerror(errno));
    if (same_file(lock_fd_, lock_path_)) break;
    ::close(lock_fd_);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0) {
    TS_FAIL(who, ": the offload directory '", dir, "' is not writable: writing '", lock_path_,
            "' failed: ", std::strerror(errno));
  }
  removed_stale_ = remove_stale(dir, lock_path_);
  fs::create_directories(path_, ec);
  TS_CHECK(!ec, who, ": cannot create '", path_, "' in the offload directory: ", ec.message());
}

JobDirectory::~JobDirectory() {
  std::error_code ec;
  fs::remove_all(path_, ec);
  ::unlink(lock_path_.c_str());
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

}  // namespace offload
}  // namespace dist
}  // namespace tessera
