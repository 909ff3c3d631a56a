// Small helpers shared by the test suites: a scratch directory, running a command, and reading
// fields out of the train tool's JSON lines.
#pragma once

#include <string>

namespace tessera {
namespace testing {

// A path under the test's scratch directory ($TEST_TMPDIR, else /tmp).
std::string temp_path(const std::string& name);

struct CommandResult {
  int exit_code;       // -1 if the command did not exit normally
  std::string output;  // stdout and stderr together
};
CommandResult run_command(const std::string& command);

// The last line of s that starts with '{' (the train tool's summary), or "".
std::string last_json_line(const std::string& s);
// A number field of a flat JSON object, or -1 when absent.
double json_number(const std::string& json, const std::string& key);
// A field's raw JSON text ("\"ddp\"", "[1, 2]", "0.5", "{\"a\": 1}"), or "" when absent.
std::string json_field(const std::string& json, const std::string& key);

}  // namespace testing
}  // namespace tessera
