// explain report: one self-contained HTML page for a run (html_report.h) from the files it wrote
// into its directory (run_directory.h): the page a lecturer sends instead of six pictures.
//
//   mpirun -np 2 train --model=mlp --strategy=zero2 --metrics=run/metrics.jsonl \
//       --trace=run/trace.json > run/stdout.txt
//   explain report run --html=run.html
#include <cstdio>
#include <fstream>

#include "tensor/check.h"
#include "tools/explain/commands.h"
#include "tools/explain/html_report.h"
#include "tools/explain/json_line.h"
#include "tools/explain/run_directory.h"

namespace tessera {
namespace explain {

namespace {

const char* const kHelp =
    "usage: explain report RUN --html=FILE.html [--json]\n"
    "One self-contained HTML page (inline SVG, no scripts, nothing fetched) from the files a run\n"
    "wrote into the directory RUN: the loss and accuracy curves (train --metrics=RUN/....jsonl),\n"
    "the last traced step of every rank (--trace=RUN/....json), memory per rank measured beside\n"
    "predicted and bytes per collective (the final JSON line: train ... > RUN/stdout.txt), and the\n"
    "run's flags (RUN/command.txt if saved, and the final JSON's settings). A section whose file\n"
    "is missing says which flag writes it.\n"
    "  --run=RUN          the directory (or give it first, as above)\n"
    "  --html=FILE.html   the page to write (required)\n"
    "  --json             one JSON object: the files found and the page written\n";

}  // namespace

int report_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  const std::string dir = flags.required("run");
  const std::string html = flags.required("html");
  const bool json = flags.boolean("json");
  flags.check_all_used("report");
  TS_CHECK(html.size() > 5 && html.compare(html.size() - 5, 5, ".html") == 0, "--html=", html,
           ": expected a file name ending in .html");
  const RunDirectory run = read_run_directory(dir);
  const std::string page = run_report_html(run);
  std::ofstream out(html);
  TS_CHECK(out.good(), "--html=", html, ": cannot write the file");
  out << page;
  TS_CHECK(out.good(), "--html=", html, ": writing failed");
  if (json) {
    std::printf("%s\n", json::Object(kJsonLine)
                            .add("run", dir)
                            .add("metrics", run.metrics)
                            .add("traces", run.traces)
                            .add("summary", run.summary ? run.summary->path : "")
                            .add("command", run.command)
                            .add("html", html)
                            .add("html_bytes", static_cast<int64_t>(page.size()))
                            .str()
                            .c_str());
  } else {
    std::printf("run %s: %zu metrics file(s), %zu trace(s), %s; wrote %s (%zu bytes)\n", dir.c_str(),
                run.metrics.size(), run.traces.size(),
                run.summary ? ("final JSON in " + run.summary->path).c_str() : "no final JSON line",
                html.c_str(), page.size());
  }
  return 0;
}

}  // namespace explain
}  // namespace tessera
