#include "tools/launch/exit_status.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

namespace tessera {
namespace launch {

namespace {

// What usually sends the signals a training job meets.
const char* likely_cause(int signal) {
  switch (signal) {
    case SIGKILL: return "out of memory (the kernel's OOM killer), a scheduler, or kill -9";
    case SIGSEGV: return "a crash in native code (an invalid memory access)";
    case SIGABRT: return "abort(): a failed assertion or an uncaught exception";
    case SIGBUS: return "a bus error (a truncated memory-mapped file, say)";
    case SIGFPE: return "an arithmetic fault (an integer division by zero)";
    case SIGTERM: return "asked to stop (a scheduler's time limit, or a signal passed on)";
    case SIGINT: return "interrupted (Ctrl-C)";
    default: return nullptr;
  }
}

}  // namespace

std::string signal_text(int signal) {
  const char* abbreviation = sigabbrev_np(signal);  // "KILL"; null for an unknown number
  if (abbreviation == nullptr) return "signal " + std::to_string(signal);
  return std::string("SIG") + abbreviation + " (signal " + std::to_string(signal) + ")";
}

std::string killed_by(int signal) {
  const char* cause = likely_cause(signal);
  return "killed by " + signal_text(signal) + (cause == nullptr ? "" : std::string(": ") + cause);
}

std::string describe_exit_code(int code) {
  std::string s = "exit code " + std::to_string(code);
  // 129..192: 128 + a signal number (Linux has 64).
  if (code > 128 && code <= 128 + 64) {
    s += " = 128 + " + std::to_string(code - 128) + ", " + killed_by(code - 128);
  }
  return s;
}

std::string describe_wait_status(int status) {
  if (WIFSIGNALED(status)) return killed_by(WTERMSIG(status));
  return describe_exit_code(WEXITSTATUS(status));
}

}  // namespace launch
}  // namespace tessera
