// What a run says about itself on rank 0: before training, what is trained, on what and how;
// after it, the communication per group and, as stdout's last line, one JSON object with the
// run's figures, peak memory and optimizer state gathered from every rank.
#pragma once

#include <string>

#include "tools/train/context.h"
#include "tools/train/data.h"
#include "tools/train/report.h"
#include "tools/train/train_loop.h"

namespace tessera {
namespace train {

// "model logistic (7850 parameters), fashion-mnist: ..." and the precision line.
void print_run_header(const RunContext& run, const Data& data);

// Collective (the gather, and the strategy's own report): the final JSON line on rank 0, "" on
// the other ranks. Prints the communication per group; the caller prints the line, last.
std::string final_json_line(const RunContext& run, const RunTotals& totals,
                            Clock::time_point wall_start);

}  // namespace train
}  // namespace tessera
