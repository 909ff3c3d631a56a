// The flags every model-based subcommand shares: which model, on which input, with which batch,
// precision and optimizer, and where its layer times come from.
//
//   --model=M            logistic|mlp|resnet20|resnet32|resnet56|resnet18|resnet34|resnet50|
//                        gpt-tiny|gpt-nano|gpt2
//   --data=D             fashion-mnist (1x28x28, 10 classes; default) | imagenet (3x224x224, 1000)
//                        | text (a GPT's, its default: windows of --seq-len=T ids of --tokenizer's)
//   --batch=B            examples per rank per step (tools/train's: 128 for ResNets, 16 windows
//                        for a GPT, 64 otherwise)
//   --precision=P        f32 | mixed
//   --optimizer=O        sgd (with momentum) | adam (tools/train's: sgd for ResNets, adam otherwise)
//   (times)              the model's stored profile (cost/stored_profile.h: measured once, on
//                        the machine it names, scaled to the batch), so the same flags give the
//                        same figures; --measure times the layers here and now instead
//   --compute-ms=T       forward + backward of one batch takes T ms (e.g. a GPU's); the layers'
//                        shares are the stored profile's (or --measure's)
//   --layer-ms=a,b,...   forward + backward ms of each layer, given outright
//   --profile-batch=b    --measure's batch (default: the batch, or at most 4 with --compute-ms);
//                        --repeats=r its timed passes (default 1)
#pragma once

#include <memory>
#include <string>

#include "cost/model_catalog.h"
#include "cost/model_profile.h"
#include "cost/precision.h"
#include "tools/explain/flags.h"

namespace tessera {
namespace explain {

struct ModelChoice {
  std::string name;
  cost::ModelInput input;
  int64_t batch = 1;
  cost::TrainingSetup setup;
  std::shared_ptr<nn::Sequential> model;
  cost::ModelProfile profile;  // parameters and sizes; times only after add_times()
};

ModelChoice read_model_flags(Flags& flags);
// Fills the profile's layer times from --layer-ms, or the stored profile, or by measuring here
// (--measure, or no profile stored for this model and input), then scales them to --compute-ms;
// the profile's times_source says which.
void add_times(Flags& flags, ModelChoice& choice);

// "resnet20 on fashion-mnist: psi = 269,434 parameters, 11 layers, batch 128, f32, sgd"
std::string describe(const ModelChoice& choice);
std::string with_commas(int64_t n);

extern const char* const kModelFlagsHelp;
extern const char* const kTimeFlagsHelp;

}  // namespace explain
}  // namespace tessera
