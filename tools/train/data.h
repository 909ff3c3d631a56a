// The train tool's data: the datasets (Fashion-MNIST from its IDX files, or synthetic images),
// and the loaders that give each data-parallel replica its own shard of them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "tensor/device.h"
#include "tools/train/flags.h"
#include "tools/train/strategy.h"

namespace tessera {
namespace train {

struct Data {
  std::shared_ptr<data::Dataset> train, test;
  int64_t channels = 1;
  // --data=text: the tokenizer's vocabulary (the GPT's, before padding) and the validation
  // tokens (--sample's prompt is their start).
  int64_t vocab_size = 0;
  std::shared_ptr<const std::vector<uint16_t>> val_tokens;
};

// --data: Fashion-MNIST (the first --train-limit training images), --synthetic-size images, or
// text: windows of --seq-len tokens (data/token_windows.h), the first --train-limit of the
// training text's and the first --val-limit of the validation text's.
Data load_data(const Config& config);

struct Loaders {
  data::DataLoader train, test;
};

// Each data-parallel replica trains on its own shard (--batch-size per replica: every stage of
// a pipeline reads the same batches) and evaluates its own part of the test set. An error when
// the shard makes no whole training batch.
Loaders make_loaders(const Config& config, const Data& data, const Strategy& strategy,
                     Device device);

}  // namespace train
}  // namespace tessera
