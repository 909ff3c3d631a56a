#include "dist/module_sync.h"

#include <cstring>

#include "tensor/ops.h"

namespace tessera {
namespace dist {

namespace {

std::string describe(const std::string& name, const Variable& v) {
  return name + " " + dtype_name(v.dtype()) + shape_str(v.shape());
}

}  // namespace

void verify_same_parameters(const nn::Module& module, ProcessGroup& group) {
  verify_same_parameters(module.named_parameters(), group);
}

void verify_same_parameters(const std::vector<std::pair<std::string, Variable>>& named,
                            ProcessGroup& group) {
  std::string mine;
  for (const auto& [name, p] : named) mine += describe(name, p) + "\n";
  // Everyone learns rank 0's description: first its length, then its bytes.
  Tensor length = scalar_tensor(static_cast<double>(mine.size()), kI64);
  group.broadcast(length, 0)->wait();
  Tensor text = empty({static_cast<int64_t>(length.item())}, kU8);
  if (group.rank() == 0) std::memcpy(text.raw_data(), mine.data(), mine.size());
  group.broadcast(text, 0)->wait();
  const std::string reference(static_cast<const char*>(text.raw_data()), text.numel());
  // Every rank reports whether it matches, so all of them stop together when one does not.
  Tensor mismatch = scalar_tensor(mine == reference ? 0 : 1, kI64);
  group.all_reduce(mismatch, ReduceOp::kMax)->wait();
  if (mismatch.item() == 0) return;
  if (mine == reference) {
    TS_FAIL("the parameters differ between ranks (another rank reported the difference)");
  }
  size_t line = 0, at = 0;
  while (at < mine.size() && at < reference.size() && mine[at] == reference[at]) {
    if (mine[at] == '\n') ++line;
    ++at;
  }
  auto line_of = [](const std::string& s, size_t index) {
    size_t start = 0;
    for (size_t i = 0; i < index; ++i) start = s.find('\n', start) + 1;
    const size_t end = s.find('\n', start);
    return start >= s.size() ? std::string("(no parameter)") : s.substr(start, end - start);
  };
  TS_FAIL("rank ", group.rank(), " has different parameters from rank 0; first difference at "
          "parameter ", line, ": rank 0 has '", line_of(reference, line), "', rank ",
          group.rank(), " has '", line_of(mine, line), "'");
}

void broadcast_parameters(const std::vector<Variable>& params, ProcessGroup& group, int root) {
  if (group.size() == 1) return;
  std::vector<std::shared_ptr<Work>> works;
  for (const Variable& p : params) works.push_back(group.broadcast(p.data(), root));
  for (auto& w : works) w->wait();
}

void broadcast_module_states(const nn::Module& module, ProcessGroup& group, int root,
                             bool buffers) {
  broadcast_parameters(module.parameters(), group, root);
  if (buffers) broadcast_buffers(module, group, root);
}

void broadcast_buffers(const nn::Module& module, ProcessGroup& group, int root) {
  if (group.size() == 1) return;
  std::vector<std::shared_ptr<Work>> works;
  for (const Variable& b : module.buffers()) works.push_back(group.broadcast(b.data(), root));
  for (auto& w : works) w->wait();
}

}  // namespace dist
}  // namespace tessera
