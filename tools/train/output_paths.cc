#include "tools/train/output_paths.h"

#include <sys/stat.h>
#include <unistd.h>

namespace tessera {
namespace train {

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

namespace {

std::string parent_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A file the run will write: its directory exists and is writable, and it is not a directory.
std::string file_problem(const std::string& flag, const std::string& path) {
  if (path.empty()) return "";
  if (is_directory(path)) return "--" + flag + "=" + path + " is a directory; give a file name";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {  // there already (a file, /dev/null): writable itself
    return ::access(path.c_str(), W_OK) == 0 ? "" : "--" + flag + "=" + path + " is not writable";
  }
  const std::string dir = parent_of(path);
  if (!is_directory(dir)) {
    return "--" + flag + "=" + path + ": the directory '" + dir + "' does not exist";
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return "--" + flag + "=" + path + ": the directory '" + dir + "' is not writable";
  }
  return "";
}

// A directory the run will make (with its parents) and write into: its nearest existing
// ancestor is a writable directory.
std::string directory_problem(const std::string& flag, const std::string& path) {
  if (path.empty()) return "";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return "--" + flag + "=" + path + " is a file, not a directory";
    if (::access(path.c_str(), W_OK) != 0) return "--" + flag + "=" + path + " is not writable";
    return "";
  }
  std::string ancestor = path;
  do {
    ancestor = parent_of(ancestor);
  } while (!is_directory(ancestor) && ancestor != "/" && ancestor != ".");
  if (::access(ancestor.c_str(), W_OK) != 0) {
    return "--" + flag + "=" + path + " cannot be made: '" + ancestor + "' is not writable";
  }
  return "";
}

}  // namespace

std::string output_paths_problem(const Config& c, bool lead) {
  struct stat st;
  if (!c.resume.empty() && ::stat(c.resume.c_str(), &st) != 0) {
    return "--resume=" + c.resume + ": no such file or directory";
  }
  std::string problem = directory_problem("checkpoint-dir", c.checkpoint_dir);
  if (!lead) return problem;
  for (const auto& [flag, path] : {std::pair<std::string, std::string>{"metrics", c.metrics},
                                   {"trace", c.trace},
                                   {"save-model", c.save_model},
                                   {"report", c.report}}) {
    if (problem.empty()) problem = file_problem(flag, path);
  }
  return problem;
}

}  // namespace train
}  // namespace tessera
