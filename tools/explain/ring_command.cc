// explain ring: the lecture's ring all-reduce, step by step, from the schedule ProcessGroupMPI
// runs (dist/ring_schedule.h): per step, the chunk each rank sends right and the one it receives
// from its left, first reduce-scatter (adding what arrives) then all-gather (copying it); the
// bytes each rank sends and the alpha-beta time (cost/collective_time.h), (--plot) the steps
// as lanes, one per rank, and (--buffers) every rank's buffer after each step (ring_buffers.h).
#include <cstdio>
#include <fstream>

#include "cost/collective_time.h"
#include "dist/ring_schedule.h"
#include "tools/explain/commands.h"
#include "tools/explain/gnuplot.h"
#include "tools/explain/json_line.h"
#include "tools/explain/ring_buffers.h"
#include "tools/explain/svg_timeline.h"
#include "tools/explain/table.h"

namespace tessera {
namespace explain {

namespace {

const char* const kHelp =
    "usage: explain ring [--ranks=N] [--megabytes=M] [--latency-us=A] [--bandwidth-gbps=B]\n"
    "                    [--json] [--plot=FILE.svg]\n"
    "A ring all-reduce of M megabytes on N ranks as ProcessGroupMPI runs it: the buffer cut into N\n"
    "chunks; N-1 reduce-scatter steps (each rank sends one chunk right, receives one from the left\n"
    "and adds it), after which rank k holds chunk k summed; N-1 all-gather steps pass the sums on.\n"
    "Each rank sends 2 (N-1)/N M; the time is 2 (N-1) (A + M/(N B)).\n"
    "  --ranks=N           default 4\n"
    "  --megabytes=M       the buffer (default 100)\n"
    "  --latency-us=A      per message (default 5); --bandwidth-gbps=B per link (default 100)\n"
    "  --json              one JSON object per step and rank, then a summary\n"
    "  --plot=FILE.svg     the steps as lanes, one per rank, each box labelled with its chunks\n"
    "  --buffers=FILE.svg  the picture lecturers draw: every rank's buffer after each step, each\n"
    "                      chunk naming whose contributions it holds, an arrow per chunk sent\n"
    "                      (N <= 8)\n";

std::string chunk(int k) { return "c" + std::to_string(k); }

}  // namespace

int ring_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const int n = static_cast<int>(flags.integer("ranks", 4, 2));
  TS_CHECK(n <= 64, "--ranks=", n, ": at most 64 (a step table per rank)");
  const double megabytes = flags.number("megabytes", 100, 1e-9);
  cost::Network network;
  network.inter = cost::Link::from(flags.number("latency-us", 5, 0), flags.number("bandwidth-gbps", 100, 1e-9));
  network.algorithm = cost::Algorithm::kRing;
  const bool json = flags.boolean("json");
  const std::string plot = flags.text("plot", "");
  const std::string buffers = flags.text("buffers", "");
  flags.check_all_used("ring");
  if (!plot.empty()) check_plot_path(plot);
  if (!buffers.empty()) {
    check_plot_path(buffers);
    TS_CHECK(n <= 8, "--buffers=", buffers, ": draws at most 8 ranks' buffers, not --ranks=", n);
  }

  const double bytes = megabytes * 1e6;
  const double step_seconds = network.inter.message_seconds(bytes / n);
  const double total = cost::all_reduce_time(n, bytes, network).seconds;
  std::vector<std::string> lanes;
  for (int r = 0; r < n; ++r) lanes.push_back("rank " + std::to_string(r));
  std::vector<TimelineBox> boxes;
  std::vector<std::string> header = {"step", "pass"};
  for (int r = 0; r < n; ++r) header.push_back("rank " + std::to_string(r) + " sends / receives");
  Table table(header, {});
  for (int s = 0; s < 2 * (n - 1); ++s) {
    const bool scatter = s < n - 1;
    const int pass_step = scatter ? s : s - (n - 1);
    std::vector<std::string> row = {std::to_string(s), scatter ? "reduce-scatter" : "all-gather"};
    for (int r = 0; r < n; ++r) {
      const dist::RingStep step =
          scatter ? dist::reduce_scatter_step(r, n, pass_step) : dist::all_gather_step(r, n, pass_step);
      const std::string what = chunk(step.send_chunk) + " / " + chunk(step.receive_chunk) + (scatter ? " +" : "");
      row.push_back(what);
      boxes.push_back({r, s * step_seconds * 1e3, (s + 1) * step_seconds * 1e3,
                       chunk(step.send_chunk) + ">" + chunk(step.receive_chunk),
                       scatter ? "reduce_scatter" : "all_gather"});
      if (json) {
        std::printf("%s\n", json::Object(kJsonLine)
                                .add("step", s)
                                .add("pass", scatter ? "reduce_scatter" : "all_gather")
                                .add("rank", r)
                                .add("sends_chunk", step.send_chunk)
                                .add("to", (r + 1) % n)
                                .add("receives_chunk", step.receive_chunk)
                                .add("from", (r + n - 1) % n)
                                .str()
                                .c_str());
      }
    }
    table.add(row);
  }
  const double sent = 2.0 * (n - 1) / n * bytes;
  if (json) {
    std::printf("%s\n", json::Object(kJsonLine)
                            .add("summary", "ring")
                            .add("ranks", n)
                            .add("bytes", bytes)
                            .add("bytes_sent_per_rank", sent)
                            .add("steps", static_cast<int64_t>(2 * (n - 1)))
                            .add("step_seconds", step_seconds)
                            .add("seconds", total)
                            .str()
                            .c_str());
  } else {
    std::printf("ring all-reduce of %g MB on %d ranks: chunks c0..c%d of %g MB; rank r sends right "
                "to r+1, receives from r-1 ('+': added into its own copy)\n",
                megabytes, n, n - 1, megabytes / n);
    std::fputs(table.str().c_str(), stdout);
    std::printf("after step %d rank k holds chunk k summed over every rank; after step %d every rank "
                "holds every sum\neach rank sends 2 (N-1)/N x %g MB = %.3f MB; %d steps of a + (M/N)/b "
                "= %.3f ms each: %.3f ms\n",
                n - 2, 2 * n - 3, megabytes, sent / 1e6, 2 * (n - 1), step_seconds * 1e3, total * 1e3);
  }
  if (!plot.empty()) {
    char title[200];
    std::snprintf(title, sizeof(title), "Ring all-reduce of %g MB on %d ranks: reduce-scatter, then all-gather (%.3f ms)",
                  megabytes, n, total * 1e3);
    std::ofstream out(plot);
    TS_CHECK(out.good(), "--plot=", plot, ": cannot write the file");
    out << timeline_svg(lanes, boxes, title);
    TS_CHECK(out.good(), "--plot=", plot, ": writing failed");
    std::fprintf(stderr, "explain: wrote %s\n", plot.c_str());
  }
  if (!buffers.empty()) {
    char title[200];
    std::snprintf(title, sizeof(title), "Ring all-reduce on %d ranks: every rank's buffer after each step "
                  "(%g MB, chunks of %g MB)", n, megabytes, megabytes / n);
    std::ofstream out(buffers);
    TS_CHECK(out.good(), "--buffers=", buffers, ": cannot write the file");
    out << ring_buffers_svg(n, title);
    TS_CHECK(out.good(), "--buffers=", buffers, ": writing failed");
    std::fprintf(stderr, "explain: wrote %s\n", buffers.c_str());
  }
  return 0;
}

}  // namespace explain
}  // namespace tessera
