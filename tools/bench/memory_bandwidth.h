// One core's memory bandwidth in GB/s, measured as fma_peak.h measures the FMA peak: a triad
// (c = a + s * b, two streams read and one written, as batch norm's passes and the optimizer
// mostly are) over three arrays of a given size, the best of a few runs, counting the bytes
// the loop names (12 per element; the write's read-for-ownership not counted). Arrays of a few
// MiB each measure the last-level cache; arrays far past it, DRAM.
#pragma once

#include <cstdint>

namespace tessera {
namespace bench {

double triad_gbytes_per_s(int64_t bytes_per_array);

}  // namespace bench
}  // namespace tessera
