#include "data/sampler.h"

#include <new>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "tensor/check.h"
#include "tensor/random.h"

namespace tessera {
namespace data {

std::vector<int64_t> indices_0_to(int64_t n, const char* who) {
  TS_CHECK(n >= 0, who, ": negative size ", n);
  std::vector<int64_t> out;
  try {
    out.resize(static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
    TS_FAIL(who, ": out of memory for the order of ", n, " examples (", n * 8, " bytes)");
  } catch (const std::length_error&) {
    TS_FAIL(who, ": ", n, " examples are more than one order can hold");
  }
  std::iota(out.begin(), out.end(), 0);
  return out;
}

std::vector<int64_t> random_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> perm = indices_0_to(n, "random_permutation");
  for (int64_t i = n - 1; i > 0; --i) {
    const std::array<uint32_t, 4> r = philox4x32(seed, static_cast<uint64_t>(i));
    const double u = uniform_double_from_bits(r[0], r[1]);
    const int64_t j = std::min<int64_t>(i, static_cast<int64_t>(u * static_cast<double>(i + 1)));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  TS_CHECK(n >= 0, "SequentialSampler: negative size ", n);
}

std::vector<int64_t> SequentialSampler::indices(int64_t) const {
  return indices_0_to(n_, "SequentialSampler");
}

RandomSampler::RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  TS_CHECK(n >= 0, "RandomSampler: negative size ", n);
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const {
  return random_permutation(n_, seed_ * 1000003ull + static_cast<uint64_t>(epoch));
}

}  // namespace data
}  // namespace tessera
