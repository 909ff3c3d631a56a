#include "tests/util/test_util.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

namespace tessera {
namespace testing {

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

CommandResult run_command(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed for: " + command};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string last_json_line(const std::string& s) {
  size_t end = s.size();
  while (end > 0) {
    const size_t start = s.rfind('\n', end - 1);
    const size_t begin = start == std::string::npos ? 0 : start + 1;
    if (begin < end && s[begin] == '{') return s.substr(begin, end - begin);
    if (start == std::string::npos) break;
    end = start;
  }
  return "";
}

std::string json_field(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 4;
  const char open = json[start];
  if (open == '[' || open == '{') {  // through the matching bracket
    const char close = open == '[' ? ']' : '}';
    int depth = 0;
    for (size_t i = start; i < json.size(); ++i) {
      depth += json[i] == open;
      depth -= json[i] == close;
      if (depth == 0) return json.substr(start, i + 1 - start);
    }
    return json.substr(start);
  }
  const size_t end = json.find_first_of(",}", start);
  return json.substr(start, end - start);
}

double json_number(const std::string& json, const std::string& key) {
  const std::string text = json_field(json, key);
  return text.empty() ? -1 : std::atof(text.c_str());
}

}  // namespace testing
}  // namespace tessera
