// The models the tools know by name, built as tools/train builds them, and their ModelProfile
// (cost/model_profile.h) read off the real model: parameters() of each layer of the Sequential,
// each layer's output size from one forward of one example, and, when asked, each layer's
// forward + backward time on this machine (pipeline/balance.h's profile_layer_times).
//
//   names: logistic, mlp (784-256-10, tools/train's), resnet20, resnet32, resnet56 (CIFAR-style),
//          resnet18, resnet34, resnet50 (ImageNet-style), gpt-tiny, gpt-nano, gpt2 (models/gpt.h)
//   inputs: fashion-mnist (1 x 28 x 28, 10 classes; what tools/train trains), imagenet
//           (3 x 224 x 224, 1000 classes; ResNet-50's published figures are for this), text
//           (the GPTs': windows of seq_len token ids of GPT-2's BPE, 50257 tokens, or of bytes,
//           256; an "example" is one window)
//
// Times. profile_layer_times measures a layer's forward and backward together; the profile
// splits it one third forward, two thirds backward (a backward computes two products per
// forward one: the input's and the weights' gradients). A total measured elsewhere (a GPU's)
// can replace the measurement: scale_compute_time() keeps the layers' shares of this machine's
// profile and sets their sum, set_layer_times() sets each layer's time outright.
//
// Tensor parallelism as tools/train applies it: the MLP's fc1 column-parallel and fc2
// row-parallel (Megatron's block: fc2's bias stays whole), a GPT as Megatron splits it
// (dist/tensor_parallel/gpt_plan.h: c_attn and c_fc by columns, the two c_proj by rows, their
// biases whole; wte by vocabulary rows, the tied lm_head's logits and the loss over them split),
// the other models' classifier class-parallel (its weight and bias split by class).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cost/model_profile.h"
#include "cost/precision.h"
#include "models/gpt.h"
#include "nn/sequential.h"
#include "optim/optimizer.h"

namespace tessera {
namespace cost {

struct ModelInput {
  int64_t channels = 1, image_size = 28, classes = 10;
  std::string name = "fashion-mnist";
  // Text: windows of seq_len token ids from a vocabulary of `vocab` (0 for images).
  int64_t seq_len = 0, vocab = 0;
  bool text() const { return seq_len > 0; }
  // A GPT's positions (wpe's rows; 0: the model's own context) and what its blocks recompute
  // in backward: how the model is built to train on this input.
  int64_t context = 0;
  models::Recompute recompute;
};
// fashion-mnist | imagenet | text (GPT-2's BPE, windows of 64 tokens: tools/train's defaults)
ModelInput parse_model_input(const std::string& name);
const std::vector<std::string>& model_names();
bool is_language_model(const std::string& name);  // gpt-*

// The GPT `name` names, built for `input` (its vocabulary, context and recomputation); an
// error when a window does not fit the context.
models::GPTConfig gpt_config(const std::string& name, const ModelInput& input);

// An error names the model otherwise, or a model given the other kind of input (a GPT reads text).
std::shared_ptr<nn::Sequential> build_model(const std::string& name, const ModelInput& input);
// `batch` examples of the input's shape, the same on every call: images normal (seed 0), text
// token ids [batch, seq_len] (i64) spread over the vocabulary.
Tensor example_batch(const ModelInput& input, int64_t batch);
// The training loss of `output` (the model's, on example_batch) against fixed targets: images'
// cross-entropy against class 0, text's models::lm_loss (against the window's own ids).
Variable example_loss(const ModelInput& input, const Variable& output, int64_t batch);
// The optimizer `setup` names over `parameters`: Adam (lr 1e-3) or SGD with momentum 0.9 (lr
// 0.01), the moments tools/train's defaults keep (8 and 4 bytes per parameter).
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainingSetup& setup,
                                                 std::vector<Variable> parameters);

// Parameters, output sizes and tensor-parallel figures of `model` (built by build_model(name,
// input)), for a batch of `batch` per rank; no times yet.
ModelProfile describe_model(const std::string& name, nn::Sequential& model, const ModelInput& input,
                            int64_t batch);

// Times every layer's forward + backward of `batch` examples, `repeats` times after a warm-up,
// and splits each 1:2 between forward and backward.
void measure_layer_times(nn::Sequential& model, const ModelInput& input, int64_t batch, int repeats,
                         ModelProfile* profile);
// A whole training step of `model` at the profile's batch (forward, cross-entropy, backward and
// an optimizer step as `setup` says: SGD with momentum or Adam), the median of `repeats` after a
// warm-up, less the layers' measured times: the profile's step_overhead_seconds (>= 0). Steps
// the model's parameters (a model built for profiling). Needs the layer times first.
void measure_step_overhead(nn::Sequential& model, const ModelInput& input, const TrainingSetup& setup,
                           int repeats, ModelProfile* profile);
// The profile's times scaled so forward + backward add up to `seconds` (the layers keep their
// shares); the profile must have times.
void scale_compute_time(ModelProfile* profile, double seconds, const std::string& source);
// One time per layer (forward + backward), split 1:2.
void set_layer_times(ModelProfile* profile, const std::vector<double>& seconds, const std::string& source);

}  // namespace cost
}  // namespace tessera
