#include "tools/train/strategy.h"

#include "optim/adam.h"
#include "optim/sgd.h"
#include "tools/train/asynchronous.h"
#include "tools/train/data_parallel.h"
#include "tools/train/decentralized.h"
#include "tools/train/fully_sharded.h"
#include "tools/train/local_sgd.h"
#include "tools/train/pipelined.h"

namespace tessera {
namespace train {

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, std::vector<Variable> params) {
  if (c.optimizer == "sgd") {
    return std::make_unique<optim::SGD>(
        params, optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay)
                    .nesterov(c.momentum > 0));
  }
  if (c.optimizer == "adam") {
    return std::make_unique<optim::Adam>(params,
                                         optim::AdamOptions(c.lr).weight_decay(c.weight_decay));
  }
  return std::make_unique<optim::AdamW>(
      params, optim::AdamWOptions(c.lr).weight_decay(c.weight_decay));
}

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
