#include "dist/process_group.h"

namespace tessera {
namespace dist {

void check_reduce_op(ReduceOp op, DType dtype, const char* collective) {
  const bool collective_op = op == ReduceOp::kSum || op == ReduceOp::kMean ||
                             op == ReduceOp::kMax || op == ReduceOp::kMin;
  TS_CHECK(collective_op, collective, ": ReduceOp ", static_cast<int>(op), " is not a collective "
           "reduction (kSum, kMean, kMax or kMin)");
  TS_CHECK(op != ReduceOp::kMean || is_floating(dtype), collective,
           ": kMean needs a floating-point tensor, got ", dtype);
}

std::vector<int64_t> balanced_counts(int64_t n, int parts) {
  TS_CHECK(parts > 0 && n >= 0, "balanced_counts: cannot split ", n, " into ", parts, " parts");
  std::vector<int64_t> counts(parts, n / parts);
  for (int64_t i = 0; i < n % parts; ++i) ++counts[i];
  return counts;
}

void ProcessGroup::set_network_emulation(const NetworkEmulation& emulation) {
  emulation.check("set_network_emulation");
  TS_CHECK(!emulation.enabled(), "set_network_emulation: this process group (", size(),
           " ranks) cannot emulate a network (", emulation.str(),
           "); the MPI process group can (CPU tensors)");
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(const Tensor& input, const Tensor& output,
                                                   ReduceOp op) {
  return reduce_scatter(input, output, balanced_counts(input.numel(), size()), op);
}

std::shared_ptr<Work> ProcessGroup::all_gather(const Tensor& input, const Tensor& output) {
  return all_gather(input, output, balanced_counts(output.numel(), size()));
}

}  // namespace dist
}  // namespace tessera
