#include "dist/ring_schedule.h"

namespace tessera {
namespace dist {

namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

RingStep reduce_scatter_step(int rank, int size, int step) {
  return {mod(rank - 1 - step, size), mod(rank - 2 - step, size)};
}

RingStep all_gather_step(int rank, int size, int step) {
  return {mod(rank - step, size), mod(rank - 1 - step, size)};
}

}  // namespace dist
}  // namespace tessera
