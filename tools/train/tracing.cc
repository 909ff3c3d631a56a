#include "tools/train/tracing.h"

#include <cstdio>

#include "dist/trace_file.h"
#include "dist/trace_recorder.h"
#include "tensor/check.h"

namespace tessera {
namespace train {

void start_tracing(const Config& c, int64_t first_step, int64_t last_step) {
  if (c.trace.empty()) return;
  const dist::trace::TraceSteps steps = dist::trace::TraceSteps::parse(c.trace_steps);
  TS_CHECK(steps.last_only || last_step == 0 || (steps.first >= first_step && steps.last <= last_step),
           "train: --trace-steps=", c.trace_steps, " selects steps ", steps.first, " to ",
           steps.last, ", but this run trains steps ", first_step, " to ", last_step);
  dist::trace::TraceRecorder::global().enable(steps);
}

void begin_traced_step(int64_t step) {
  auto& recorder = dist::trace::TraceRecorder::global();
  if (recorder.enabled()) recorder.begin_step(step);
}

void end_traced_step() { dist::trace::TraceRecorder::global().end_step(); }

void write_trace(const RunContext& run, bool announce) {
  const Config& c = run.config;
  if (c.trace.empty()) return;
  auto& recorder = dist::trace::TraceRecorder::global();
  recorder.disable();
  const size_t events = dist::trace::write_chrome_trace(c.trace, recorder, run.world);
  if (run.lead && announce) {
    std::printf("trace: %s (%zu events of %d rank%s, steps %s; chrome://tracing or "
                "ui.perfetto.dev; explain ddp|zero3 --trace=%s)\n",
                c.trace.c_str(), events, run.ranks, run.ranks == 1 ? "" : "s",
                c.trace_steps.c_str(), c.trace.c_str());
  }
}

}  // namespace train
}  // namespace tessera
