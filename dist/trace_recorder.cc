#include "dist/trace_recorder.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "tensor/check.h"

namespace tessera {
namespace dist {
namespace trace {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t step_number(const std::string& text, const std::string& whole) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  TS_CHECK(!text.empty() && end != nullptr && *end == '\0' && v >= 1, "--trace-steps=", whole,
           ": expected FIRST:LAST or STEP with steps counted from 1 (or 'last'), got '", text, "'");
  return v;
}

thread_local const CollectiveLabel* current_label = nullptr;

}  // namespace

TraceSteps TraceSteps::parse(const std::string& text) {
  TraceSteps s;
  if (text == "last") return s;
  const size_t colon = text.find(':');
  s.last_only = false;
  s.first = step_number(text.substr(0, colon), text);
  s.last = colon == std::string::npos ? s.first : step_number(text.substr(colon + 1), text);
  TS_CHECK(s.first <= s.last, "--trace-steps=", text, ": the first step (", s.first,
           ") is after the last (", s.last, ")");
  return s;
}

TraceRecorder& TraceRecorder::global() {
  static TraceRecorder recorder;
  return recorder;
}

void TraceRecorder::enable(const TraceSteps& steps) {
  steps_ = steps;
  enabled_ = true;
}

void TraceRecorder::disable() {
  enabled_ = false;
  recording_ = false;
}

void TraceRecorder::begin_step(int64_t step) {
  step_ = step;
  const bool on = enabled() && steps_.contains(step);
  if (on && steps_.last_only) {
    // Only the last step is kept: the earlier ones' events go (their collectives are done).
    std::lock_guard<std::mutex> lock(mutex_);
    events_.erase(std::remove_if(events_.begin(), events_.end(),
                                 [&](const Event& e) { return e.step < step; }),
                  events_.end());
  }
  step_start_ = now();
  recording_ = on;
}

void TraceRecorder::end_step() {
  if (!recording()) return;
  const int64_t s = step();
  span("step " + std::to_string(s), "step", step_start_, now());
  recording_ = false;
}

void TraceRecorder::record(Event event) {
  if (event.step == 0) event.step = step();
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string& c = event.category;
  if (c == "forward" || c == "backward" || c == "weight" || c == "compute") ++compute_events_;
  events_.push_back(std::move(event));
}

int64_t TraceRecorder::compute_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return compute_events_;
}

void TraceRecorder::span(std::string name, std::string category, double start, double end,
                         std::string args) {
  Event e;
  e.name = std::move(name);
  e.category = std::move(category);
  e.start = start;
  e.end = end;
  e.args = std::move(args);
  record(std::move(e));
}

void TraceRecorder::instant(std::string name, std::string category, std::string args) {
  const double t = now();
  span(std::move(name), std::move(category), t, t, std::move(args));
}

int TraceRecorder::add_comm_track(const std::string& group) {
  std::lock_guard<std::mutex> lock(mutex_);
  comm_track_groups_.push_back(group);
  return static_cast<int>(comm_track_groups_.size());
}

std::vector<std::string> TraceRecorder::track_names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names{"compute"};
  for (size_t k = 0; k < comm_track_groups_.size(); ++k) {
    const std::string& group = comm_track_groups_[k];
    names.push_back("comm thread " + std::to_string(k + 1) + (group.empty() ? "" : " (" + group + ")"));
  }
  return names;
}

std::vector<Event> TraceRecorder::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!steps_.last_only) return events_;
  // A collective of an earlier step may have finished after the last step began.
  std::vector<Event> out;
  for (const Event& e : events_) {
    if (e.step == step()) out.push_back(e);
  }
  return out;
}

void TraceRecorder::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.clear();
}

CollectiveLabel::CollectiveLabel(std::string name, std::string category, std::string args)
    : name_(std::move(name)), category_(std::move(category)), args_(std::move(args)),
      outer_(current_label) {
  current_label = this;
}

CollectiveLabel::~CollectiveLabel() { current_label = outer_; }

const CollectiveLabel* CollectiveLabel::current() { return current_label; }

SpanIfRecording::SpanIfRecording(const char* name, const char* category)
    : name_(name), category_(category), start_(recording() ? now() : -1) {}

SpanIfRecording::~SpanIfRecording() {
  if (start_ >= 0 && recording()) TraceRecorder::global().span(name_, category_, start_, now());
}

}  // namespace trace
}  // namespace dist
}  // namespace tessera
