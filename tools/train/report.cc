#include "tools/train/report.h"

#include <algorithm>
#include <chrono>

namespace tessera {
namespace train {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Progress::Progress(int64_t epoch, int64_t epochs, int64_t steps, bool tty, std::string unit)
    : epoch_(epoch), epochs_(epochs), steps_(steps), tty_(tty), unit_(std::move(unit)) {}

void Progress::update(int64_t step, double loss, double per_second) {
  if (tty_) {
    const double now = now_seconds();
    if (step < steps_ && now - last_draw_ < 0.1) return;  // redraw at most 10 times a second
    last_draw_ = now;
    const int width = 30;
    const int filled = static_cast<int>(width * step / std::max<int64_t>(steps_, 1));
    std::string bar(filled, '=');
    if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
    std::printf("\repoch %lld/%lld [%s] %lld/%lld  loss %.4f  %.0f %s ",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_), bar.c_str(),
                static_cast<long long>(step), static_cast<long long>(steps_), loss, per_second,
                unit_.c_str());
    std::fflush(stdout);
    return;
  }
  if (step * 10 >= next_line_ * steps_ && step < steps_) {
    std::printf("epoch %lld/%lld  step %lld/%lld  loss %.4f  %.0f %s\n",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_),
                static_cast<long long>(step), static_cast<long long>(steps_), loss, per_second,
                unit_.c_str());
    std::fflush(stdout);
    next_line_ = step * 10 / std::max<int64_t>(steps_, 1) + 1;
  }
}

void Progress::finish() {
  if (tty_) std::printf("\r\033[K");
}

}  // namespace train
}  // namespace tessera
