// TraceRecorder: what a training step did when, on which thread, for a Chrome trace
// (chrome://tracing, ui.perfetto.dev). One recorder per process (global()); the library records
// into it, a training loop marks the steps, and trace_file.h gathers every rank's events into
// one file.
//
//   auto& recorder = TraceRecorder::global();
//   recorder.enable(TraceSteps::parse("3:4"));   steps 3 and 4 (TraceSteps{}: the last step run)
//   for each step s = 1, 2, ...:  recorder.begin_step(s); forward, backward, step; recorder.end_step();
//   write_chrome_trace("trace.json", recorder, world.get());   collective; rank 0 writes
//
// Two kinds of track per rank:
//
//   rank 0  compute        [forward][bwd fc2][bwd fc1]    [wait]
//           comm thread 1            [all_reduce bucket 0][all_reduce bucket 1]
//
// The compute track holds what the training thread records (spans, and instants such as a
// bucket's launch or a unit's free). Each communication thread (one per process group,
// comm_thread.h) has a track of its own: it records every collective it runs, from the moment
// it starts the collective to the moment it finishes, named by the CollectiveLabel that was
// alive on the thread that issued it ("collective" when none was).
//
// Off (the default) the library's only cost is one relaxed atomic load per check (recording()),
// and the strategies build no names. Events carry the step they belong to: a collective issued in
// step 3 and finished later still counts in step 3.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tessera {
namespace dist {
namespace trace {

// The compute track's number; communication threads get 1, 2, ... in the order they start.
constexpr int kComputeTrack = 0;

struct Event {
  std::string name;      // "all_reduce bucket 1", "backward fc2", "free unit0"
  std::string category;  // "forward", "backward", "all_reduce", "all_gather", "reduce_scatter",
                         // "free", "launch", "wait", "step", "collective", a pipeline action's
  int track = kComputeTrack;
  int64_t step = 0;
  double start = 0, end = 0;  // steady-clock seconds (dist::steady_seconds()); equal: an instant
  std::string args;  // the body of a JSON object ("\"bucket\":1,\"elements\":2816"), or empty
  bool instant() const { return end == start; }
};

// Which steps to record: first..last (1-based, inclusive); last_only: the last step run (each
// step's events replace the previous step's).
struct TraceSteps {
  int64_t first = 0, last = 0;
  bool last_only = true;
  // "a:b", "a" (one step) or "last". Throws naming the text unless 1 <= a <= b.
  static TraceSteps parse(const std::string& text);
  bool contains(int64_t step) const { return last_only || (step >= first && step <= last); }
};

class TraceRecorder {
 public:
  // The process's recorder.
  static TraceRecorder& global();

  void enable(const TraceSteps& steps);
  void disable();  // stops recording; the events recorded so far stay
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  const TraceSteps& steps() const { return steps_; }

  // The training loop: step `step` (1-based) begins / has ended (its optimizer step done). Records
  // a "step N" span on the compute track when the step is selected.
  void begin_step(int64_t step);
  void end_step();
  // Recording now: enabled and inside a selected step. The check every recording site makes.
  bool recording() const { return recording_.load(std::memory_order_relaxed); }
  int64_t step() const { return step_.load(std::memory_order_relaxed); }

  // Thread-safe. `event.step` is set to the current step when it is 0.
  void record(Event event);
  // A span or an instant on the compute track, in the current step.
  void span(std::string name, std::string category, double start, double end,
            std::string args = "");
  void instant(std::string name, std::string category, std::string args = "");

  // A communication thread's track (thread-safe): 1, 2, ... named "comm thread K", followed by
  // " (GROUP)" when `group` says whose collectives it runs ("ranks 0-3, world").
  int add_comm_track(const std::string& group = "");
  std::vector<std::string> track_names() const;  // index: track number

  std::vector<Event> events() const;
  // Computation events (category forward, backward, weight or compute) recorded so far (never
  // decreases; clear() keeps it): a training loop compares it before and after a step's
  // forward and backward to see whether the strategy recorded its computation itself.
  int64_t compute_events() const;
  void clear();  // drops the events (tracks stay)

 private:
  std::atomic<bool> enabled_{false}, recording_{false};
  std::atomic<int64_t> step_{0};
  TraceSteps steps_;
  double step_start_ = 0;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::vector<std::string> comm_track_groups_;  // index: track - 1
  int64_t compute_events_ = 0;
};

// The global recorder's recording(): `if (trace::recording()) ...` guards every site.
inline bool recording() { return TraceRecorder::global().recording(); }

// Names the collectives this thread issues while it lives (the communication thread records
// them under it). Cheap to skip: make one only when recording().
class CollectiveLabel {
 public:
  CollectiveLabel(std::string name, std::string category, std::string args = "");
  ~CollectiveLabel();
  CollectiveLabel(const CollectiveLabel&) = delete;
  CollectiveLabel& operator=(const CollectiveLabel&) = delete;

  const std::string& name() const { return name_; }
  const std::string& category() const { return category_; }
  const std::string& args() const { return args_; }
  // The innermost label alive on this thread, or nullptr.
  static const CollectiveLabel* current();

 private:
  std::string name_, category_, args_;
  const CollectiveLabel* outer_;
};

// A span on the compute track from construction to destruction, recorded only when a trace is
// recording at both ends (else it costs two relaxed loads):
//   { trace::SpanIfRecording span("gossip wait", "wait"); for (auto& w : works) w->wait(); }
class SpanIfRecording {
 public:
  SpanIfRecording(const char* name, const char* category);
  ~SpanIfRecording();
  SpanIfRecording(const SpanIfRecording&) = delete;
  SpanIfRecording& operator=(const SpanIfRecording&) = delete;

 private:
  const char* name_;
  const char* category_;
  double start_ = -1;  // < 0: not recording when made
};

// A CollectiveLabel made only while a trace is recording (else nothing is built), for names
// that are fixed text:  trace::LabelIfRecording label("all_reduce g (forward)", "all_reduce");
class LabelIfRecording {
 public:
  LabelIfRecording(const char* name, const char* category) {
    if (recording()) label_.emplace(name, category);
  }

 private:
  std::optional<CollectiveLabel> label_;
};

}  // namespace trace
}  // namespace dist
}  // namespace tessera
