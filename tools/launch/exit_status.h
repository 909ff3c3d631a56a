// What a process's end means, in words: "exit code 1", "killed by SIGKILL (signal 9): ...".
//
// A shell, mpirun and srun report a child killed by signal S as exit code 128 + S, so the
// launcher reads 137 as SIGKILL (the kernel's out-of-memory killer, a scheduler, kill -9), 139
// as SIGSEGV (a crash in native code) and 134 as SIGABRT (abort(): a failed assertion, an
// uncaught exception outside tessera's handler).
#pragma once

#include <string>

namespace tessera {
namespace launch {

// "SIGKILL (signal 9)"; "signal 64" for a number without a name.
std::string signal_text(int signal);

// "killed by SIGKILL (signal 9): out of memory (the kernel's OOM killer), a scheduler, or
// kill -9": the signal and, for the usual ones, what usually sends it.
std::string killed_by(int signal);

// An exit code in words: "exit code 1"; above 128 the signal it stands for too: "exit code
// 137 = 128 + 9, killed by SIGKILL (signal 9): ...".
std::string describe_exit_code(int code);

// A wait status (waitpid's) in words: describe_exit_code of its code, or killed_by its signal.
std::string describe_wait_status(int status);

}  // namespace launch
}  // namespace tessera
