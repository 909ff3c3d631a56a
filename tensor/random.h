// Generator: seeded, reproducible random streams (Philox4x32-10, counter-based).
//
// A counter-based generator maps (seed, counter) to random bits with no hidden sequential
// state, so element i of a random tensor can be computed by any thread (or GPU lane) on its
// own: results never depend on the thread count. A Generator is just (seed, offset); each
// random op claims a range of counters by advancing the offset, and saving/restoring those two
// numbers replays a stream exactly (activation checkpointing does this for dropout).
#pragma once

#include <array>
#include <cstdint>

#include "tensor/philox.h"

namespace tessera {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : state_{seed, 0} {}

  void manual_seed(uint64_t seed) { state_ = {seed, 0}; }
  uint64_t seed() const { return state_.seed; }
  GeneratorState state() const { return state_; }
  void set_state(const GeneratorState& s) { state_ = s; }

  // Claims `count` counters for one op and returns the first.
  uint64_t claim(uint64_t count) {
    const uint64_t first = state_.offset;
    state_.offset += count;
    return first;
  }

 private:
  GeneratorState state_;
};

// The process-wide default generator (seed 0 until manual_seed is called).
Generator& default_generator();
void manual_seed(uint64_t seed);

// Philox4x32 with 10 rounds: four 32-bit random words for (seed, counter) (tensor/philox.h).
inline std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t counter) {
  const PhiloxWords r = philox4x32_10(seed, counter);
  return {r[0], r[1], r[2], r[3]};
}

}  // namespace tessera
