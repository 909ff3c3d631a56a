// Writing a file so that readers only ever see the old file or the whole new one.
//
// The content goes to PATH.tmp.PID in the same directory, is flushed to disk (fsync), and is
// renamed over PATH (rename is atomic within a file system); then the directory is flushed too,
// so the new name survives a power loss. If writing or renaming fails, the temporary file is
// removed before the error is raised; temporary files of PATH left by writers that were killed
// (their process no longer exists) are removed at the next write.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace tessera {

// Calls `write` with a stream on the temporary file, then publishes it as `path`. Errors name
// the file and the system's reason; `who` prefixes them ("save_safetensors"). `before_rename`, a
// testing aid, is called once the temporary file is on disk, before the rename.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           const char* who, const std::function<void()>& before_rename = {});

// Flushes directory `dir`'s entries to disk (a file created, renamed or removed in it), so that
// they survive a power loss; an error naming it when it cannot be opened.
void sync_directory(const std::string& dir, const char* who);

}  // namespace tessera
