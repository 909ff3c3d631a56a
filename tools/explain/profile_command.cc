// explain profile: measures a model's per-layer times on this machine and prints them as a
// stored profile (cost/stored_profile.h), to be kept in the repository:
//
//   bazel-bin/tools/explain profile --model=resnet20 --repeats=3 > cost/profiles/resnet20-fashion-mnist.json
//
// explain scaling then uses it (compiled in) instead of timing the layers on every run.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "cost/stored_profile.h"
#include "tools/explain/commands.h"
#include "tools/explain/model_flags.h"

namespace tessera {
namespace explain {

namespace {

const char* const kHelp =
    "usage: explain profile --model=M [--data=D] [--batch=B] [--repeats=r] > cost/profiles/M-D.json\n"
    "Times each layer's forward + backward of --batch examples (the fastest of --repeats passes,\n"
    "each after a warm-up: the one other load disturbed least) and a whole training step (the\n"
    "step overhead, less the layers; its fastest too), and prints them as JSON with this\n"
    "machine's CPU and today's date: the stored profile explain scaling uses unless --measure.\n"
    "  --repeats=r        timed passes (default 5)\n";

}  // namespace

int profile_command(Flags& flags) {
  if (flags.boolean("help")) {
    std::printf("%s%s", kHelp, kModelFlagsHelp);
    return 0;
  }
  const int repeats = static_cast<int>(flags.integer("repeats", 5, 1));
  ModelChoice c = read_model_flags(flags);
  flags.check_all_used("profile");
  // Each layer's fastest of `repeats` passes: on a shared machine the other load only ever adds
  // time, so the minimum is the measurement least disturbed by it.
  std::vector<double> fastest;
  for (int r = 0; r < repeats; ++r) {
    cost::measure_layer_times(*c.model, c.input, c.batch, 1, &c.profile);
    for (size_t i = 0; i < c.profile.layers.size(); ++i) {
      const cost::LayerProfile& l = c.profile.layers[i];
      const double s = l.forward_seconds + l.backward_seconds;
      if (r == 0) fastest.push_back(s);
      fastest[i] = std::min(fastest[i], s);
    }
  }
  cost::set_layer_times(&c.profile, fastest, "measured");
  double overhead = 0;
  for (int r = 0; r < repeats; ++r) {
    cost::measure_step_overhead(*c.model, c.input, c.setup, 1, &c.profile);
    overhead = r == 0 ? c.profile.step_overhead_seconds : std::min(overhead, c.profile.step_overhead_seconds);
  }
  c.profile.step_overhead_seconds = overhead;
  std::string command = "explain profile --model=" + c.name + " --data=" + c.input.name +
                        " --batch=" + std::to_string(c.batch) + " --optimizer=" +
                        cost::optimizer_name(c.setup.optimizer) + " --repeats=" + std::to_string(repeats);
  if (c.input.text()) {
    command += " --seq-len=" + std::to_string(c.input.seq_len) +
               (c.input.vocab == 256 ? " --tokenizer=byte" : "");
  }
  const cost::StoredProfile stored =
      cost::make_stored_profile(c.name, c.input, c.setup.optimizer, c.profile, repeats, command);
  std::fputs(cost::stored_profile_json(stored).c_str(), stdout);
  std::fprintf(stderr, "explain profile: %s (keep it as %s)\n", stored.provenance().c_str(),
               stored.path.c_str());
  return 0;
}

}  // namespace explain
}  // namespace tessera
