// explain pipeline: the schedule's grid (stages down, time slots across), each stage's peak number
// of micro-batches in flight (and, for zero-bubble schedules, of pending W passes), and the bubble
// beside the theory, from pipeline/validator.h. --backward-ratio=R (the whole backward over the
// forward) and --weight-ratio=R (the W part over the forward, default half the backward ratio)
// add the timing model's bubble for those times (pipeline/timing_model.h), with and without a
// flush, and ZB-H1's closed form. --plot draws the grid on that clock (B twice as wide as F at
// R = 2); --json prints one line per computation and a summary line.
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "pipeline/schedule_grid.h"
#include "tensor/check.h"
#include "tools/explain/commands.h"
#include "tools/explain/gnuplot.h"
#include "tools/explain/json_line.h"
#include "tools/explain/pipeline_timeline.h"
#include "tools/explain/svg_grid.h"

namespace tessera {
namespace explain {

namespace {

const char* const kHelp =
    "usage: explain pipeline --stages=K --micro-batches=M [--schedule=gpipe|1f1b|interleaved|zb-h1|zb-h2[,...]]\n"
    "                        [--chunks=v] [--backward-ratio=R] [--weight-ratio=R] [--json] [--plot=FILE.svg]\n"
    "The schedule's grid (stages down, time slots across), peak micro-batches in flight per stage and\n"
    "the bubble beside (K-1)/(vM+K-1).\n"
    "  --stages=K          pipeline stages (default 4)\n"
    "  --micro-batches=M   micro-batches per batch (default 8)\n"
    "  --schedule=S[,S..]  gpipe | 1f1b (default) | interleaved | zb-h1 | zb-h2; a list (1f1b,zb-h1,zb-h2)\n"
    "                      explains each in turn and stacks their grids in one picture, each\n"
    "                      titled with its bubble, on one clock\n"
    "  --chunks=v          model chunks per rank (interleaved; default 2 there, else 1)\n"
    "  --backward-ratio=R  the whole backward's time over the forward's: adds the timing model's\n"
    "                      bubble, and the picture draws B R times as wide as F\n"
    "  --weight-ratio=R    the W part of it (zero-bubble lists; default R/2)\n"
    "  --json              one JSON object per line: each computation (schedule, stage, action,\n"
    "                      micro-batch, chunk, start, duration), then a summary per schedule\n"
    "                      (bubble, peak in flight)\n"
    "  --plot=FILE.svg     the grid on the clock as an SVG picture\n";

// One schedule: its text (or --json lines, each naming the schedule) and its panel of the picture,
// titled with its bubble on the picture's clock.
GridPanel explain_schedule(pipeline::ScheduleKind kind, int stages, int microbatches, int chunks,
                           bool timed, double backward_ratio, double weight_ratio, bool json) {
  const auto lists = pipeline::make_schedules(kind, stages, microbatches, chunks);
  const bool split = pipeline::splits_backward(lists[0]);
  // Without ratios, every computation takes one slot, as in the text grid.
  const pipeline::StageTimes times = timed ? pipeline::StageTimes{1, backward_ratio, weight_ratio}
                                           : pipeline::StageTimes{1, split ? 2.0 : 1.0, split ? 1.0 : 0.0};
  if (!json) {
    std::fputs(pipeline::explain(kind, stages, microbatches, chunks).c_str(), stdout);
    if (timed) {
      std::fputs(pipeline::explain_timing(kind, stages, microbatches, chunks, times).c_str(), stdout);
    }
  }
  const std::vector<TimedCell> cells = timed_cells(lists, chunks, times);
  const pipeline::ValidationReport report =
      pipeline::validate(lists, microbatches, chunks, pipeline::transport_for(kind));
  std::vector<int> peak;
  for (const auto& s : report.stage) peak.push_back(s.peak_in_flight);
  const pipeline::TimedStep step =
      pipeline::play_timed(lists, chunks, std::vector<pipeline::StageTimes>(stages, times));
  if (json) {
    double makespan = 0;
    for (const TimedCell& c : cells) {
      makespan = std::max(makespan, c.start + c.duration);
      const std::string action = pipeline::to_string(c.action, false);
      std::printf("%s\n", json::Object(kJsonLine)
                              .add("schedule", pipeline::schedule_name(kind))
                              .add("stage", c.stage)
                              .add("action", action.substr(0, 1))
                              .add("microbatch", c.action.microbatch)
                              .add("chunk", c.action.chunk)
                              .add("start", c.start)
                              .add("duration", c.duration)
                              .str()
                              .c_str());
    }
    std::printf("%s\n", json::Object(kJsonLine)
                            .add("schedule", pipeline::schedule_name(kind))
                            .add("stages", stages)
                            .add("microbatches", microbatches)
                            .add("chunks", chunks)
                            .add("forward", times.forward)
                            .add("backward", times.backward)
                            .add("weight", times.weight)
                            .add("makespan", makespan)
                            .add("timing_model_makespan", step.makespan)
                            .add("bubble_theory", report.bubble_theory())
                            .add("bubble_simulated_slots", report.bubble_simulated())
                            .add("bubble_timed", step.bottleneck_idle())
                            .add("peak_in_flight", std::vector<int64_t>(peak.begin(), peak.end()))
                            .str()
                            .c_str());
  }
  char title[240];
  int n = std::snprintf(title, sizeof(title), "%s  K=%d M=%d v=%d  F=1 B=%g",
                        pipeline::schedule_name(kind), stages, microbatches, chunks,
                        split ? times.backward - times.weight : times.backward);
  if (split) n += std::snprintf(title + n, sizeof(title) - n, " W=%g", times.weight);
  std::snprintf(title + n, sizeof(title) - n, ": bubble %.3f", step.bottleneck_idle());
  return GridPanel{cells, stages, chunks > 1, title, peak};
}

}  // namespace

int pipeline_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const int stages = static_cast<int>(flags.integer("stages", 4, 1));
  const int microbatches = static_cast<int>(flags.integer("micro-batches", 8, 1));
  std::vector<pipeline::ScheduleKind> kinds;
  for (const std::string& name : flags.texts("schedule", "1f1b")) {
    kinds.push_back(parsed("schedule", name, pipeline::parse_schedule));
  }
  const bool chunks_given = flags.has("chunks");
  const int chunks_flag = static_cast<int>(flags.integer("chunks", 2, 1));
  double backward_ratio = flags.number("backward-ratio", -1, 0);
  double weight_ratio = flags.number("weight-ratio", -1, 0);
  const bool json = flags.boolean("json");
  const std::string plot = flags.text("plot", "");
  flags.check_all_used("pipeline");
  if (!plot.empty()) check_plot_path(plot);

