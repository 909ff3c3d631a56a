// The benchmarks' summary of repeated timings. Two medians, kept apart on purpose: train_bench
// and gpu_bench report the textbook median (the mean of the two middle values for an even
// count), ddp_bench, layer_bench and tensor_parallel_bench the upper of the two middle values,
// as their published figures were taken; one for the other would move those figures.
#pragma once

#include <algorithm>
#include <vector>

namespace tessera {
namespace bench {

// The middle value; for an even count the mean of the two middle ones. Not for an empty list.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The middle value; for an even count the upper of the two middle ones. Not for an empty list.
inline double upper_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace bench
}  // namespace tessera
