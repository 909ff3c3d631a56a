// JobDirectory: one process's own subdirectory of an offload directory, found and removed again
// even when the process was killed.
//
//   DIR/
//     tessera-offload-HOST-PID-N.lock  flock'ed by the live process PID for its whole life
//     tessera-offload-HOST-PID-N/      its files (one rank, one process; N numbers a process's
//                                      directories, one per offloaded optimizer)
//
// The kernel drops a flock when its holder dies, however it dies (SIGKILL included), so at the
// next start a lock that can be taken belongs to a dead run: its subdirectory is stale and is
// removed. A live run's lock cannot be taken, so two jobs sharing a directory leave each other
// alone. The destructor removes the subdirectory and the lock.
//
// Before any file is written the directory is checked: created if missing, an error naming it
// when it cannot be (not a directory, no permission, read-only), and check_free_space() compares
// statvfs's free bytes with the bytes the caller predicts it will write.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {
namespace dist {
namespace offload {

class JobDirectory {
 public:
  // `who` names the caller in errors. Removes stale subdirectories of dead runs first.
  JobDirectory(const std::string& dir, const char* who);
  ~JobDirectory();
  JobDirectory(const JobDirectory&) = delete;
  JobDirectory& operator=(const JobDirectory&) = delete;

  // This process's subdirectory, where its files go.
  const std::string& path() const { return path_; }
  // The stale subdirectories this start removed (for reports and tests).
  const std::vector<std::string>& removed_stale() const { return removed_stale_; }

 private:
  std::string dir_;
  std::string path_;
  std::string lock_path_;
  int lock_fd_ = -1;
  std::vector<std::string> removed_stale_;
};

// Throws, naming `who`, the directory and both figures, unless the file system holding `dir` has
// at least `bytes` free for this (unprivileged) user.
void check_free_space(const std::string& dir, int64_t bytes, const char* who);
// Free bytes of the file system holding `dir` (statvfs: f_bavail blocks of f_frsize).
int64_t free_bytes(const std::string& dir);

}  // namespace offload
}  // namespace dist
}  // namespace tessera
