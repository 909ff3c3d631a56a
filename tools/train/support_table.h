// The support table: what combines with what, as data. A run varies along a few axes (the
// strategy, --amp, --param-dtype, --compression and error feedback, checkpoints and resume,
// tensor parallelism, the pipeline's schedule and data parallelism, models with BatchNorm,
// hierarchical collectives, tools/launch's restarts); every combination is supported unless a
// refusal of this table matches it, and each refusal says why. Nothing else decides what
// combines:
//
//   support_table ──> check_support        the flag checker: exit 2 naming the flags and why
//                                          (the train tool's, and tools/launch's for restarts)
//                 ──> composition_markdown docs/COMPOSITION.md (`train --support-table`)
//                 ──> composition_test     every pair of supported values run against its
//                                          reference (tests/tools/composition_test.cc)
//
// A cell of the table is one strategy and one value of another axis. It reads "refused" when a
// refusal names nothing but those two (zero3 x --checkpoint-format=sharded is allowed;
// local-sgd x --param-dtype=bf16 is not), "n/a" when the axis's flag does not apply to the
// strategy (the flag table's only_with: --pipeline-schedule is the pipeline's), and otherwise
// "yes", with a note for each refusal that needs a third value (pipeline x --dp-strategy=zero2
// is refused only with a zero-bubble schedule on a BatchNorm model).
//
// Megatron-LM checks its arguments in one validate_args function; here the rules are rows, so
// the tests and the docs are generated from the same rows the checker reads.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tools/train/flags.h"

namespace tessera {
namespace train {

// "axis is one of values".
struct Condition {
  std::string axis;
  std::vector<std::string> values;
};

// One axis a run varies along.
struct Axis {
  std::string name;  // "compression": as the flag, without "--"
  std::string flag;  // the flag that sets it ("" for the model's kind: --model)
  std::vector<std::string> values;  // "none", "fp16", ..., "topk", ...: kinds, not parameters
  // The value a configuration has on this axis ("topk" for --compression=topk:0.05).
  std::function<std::string(const Config&)> value_of;
  // The flags that give this axis `value` in a generated test run ("--compression=topk:0.05").
  std::function<std::string(const std::string& value)> flags_for;
  // What a message shows for a configuration: the flag as given ("--compression=topk:0.05").
  std::function<std::string(const Config&)> shown;
  // The axis means something only where these hold (error feedback needs a compressor); where
  // they do not, its value is values[0] and no flag sets it. Beside this, the flag table's
  // only_with says which strategies take the axis's flag.
  std::vector<Condition> applies_when;
  // Whether a generated run gives the flag for the first value too (error feedback's default
  // depends on the compressor; a run always names its model).
  bool always_given = false;
};

// A combination that does not work: every condition holds. `why` completes "X with Y: ...".
struct Refusal {
  std::vector<Condition> when;
  std::string why;
};

// What a supported combination does not carry over: a restart on fewer ranks starts some
// per-rank state fresh. Where every condition holds, the run prints `said` (in its message
// saying so) and the rest resumes as a restart on the same ranks does.
struct Reset {
  std::vector<Condition> when;
  std::string what;  // what starts fresh, and from what
  std::string said;  // a phrase of the message the run prints
};

// The strategies, the first axis.
const Axis& strategy_axis();
// Every axis, the strategy first.
const std::vector<Axis>& support_axes();
const Axis& support_axis(const std::string& name);
// Every refusal.
const std::vector<Refusal>& support_refusals();

// Every reset.
const std::vector<Reset>& support_resets();

// An assignment of a value to some axes (a configuration's, or a partial one).
using Assignment = std::vector<std::pair<std::string, std::string>>;
Assignment assignment_of(const Config& config);
// The value `values` give `axis`, or "" when they give none.
std::string value_in(const Assignment& values, const std::string& axis);
// Whether the refusal's every condition holds in `values` (axes it does not assign do not hold).
bool matches(const Refusal& refusal, const Assignment& values);
// The first refusal matching `values`, or null.
const Refusal* refusal_for(const Assignment& values);
// Whether `axis` applies under `values` (which assign the strategy): the flag table's only_with
// for its flag, and the axis's applies_when.
bool applies(const Axis& axis, const Assignment& values);

// Throws FlagError naming the flags of the first matching refusal, their values and why.
void check_support(const Config& config);
// The resets whose every condition holds in `values`.
std::vector<const Reset*> resets_for(const Assignment& values);

// The reference a strategy's runs are compared against in the composition tests.
std::string reference_of(const std::string& strategy);

// docs/COMPOSITION.md: the table per strategy and the refusals between other axes.
std::string composition_markdown();

}  // namespace train
}  // namespace tessera
