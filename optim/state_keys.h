// The keys of an optimizer's per-parameter state in its state_dict (optim/optimizer.h):
//
//   "state.I.NAME"    I the parameter's index across the param groups, in decimal;
//                     NAME "step" (an i64 count), "momentum", "exp_avg", "master", ...
//
// Everything that renumbers or reshapes optimizer state (ZeRO's flat shards and sharded
// checkpoints, tensor-parallel gathers, pipeline stages) builds and reads the keys here, so
// that one rule says what a key is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace tessera {
namespace optim {

// "state.I.": every key of parameter I starts with it.
std::string state_key_prefix(int64_t index);
// "state.I.NAME".
std::string state_key(int64_t index, const std::string& name);

// Whether `key` starts with "state.", i.e. is meant as per-parameter state (the other keys of a
// state_dict are "param_groups.G.NAME").
bool has_state_prefix(const std::string& key);

struct StateKey {
  int64_t index;
  std::string name;
};

// {I, NAME} when `key` is "state.I.NAME" written as state_key writes it: I decimal digits with
// no leading zero (at most 18 of them), NAME not empty. std::nullopt for any other key.
std::optional<StateKey> parse_state_key(const std::string& key);
// The same, and I < count: a parameter of an optimizer that has `count` of them.
std::optional<StateKey> parse_state_key(const std::string& key, size_t count);

}  // namespace optim
}  // namespace tessera
