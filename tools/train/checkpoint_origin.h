// What wrote a checkpoint: the model (--model and the flags that shape it) and the optimizer,
// kept among the strings of the file that commits it (a full checkpoint's metadata, a sharded
// checkpoint's index: dist/checkpoint.h, dist/zero/checkpoint_index.h), so that resuming into
// another model or optimizer is refused naming both, before anything is loaded:
//
//   train: --resume=ck: ck/step-00000030/checkpoint.safetensors was written by --model=mlp
//   --optimizer=adamw; this run is --model=logistic --optimizer=sgd (resume with the same
//   model and optimizer, or start afresh without --resume)
//
// Checkpoints from before these strings say less: only the model's name (written since the
// train tool's first checkpoints), or nothing (a user's own program's): what they say is
// compared, the rest is not.
#pragma once

#include <string>

#include "tensor/safetensors.h"
#include "tools/train/flags.h"

namespace tessera {
namespace train {

// The strings a checkpoint of this run carries: "model" (its name), "model_flags" (below),
// "optimizer" ("adamw").
Metadata checkpoint_origin(const Config& config);

// The model's name and what shapes it: "--model=mlp", "--model=logistic --num-classes=4", a
// GPT's resolved shape "--model=gpt-nano --context=64 --n-layer=4 --n-head=4 --n-embd=128"
// (and --tokenizer=byte when not GPT-2's).
std::string model_flags(const Config& config);

// The strings of the checkpoint at `path` (a full checkpoint's file, or a sharded checkpoint's
// directory: its index), read without loading any tensor.
Metadata read_checkpoint_strings(const std::string& path);

// Throws FlagError when the checkpoint at `path` (its strings `written`) was written by another
// model or optimizer than `config`'s, naming both; `given` is --resume as given.
void check_checkpoint_origin(const Metadata& written, const Config& config,
                             const std::string& path, const std::string& given);

}  // namespace train
}  // namespace tessera
