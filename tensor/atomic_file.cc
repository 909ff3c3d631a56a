#include "tensor/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "tensor/check.h"

namespace tessera {

namespace {

// Removes DIR/NAME.tmp.PID for every PID that is no longer a running process.
void remove_stale_temporaries(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string prefix =
      (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      ::unlink((dir + (slash == std::string::npos ? "/" : "") + name).c_str());
    }
  }
  ::closedir(d);
}

}  // namespace

void sync_directory(const std::string& dir, const char* who) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  TS_CHECK(fd >= 0, who, ": cannot open directory '", dir, "' to flush it: ", std::strerror(errno));
  ::fsync(fd);  // some file systems refuse fsync on a directory (EINVAL): nothing more to do there
  ::close(fd);
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           const char* who, const std::function<void()>& before_rename) {
  remove_stale_temporaries(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TS_CHECK(out.good(), who, ": cannot write '", tmp, "': ", std::strerror(errno));
    write(out);
    out.flush();
    if (!out.good()) {
      const int error = errno;
      out.close();
      ::unlink(tmp.c_str());
      TS_FAIL(who, ": writing '", tmp, "' failed: ", std::strerror(error), " (removed it; '", path,
              "' is as it was)");
    }
  }
  // Flush to disk before the rename makes the new file visible under `path`.
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  if (before_rename) before_rename();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    TS_FAIL(who, ": cannot rename '", tmp, "' to '", path, "': ", std::strerror(error),
            " (removed the temporary file)");
  }
  const size_t slash = path.rfind('/');
  sync_directory(slash == std::string::npos ? "." : path.substr(0, slash + 1), who);
}

}  // namespace tessera
