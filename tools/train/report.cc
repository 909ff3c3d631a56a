#include "tools/train/report.h"

#include <chrono>
#include <cmath>


namespace tessera {
namespace train {

namespace {
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

JsonObject& JsonObject::add(const std::string& key, const std::string& value) {
  fields_.emplace_back(key, quote(value));
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, double value) {
  char buf[64];
  if (std::isfinite(value)) {
    std::snprintf(buf, sizeof(buf), "%.6g", value);
  } else {
    std::snprintf(buf, sizeof(buf), "null");
  }
  fields_.emplace_back(key, buf);
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, int64_t value) {
  fields_.emplace_back(key, std::to_string(value));
  return *this;
}

JsonObject& JsonObject::add_raw(const std::string& key, const std::string& json) {
  fields_.emplace_back(key, json);
  return *this;
}

std::string JsonObject::str() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    out += (i ? ", " : "") + quote(fields_[i].first) + ": " + fields_[i].second;
  }
  return out + "}";
}

Progress::Progress(int64_t epoch, int64_t epochs, int64_t steps, bool tty)
    : epoch_(epoch), epochs_(epochs), steps_(steps), tty_(tty) {}

void Progress::update(int64_t step, double loss, double images_per_second) {
  if (tty_) {
    const double now = now_seconds();
    if (step < steps_ && now - last_draw_ < 0.1) return;  // redraw at most 10 times a second
    last_draw_ = now;
    const int width = 30;
    const int filled = static_cast<int>(width * step / std::max<int64_t>(steps_, 1));
    std::string bar(filled, '=');
    if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
    std::printf("\repoch %lld/%lld [%s] %lld/%lld  loss %.4f  %.0f img/s ",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_), bar.c_str(),
                static_cast<long long>(step), static_cast<long long>(steps_), loss,
                images_per_second);
    std::fflush(stdout);
    return;
  }
  if (step * 10 >= next_line_ * steps_ && step < steps_) {
    std::printf("epoch %lld/%lld  step %lld/%lld  loss %.4f  %.0f img/s\n",
                static_cast<long long>(epoch_), static_cast<long long>(epochs_),
                static_cast<long long>(step), static_cast<long long>(steps_), loss,
                images_per_second);
    std::fflush(stdout);
    next_line_ = step * 10 / std::max<int64_t>(steps_, 1) + 1;
  }
}

void Progress::finish() {
  if (tty_) std::printf("\r\033[K");
}

}  // namespace train
}  // namespace tessera