  const bool timed = backward_ratio >= 0 || weight_ratio >= 0;
  if (timed) {
    if (backward_ratio < 0) backward_ratio = 2;
    if (weight_ratio < 0) weight_ratio = backward_ratio / 2;
    TS_CHECK(weight_ratio <= backward_ratio, "--weight-ratio=", weight_ratio,
             " is more than the whole backward, --backward-ratio=", backward_ratio);
  }
  std::vector<GridPanel> panels;
  for (pipeline::ScheduleKind kind : kinds) {
    // --chunks is the interleaved schedule's; alone, any schedule takes it (and says if it can't).
    const bool interleaved = kind == pipeline::ScheduleKind::kInterleaved;
    const int chunks = interleaved ? chunks_flag : chunks_given && kinds.size() == 1 ? chunks_flag : 1;
    panels.push_back(explain_schedule(kind, stages, microbatches, chunks, timed, backward_ratio,
                                      weight_ratio, json));
  }
  if (!plot.empty()) {
    std::ofstream out(plot);
    TS_CHECK(out.good(), "--plot=", plot, ": cannot write the file");
    out << pipeline_svg(panels);
    TS_CHECK(out.good(), "--plot=", plot, ": writing failed");
    std::fprintf(stderr, "explain: wrote %s\n", plot.c_str());
  }
  return 0;
}

}  // namespace explain
}  // namespace tessera
