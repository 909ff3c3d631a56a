// What the train tool prints: a progress bar on a terminal (plain lines otherwise), one line per
// epoch, and a final JSON summary (json::Object, tools/json/json_writer.h; the --metrics lines are metrics.h's).
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tools/json/json_writer.h"

namespace tessera {
namespace train {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start);

class Progress {
 public:
  // tty: redraw one bar in place; otherwise print a line every tenth of the epoch. `unit`: what
  // the throughput counts per second ("img/s", a GPT's "tok/s").
  Progress(int64_t epoch, int64_t epochs, int64_t steps, bool tty, std::string unit = "img/s");
  void update(int64_t step, double loss, double per_second);
  void finish();

 private:
  int64_t epoch_, epochs_, steps_;
  bool tty_;
  std::string unit_;
  int64_t next_line_ = 0;
  double last_draw_ = -1;
};

}  // namespace train
}  // namespace tessera
