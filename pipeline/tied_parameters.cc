#include "pipeline/tied_parameters.h"

#include <algorithm>
#include <map>
#include <memory>

#include "dist/work.h"
#include "pipeline/balance.h"
#include "tensor/check.h"
#include "tensor/ops.h"

namespace tessera {
namespace pipeline {
namespace {

// Tags of the holders' messages (the stages' activations and gradients use 7100-7202, p2p.cc).
constexpr int kValueTag = 7300;
constexpr int kGradientTag = 7301;

std::string layer_names(const nn::Sequential& model) {
  std::string out;
  for (size_t l = 0; l < model.size(); ++l) out += (l ? ", " : "") + model.name_at(l);
  return out;
}

}  // namespace

bool TiedParameter::held_by(int rank) const {
  return std::find(holders.begin(), holders.end(), rank) != holders.end();
}

std::vector<TiedParameter> find_tied_parameters(const nn::Sequential& model,
                                                const std::vector<int>& balance, int stages,
                                                const std::vector<TiedUse>& declared) {
  check_balance(balance, static_cast<int>(model.size()));
  // The rank of each layer: parts are consecutive runs of layers, part p on rank p % stages.
  std::vector<int> rank_of_layer;
  for (size_t p = 0; p < balance.size(); ++p) {
    rank_of_layer.insert(rank_of_layer.end(), balance[p], static_cast<int>(p) % stages);
  }
  std::map<std::string, size_t> layer_index;
  for (size_t l = 0; l < model.size(); ++l) layer_index[model.name_at(l)] = l;

  // The layers using each parameter: those registering it or tying it (the module tree:
  // parameters(), then nn::Module::register_tied_parameter's ties), then the declared.
  std::map<const VariableImpl*, std::vector<size_t>> users;
  for (size_t l = 0; l < model.size(); ++l) {
    for (const Variable& p : model[l]->parameters()) users[p.impl()].push_back(l);
  }
  for (size_t l = 0; l < model.size(); ++l) {
    for (const auto& [name, p] : model[l]->named_tied_parameters()) {
      std::vector<size_t>& list = users[p.impl()];
      if (std::find(list.begin(), list.end(), l) == list.end()) list.push_back(l);
    }
  }
  const auto named = model.named_parameters();
  for (const TiedUse& use : declared) {
    const auto it = std::find_if(named.begin(), named.end(),
                                 [&](const auto& np) { return np.first == use.parameter; });
    TS_CHECK(it != named.end(), "Pipe: tie(\"", use.parameter, "\"): the model has no parameter of "
             "that name (names as in model->named_parameters(), e.g. \"", named.empty() ? "" :
             named.front().first, "\")");
    TS_CHECK(!use.layers.empty(), "Pipe: tie(\"", use.parameter, "\") names no layer that reads it");
    for (const std::string& layer : use.layers) {
      const auto l = layer_index.find(layer);
      TS_CHECK(l != layer_index.end(), "Pipe: tie(\"", use.parameter, "\", {\"", layer,
               "\"}): the model has no layer \"", layer, "\" (its layers: ", layer_names(model), ")");
      users[it->second.impl()].push_back(l->second);
    }
  }

  std::vector<TiedParameter> out;
  for (const auto& [name, p] : named) {
    const std::vector<size_t>& used_by = users[p.impl()];
    if (used_by.empty()) continue;  // registered by the Sequential itself, in no layer
    TiedParameter t{name, p, rank_of_layer[used_by.front()], {}};  // registered first: the owner
    for (size_t l : used_by) t.holders.push_back(rank_of_layer[l]);
    std::sort(t.holders.begin(), t.holders.end());
    t.holders.erase(std::unique(t.holders.begin(), t.holders.end()), t.holders.end());
    if (t.holders.size() > 1) out.push_back(std::move(t));
  }
  return out;
}

void copy_owner_values(const std::vector<TiedParameter>& tied, dist::ProcessGroup& pipeline) {
  const int rank = pipeline.rank();
  std::vector<std::shared_ptr<dist::Work>> works;
  for (const TiedParameter& t : tied) {
    const Tensor value = t.variable.data();
    TS_CHECK(value.is_contiguous(), "Pipe: tied parameter ", t.name, " is not contiguous");
    if (rank == t.owner) {
      for (int h : t.holders) {
        if (h != rank) works.push_back(pipeline.send(value.view({value.numel()}), h, kValueTag));
      }
    } else if (t.held_by(rank)) {
      works.push_back(pipeline.recv(value.view({value.numel()}), t.owner, kValueTag));
    }
  }
  for (auto& w : works) w->wait();
}

void sum_over_holders(const std::vector<TiedParameter>& tied, std::vector<Tensor>& gradients,
                      dist::ProcessGroup& pipeline) {
  const int rank = pipeline.rank();
  // Every holder sends its gradient to every other and receives theirs (messages between two
  // ranks on one tag arrive in the order sent, so the parameters pair up in list order).
  std::vector<std::map<int, Tensor>> from(gradients.size());  // per parameter: holder -> gradient
  std::vector<std::shared_ptr<dist::Work>> works;
  size_t i = 0;
  for (const TiedParameter& t : tied) {
    if (!t.held_by(rank)) continue;
    TS_CHECK(i < gradients.size(), "sum_over_holders: ", gradients.size(),
             " gradients for more tied parameters held on rank ", rank);
    const Tensor mine = gradients[i].contiguous();
    TS_CHECK(mine.numel() == t.variable.numel(), "sum_over_holders: the gradient of ", t.name,
             " has ", mine.numel(), " elements, the parameter ", t.variable.numel());
    from[i][rank] = mine;
    for (int h : t.holders) {
      if (h == rank) continue;
      works.push_back(pipeline.send(mine.view({mine.numel()}), h, kGradientTag));
      Tensor theirs = empty(mine.shape(), TensorOptions(mine.dtype()).device(mine.device()));
      works.push_back(pipeline.recv(theirs.view({theirs.numel()}), h, kGradientTag));
      from[i][h] = theirs;
    }
    ++i;
  }
  TS_CHECK(i == gradients.size(), "sum_over_holders: ", gradients.size(), " gradients for ", i,
           " tied parameters held on rank ", rank);
  for (auto& w : works) w->wait();
  for (size_t k = 0; k < gradients.size(); ++k) {
    Tensor sum;
    for (const auto& [holder, g] : from[k]) sum = sum.defined() ? add(sum, g) : g.clone();  // holder order
    gradients[k] = sum.view(gradients[k].shape());
  }
}

}  // namespace pipeline
}  // namespace tessera
