// A run's report as one self-contained HTML page (`explain report RUN --html=FILE`): every
// picture inline SVG, the style inline, no script and nothing fetched, so the page can be mailed
// or opened from a file anywhere. Sections, each present when the run wrote what it needs and
// otherwise saying which train flag would have written it:
//
//   the run            model, strategy, ranks, final loss and accuracy (the final JSON line)
//   curves             loss per step and test accuracy per epoch (--metrics; svg_curves.h)
//   step timeline      the last traced step, a lane per rank and thread (--trace; trace_view.h)
//   memory per rank    model states measured beside the formula's, and the peak (the final JSON)
//   bytes per collective  per training step, rank 0's byte ledgers (the final JSON, on N > 1)
//   flags              command.txt, and every setting the final JSON records
#pragma once

#include <string>

#include "tools/explain/run_directory.h"

namespace tessera {
namespace explain {

std::string run_report_html(const RunDirectory& run);

}  // namespace explain
}  // namespace tessera
