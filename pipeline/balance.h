// Balance: how many consecutive layers of a Sequential each pipeline stage gets.
//
//   layers   [ conv | block | block | block | block | block | block | pool | fc ]
//   balance  [   3          |     3               |          3                 ]  stage 0, 1, 2
//
// A pipeline runs as fast as its slowest stage, so the cut should even out the stages' cost.
// Four ways, as in torchgpipe:
//   * uniform:         layer counts that differ by at most one (earlier stages get the extra);
//   * by parameters:   cost of a layer = its parameter count (a proxy for memory);
//   * by time:         cost = measured forward + backward time of one micro-batch through the
//                      layer (torchgpipe's balance_by_time), profiled on this process;
//   * explicit:        a list like 3,4,3, checked against the layer count.
// Costed balances cut the layer list into K contiguous runs minimizing the largest run's cost,
// then, among those cuts, the sum of the runs' squared costs (so no stage is left idle next to
// the largest); dynamic programming over cut points; every stage gets at least one layer.
#pragma once

#include <string>
#include <vector>

#include "nn/sequential.h"
#include "tensor/tensor.h"

namespace tessera {
namespace pipeline {

// Errors name the values: no stages, more stages than layers, a zero entry, a wrong sum.
void check_balance(const std::vector<int>& balance, int layers);

std::vector<int> balance_uniform(int layers, int stages);
// Contiguous runs of `costs` (one per layer, >= 0) into `stages` parts, minimizing the largest
// part's sum, then the sum of squared part sums; ties go to the cut that puts more layers early.
std::vector<int> balance_by_cost(const std::vector<double>& costs, int stages);
// balance_by_cost over blocks (a layer with parameters and the parameterless layers that follow
// it), so no stage is left with only ReLUs and pooling to train, whatever the costs; by layers
// when the model has fewer such blocks than stages.
std::vector<int> balance_with_parameters_in_every_stage(const nn::Sequential& model,
                                                        const std::vector<double>& costs,
                                                        int stages);
// By parameter count (in blocks, as above).
std::vector<int> balance_by_parameters(const nn::Sequential& model, int stages);
// The dtype a model's inputs have: that of its f16/bf16 parameters if it has any (to(kF16)
// leaves BatchNorm in f32, and BatchNorm takes half inputs), else of its first floating-point
// parameter, else `otherwise`.
DType model_input_dtype(const nn::Sequential& model, DType otherwise = kF32);
// Times forward + backward of `sample` (one micro-batch) through each layer, `repeats` times
// after one warm-up pass. A floating-point sample is converted to model_input_dtype() first, so
// an f16 model is profiled in f16 whatever dtype the caller built its sample in. Parameters'
// gradients (the same tensors, bit for bit; none where there was none) and buffers (BatchNorm's
// running statistics) are restored afterwards, so profiling leaves the model as it was.
std::vector<double> profile_layer_times(nn::Sequential& model, const Tensor& sample, int repeats = 3);
// By measured time (in blocks, as above).
std::vector<int> balance_by_time(nn::Sequential& model, int stages, const Tensor& sample,
                                 int repeats = 3);
// "3,4,3" -> {3, 4, 3}; anything else is an error quoting the text.
std::vector<int> parse_balance(const std::string& text);
// {3, 4, 3} -> "3,4,3": a balance as PipeOptions().balance() takes it, to print a cut (one found
// by time, say) and to make the same cut again without profiling.
std::string balance_spec(const std::vector<int>& balance);

}  // namespace pipeline
}  // namespace tessera
