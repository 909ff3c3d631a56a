#include "pipeline/balance.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>

#include "autograd/engine.h"
#include "tensor/check.h"

namespace tessera {
namespace pipeline {

void check_balance(const std::vector<int>& balance, int layers) {
  TS_CHECK(!balance.empty(), "pipeline balance: no stages");
  TS_CHECK(static_cast<int>(balance.size()) <= layers, "pipeline balance: ", balance.size(),
           " stages but the model has only ", layers, " layers (a stage needs at least one)");
  for (size_t s = 0; s < balance.size(); ++s) {
    TS_CHECK(balance[s] > 0, "pipeline balance ", balance, ": stage ", s, " gets ", balance[s],
             " layers; every stage needs at least one");
  }
  const int total = std::accumulate(balance.begin(), balance.end(), 0);
  TS_CHECK(total == layers, "pipeline balance ", balance, " sums to ", total,
           " but the model has ", layers, " layers");
}

std::vector<int> balance_uniform(int layers, int stages) {
  TS_CHECK(stages >= 1, "pipeline balance: the number of stages must be at least 1, got ", stages);
  TS_CHECK(stages <= layers, "pipeline balance: ", stages, " stages but the model has only ",
           layers, " layers (a stage needs at least one)");
  std::vector<int> out(stages, layers / stages);
  for (int s = 0; s < layers % stages; ++s) ++out[s];
  return out;
}

std::vector<int> balance_by_cost(const std::vector<double>& costs, int stages) {
  const int L = static_cast<int>(costs.size());
  TS_CHECK(stages >= 1, "pipeline balance: the number of stages must be at least 1, got ", stages);
  TS_CHECK(stages <= L, "pipeline balance: ", stages, " stages but the model has only ", L,
           " layers (a stage needs at least one)");
  std::vector<double> prefix(L + 1, 0);
  for (int i = 0; i < L; ++i) prefix[i + 1] = prefix[i] + costs[i];
  const double inf = std::numeric_limits<double>::infinity();
  // Two passes of the same dynamic program over "the first i layers form k stages", the
  // last stage being layers j..i-1: first the smallest possible largest stage, then, among the
  // cuts that keep every stage within it, the smallest sum of squared stage costs (so a cheap
  // stage is not left with nothing when the largest is fixed elsewhere). The last stage's start
  // is scanned from the right, so on ties earlier stages keep more layers.
  auto solve = [&](bool squares, double limit, std::vector<std::vector<int>>& cut) {
    std::vector<std::vector<double>> best(stages + 1, std::vector<double>(L + 1, inf));
    cut.assign(stages + 1, std::vector<int>(L + 1, 0));
    best[0][0] = 0;
    for (int k = 1; k <= stages; ++k) {
      for (int i = k; i <= L; ++i) {
        for (int j = i - 1; j >= k - 1; --j) {
          const double c = prefix[i] - prefix[j];
          if (squares && c > limit) continue;
          const double value = squares ? best[k - 1][j] + c * c : std::max(best[k - 1][j], c);
          if (value < best[k][i]) best[k][i] = value, cut[k][i] = j;
        }
      }
    }
    return best[stages][L];
  };
  std::vector<std::vector<int>> cut;
  const double largest = solve(false, 0, cut);
  solve(true, largest * (1 + 1e-9), cut);
  std::vector<int> out(stages);
  for (int k = stages, i = L; k >= 1; --k) {
    out[k - 1] = i - cut[k][i];
    i = cut[k][i];
  }
  return out;
}

std::vector<int> balance_with_parameters_in_every_stage(const nn::Sequential& model,
                                                        const std::vector<double>& costs,
                                                        int stages) {
  // Blocks: a layer with parameters and the parameterless layers after it (ReLU, pooling);
  // parameterless layers before the first such layer join the first block.
  std::vector<int> block_sizes;
  std::vector<double> block_costs;
  bool open_block_has_parameters = false;
  for (size_t i = 0; i < model.size(); ++i) {
    const bool has_parameters = model[i]->num_parameters() > 0;
    if (block_sizes.empty() || (has_parameters && open_block_has_parameters)) {
      block_sizes.push_back(0);
      block_costs.push_back(0);
      open_block_has_parameters = false;
    }
    ++block_sizes.back();
    block_costs.back() += costs[i];
    open_block_has_parameters = open_block_has_parameters || has_parameters;
  }
  // Too few blocks: cut by layers (Pipe then names the stage that holds no parameters).
  if (static_cast<int>(block_sizes.size()) < stages) return balance_by_cost(costs, stages);
  std::vector<int> balance;
  size_t block = 0;
  for (int blocks_in_stage : balance_by_cost(block_costs, stages)) {
    int layers = 0;
    for (int k = 0; k < blocks_in_stage; ++k) layers += block_sizes[block++];
    balance.push_back(layers);
  }
  return balance;
}

std::vector<int> balance_by_parameters(const nn::Sequential& model, int stages) {
  std::vector<double> costs;
  for (size_t i = 0; i < model.size(); ++i) costs.push_back(static_cast<double>(model[i]->num_parameters()));
  return balance_with_parameters_in_every_stage(model, costs, stages);
}

DType model_input_dtype(const nn::Sequential& model, DType otherwise) {
  // Module::to(kF16 / kBF16) leaves BatchNorm in f32, and BatchNorm takes half inputs: a model
  // with half-precision parameters takes inputs of that dtype whatever its first layer is.
  DType first = otherwise;
  bool found = false;
  for (const Variable& p : model.parameters()) {
    if (is_half(p.dtype())) return p.dtype();
    if (!found && is_floating(p.dtype())) first = p.dtype(), found = true;
  }
  return first;
}

std::vector<double> profile_layer_times(nn::Sequential& model, const Tensor& sample, int repeats) {
  TS_CHECK(repeats >= 1, "profile_layer_times: repeats must be at least 1, got ", repeats);
  TS_CHECK(sample.defined(), "profile_layer_times: the sample micro-batch is undefined");
  // Profile in the dtype the model's batches will have (an f32 sample of an f16 model would
  // not even run); integer samples (token ids) are what they are.
  const Tensor input =
      is_floating(sample.dtype()) ? sample.to(model_input_dtype(model, sample.dtype())) : sample;
  // Backward accumulates into a parameter's grad in place, so the gradients a caller holds are
  // taken off the parameters while profiling (its backwards make fresh ones) and put back, the
  // same tensors untouched, afterwards.
  std::vector<std::pair<Variable, Tensor>> grads, buffers;
  for (const Variable& p : model.parameters()) {
    grads.push_back({p, p.grad()});
    p.zero_grad(/*set_to_none=*/true);
  }
  for (const Variable& b : model.buffers()) buffers.push_back({b, b.data().clone()});
  using Clock = std::chrono::steady_clock;
  std::vector<double> seconds(model.size(), 0);
  for (int r = 0; r <= repeats; ++r) {  // pass 0 warms up (allocator, caches)
    Tensor x = input;
    for (size_t i = 0; i < model.size(); ++i) {
      const auto start = Clock::now();
      // Token ids (a GPT's first layer) take no gradient; every floating-point input does.
      const Variable in(x, /*requires_grad=*/is_floating(x.dtype()));
      const Variable out = model[i]->forward(in);
      if (out.requires_grad()) backward({out}, {ones_like(out.data())});
      if (r > 0) seconds[i] += std::chrono::duration<double>(Clock::now() - start).count();
      x = out.data();
    }
  }
  for (auto& [p, g] : grads) {
    if (g.defined()) p.set_grad(g); else p.zero_grad();
  }
  for (auto& [b, data] : buffers) Tensor(b.data()).copy_(data);
  return seconds;
}

std::vector<int> balance_by_time(nn::Sequential& model, int stages, const Tensor& sample,
                                 int repeats) {
  return balance_with_parameters_in_every_stage(model, profile_layer_times(model, sample, repeats),
                                                stages);
}

std::vector<int> parse_balance(const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    TS_CHECK(!item.empty() && item.find_first_not_of("0123456789") == std::string::npos &&
                 item.size() < 9,
             "pipeline balance '", text, "' is not a list of layer counts like 3,4,3");
    out.push_back(std::stoi(item));
    at = comma + 1;
  }
  return out;
}

std::string balance_spec(const std::vector<int>& balance) {
  std::string out;
  for (int n : balance) out += (out.empty() ? "" : ",") + std::to_string(n);
  return out;
}

}  // namespace pipeline
}  // namespace tessera
