// StoredProfile: a model's per-layer times, measured once on a named machine and kept in the
// repository (cost/profiles/<model>-<data>.json), so that a what-if figure made from them is the
// same every time it is made. Timing the layers on a loaded, shared machine gives a different
// answer on every run (1F1B at 8 ranks came out 0.516, 0.411 and 0.432 in three runs of the same
// command); a prediction should change only when its inputs do.
//
//   {"model": "mlp", "data": "fashion-mnist", "seq_len": 0, "vocab": 0, "context": 0,
//    "recompute": "none", "batch": 64, "optimizer": "adam", "repeats": 5, "machine": "AMD EPYC (2 cores)",
//    "date": "2026-12-06", "command": "explain profile --model=mlp --repeats=5",
//    "step_overhead_seconds": 0.0009,
//    "layers": [{"name": "flatten", "seconds": 0.00008}, {"name": "fc1", "seconds": 0.0036}, ...]}
//
// A layer's "seconds" is its forward + backward of `batch` examples (the median pass's mean over
// `repeats`, as measure_layer_times takes it); applied to another batch the times scale in
// proportion (the assumption every batch-size what-if makes). The files are compiled into the
// binary (cost/BUILD's stored_profiles genrule): explain finds them from any directory.
// `explain profile --model=M [--data=D] > cost/profiles/M-D.json` measures one again.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cost/model_catalog.h"
#include "cost/model_profile.h"

namespace tessera {
namespace cost {

struct StoredProfile {
  std::string path;  // in the repository: "cost/profiles/mlp-fashion-mnist.json"
  std::string model, data;
  int64_t seq_len = 0, vocab = 0, context = 0;  // a GPT's text input (0 for images)
  std::string recompute = "none";
  int64_t batch = 1;
  std::string optimizer = "adam";  // the step overhead's (cost/precision.h's names)
  int repeats = 1;
  std::string machine, date, command;
  double step_overhead_seconds = 0;  // at `batch`, with `optimizer`
  std::vector<std::pair<std::string, double>> layers;  // name, forward + backward seconds

  // "mlp on fashion-mnist at batch 64, measured on AMD EPYC (2 cores) on 2026-12-06"
  std::string provenance() const;
};

// The file's text; an error names `path` and the field that is missing or of the wrong kind.
StoredProfile parse_stored_profile(const std::string& text, const std::string& path);
std::string stored_profile_json(const StoredProfile& profile);

// The stored profile measured for `model` on `input`, or nullptr: every cost/profiles/*.json
// compiled in, matched on model, data and (text) seq_len, vocab, context and recomputation.
const StoredProfile* find_stored_profile(const std::string& model, const ModelInput& input);
const std::vector<StoredProfile>& stored_profiles();
// Where a new one of `model` on `input` goes: "cost/profiles/<model>-<data>.json" (a text input
// other than the default window adds "-s<seq_len>-v<vocab>").
std::string stored_profile_path(const std::string& model, const ModelInput& input);

// Sets `profile`'s layer times from `stored` (scaled from stored.batch to profile->batch) and,
// when the batch and `optimizer` agree, its step overhead (0 otherwise); an error names the layer where the model's layers
// and the stored ones differ (the model changed since it was measured: measure it again).
void apply_stored_profile(const StoredProfile& stored, OptimizerKind optimizer, ModelProfile* profile);

// A profile of `profile`'s current times (from measure_layer_times / measure_step_overhead),
// for `model` on `input`, stamped with this machine and today's date (UTC).
StoredProfile make_stored_profile(const std::string& model, const ModelInput& input,
                                  OptimizerKind optimizer, const ModelProfile& profile, int repeats,
                                  const std::string& command);

// "AMD EPYC (2 cores)": /proc/cpuinfo's model name and the number of processors ("unknown CPU"
// where there is none).
std::string this_machine();
std::string today_utc();  // "2026-12-06"

}  // namespace cost
}  // namespace tessera
