#include "tools/train/strategy.h"

#include "models/gpt.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"
#include "tools/train/asynchronous.h"
#include "tools/train/data_parallel.h"
#include "tools/train/decentralized.h"
#include "tools/train/fully_sharded.h"
#include "tools/train/local_sgd.h"
#include "tools/train/pipelined.h"

namespace tessera {
namespace train {

namespace {

// The options of a group: the flags', at weight decay `decay`.
std::unique_ptr<optim::OptimizerOptions> optimizer_options(const Config& c, double decay) {
  if (c.optimizer == "sgd") {
    return std::make_unique<optim::SGDOptions>(
        optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(decay).nesterov(c.momentum > 0));
  }
  // GPT-2's recipe (nanoGPT, llm.c): beta2 0.95, the second moment forgetting faster.
  const std::pair<double, double> betas{0.9, language_model(c) ? 0.95 : 0.999};
  // Adam's and AdamW's options are alike (AdamW only defaults to a weight decay, given here).
  return std::make_unique<optim::AdamOptions>(
      optim::AdamOptions(c.lr).betas(betas).weight_decay(decay));
}

}  // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c,
                                                 std::vector<optim::ParamGroup> groups) {
  const auto defaults = optimizer_options(c, c.weight_decay);
  if (c.optimizer == "sgd") {
    return std::make_unique<optim::SGD>(std::move(groups),
                                        static_cast<const optim::SGDOptions&>(*defaults));
  }
  const auto& adam = static_cast<const optim::AdamOptions&>(*defaults);
  if (c.optimizer == "adam") return std::make_unique<optim::Adam>(std::move(groups), adam);
  return std::make_unique<optim::AdamW>(std::move(groups), adam);
}

std::vector<optim::ParamGroup> make_param_groups(const Config& c, std::vector<Variable> params,
                                                 nn::Module& model) {
  std::vector<optim::ParamGroup> groups;
  if (!language_model(c) || c.weight_decay == 0) {
    groups.emplace_back(std::move(params));
    return groups;
  }
  // The GPT's two groups, each in `params`' order, of the parameters `params` holds (a pipeline
  // stage's, a parameter server's).
  auto [decayed, spared] = models::weight_decay_groups(model, params);
  if (!decayed.empty()) groups.emplace_back(std::move(decayed), optimizer_options(c, c.weight_decay));
  if (!spared.empty()) groups.emplace_back(std::move(spared), optimizer_options(c, 0));
  return groups;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, std::vector<Variable> params,
                                                 nn::Module& model) {
  return make_optimizer(c, make_param_groups(c, std::move(params), model));
}

double Strategy::clip_grad_norm(double max_norm) {
  // Refuses gradients held elsewhere (ZeRO's, FSDP's: Variable::grad_held_by), so a strategy
  // whose gradients this cannot see fails loudly rather than clipping nothing.
  return optim::clip_grad_norm(optimizer().gradient_variables(), max_norm);
}

double Strategy::local_gradient_norm() { return optim::grad_norm(optimizer().gradient_variables()); }

// Only ZeRO's strategies shard: check_combinations (flag_rules.cc) refuses
// --checkpoint-format=sharded for the others before any is built.
void Strategy::save_sharded(const std::string& dir, const TrainingProgress&, const Metadata&) {
  TS_INTERNAL_ASSERT(false, "a sharded checkpoint (", dir, ") from a strategy without shards");
}

TrainingProgress Strategy::load_sharded(const std::string& dir, Metadata*) {
  TS_FAIL("train: --resume=", dir, " is a sharded (ZeRO) checkpoint, which one process, DDP and "
          "ZeRO runs read; a pipeline resumes from full checkpoints (--checkpoint-format=full)");
}

std::unique_ptr<Strategy> make_strategy(const Config& config, std::shared_ptr<nn::Sequential> model,
                                        std::shared_ptr<dist::ProcessGroup> world,
                                        const dist::Topology* topology, Criterion criterion,
                                        MixedPrecision& precision, Device device) {
  if (config.strategy == "pipeline") {
    return make_pipelined(config, model, world, topology, std::move(criterion), precision, device);
  }
  if (config.strategy == "local-sgd") {
    return make_local_sgd(config, model, world, std::move(criterion), precision);
  }
  if (config.strategy == "async") {
    return make_asynchronous(config, model, world, std::move(criterion), precision);
  }
  if (config.strategy == "gossip") {
    return make_decentralized(config, model, world, std::move(criterion), precision);
  }
  if (config.strategy == "zero3") {
    return make_fully_sharded(config, model, world, std::move(criterion), precision);
  }
  // single, ddp, zero1, zero2
  return make_data_parallel(config, std::move(model), std::move(world), topology,
                            std::move(criterion), precision);
}

}  // namespace train
}  // namespace tessera
