#include "dist/async/layout.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace tessera {
namespace dist {

ParameterServerLayout::ParameterServerLayout(int group_size, const AsyncOptions& options,
                                             int64_t numel)
    : group_size_(group_size), servers_(options.servers()), numel_(numel) {
  TS_CHECK(servers_ >= 1 && servers_ < group_size_, "parameter server: ", servers_,
           " server(s) on ", group_size_, " ranks leaves ", group_size_ - servers_,
           " workers; choose 1 <= servers < ranks");
  TS_CHECK(numel_ >= servers_, "parameter server: ", numel_, " parameters cannot be split over ",
           servers_, " servers");
  TS_CHECK(options.staleness_bound() >= AsyncOptions::kUnbounded, "parameter server: staleness "
           "bound ", options.staleness_bound(), " (>= 0, or kUnbounded for plain asynchronous SGD)");
  TS_CHECK(!options.shared_batches() || !options.bounded(), "parameter server: shared batches "
           "with staleness bound ", options.staleness_bound(), ": a bound keeps every worker within ",
           options.staleness_bound(), " iterations of the slowest over the whole run, so a fast "
           "worker could not take a straggler's batches; use the unbounded staleness");
  counts_ = balanced_counts(numel_, servers_);
  int64_t at = 0;
  for (int64_t c : counts_) {
    offsets_.push_back(at);
    at += c;
  }
}

std::vector<int64_t> ParameterServerLayout::gather_counts() const {
  std::vector<int64_t> counts(group_size_, 0);
  for (int s = 0; s < servers_; ++s) counts[s] = counts_[s];
  return counts;
}

Tensor Request::encode() const {
  return from_vector<double>({static_cast<double>(kind), static_cast<double>(worker),
                              static_cast<double>(clock), lr, loss, static_cast<double>(epoch)},
                             {kElements});
}

Request Request::decode(const Tensor& message, int workers) {
  TS_CHECK(message.numel() == kElements && message.dtype() == kF64,
           "parameter server: a request is ", kElements, " f64, got ", message.numel(), " ",
           message.dtype());
  const double* v = message.data<double>();
  Request r;
  const double kind = v[0];
  TS_CHECK(kind == 1 || kind == 2 || kind == 3 || kind == 4,
           "parameter server: unknown request kind ", kind);
  r.kind = static_cast<RequestKind>(static_cast<int>(kind));
  TS_CHECK(v[1] >= 0 && v[1] < workers && v[1] == std::floor(v[1]),
           "parameter server: a request from worker ", v[1], ", but there are ", workers);
  r.worker = static_cast<int>(v[1]);
  r.clock = static_cast<int64_t>(v[2]);
  r.lr = v[3];
  r.loss = v[4];
  r.epoch = static_cast<int64_t>(v[5]);
  return r;
}

DType flat_dtype(const std::vector<Variable>& params, const char* who) {
  TS_CHECK(!params.empty(), who, ": no parameters");
  const DType dtype = params[0].dtype();
  for (const Variable& p : params) {
    TS_CHECK(p.dtype() == dtype && is_floating(dtype), who, ": parameter ", p.name(), " is ",
             p.dtype(), ", the first ", dtype, " (one floating-point dtype)");
    TS_CHECK(p.device() == params[0].device(), who, ": parameter ", p.name(), " is on ",
             p.device(), ", the first on ", params[0].device());
  }
  return dtype;
}

Tensor flatten(const std::vector<Variable>& params) {
  int64_t n = 0;
  for (const Variable& p : params) n += p.numel();
  Tensor flat = empty({n}, TensorOptions(params[0].dtype()).device(params[0].device()));
  int64_t at = 0;
  for (const Variable& p : params) {
    flat.narrow(0, at, p.numel()).copy_(p.data().reshape({-1}));
    at += p.numel();
  }
  return flat;
}

void unflatten(const Tensor& flat, const std::vector<Variable>& params) {
  NoGradGuard no_grad;
  int64_t at = 0;
  for (const Variable& p : params) {
    Tensor(p.data()).copy_(flat.narrow(0, at, p.numel()).view(p.shape()));
    at += p.numel();
  }
  TS_CHECK(at == flat.numel(), "parameter server: ", flat.numel(), " flat elements for ", at,
           " parameter elements");
}

void gather_server_shards(const ParameterServerLayout& layout, ProcessGroup& group,
                          const Tensor& shard, const std::vector<Variable>& params) {
  const DType dtype = flat_dtype(params, "gather_server_shards");
  const bool server = layout.is_server(group.rank());
  const Tensor mine =
      server ? shard : empty({0}, TensorOptions(dtype).device(params[0].device()));
  Tensor flat = empty({layout.numel()}, TensorOptions(dtype).device(params[0].device()));
  group.all_gather(mine, flat, layout.gather_counts())->wait();
  unflatten(flat, params);
}

void average_worker_buffers(const ParameterServerLayout& layout, ProcessGroup& group,
                            const std::vector<Variable>& buffers) {
  NoGradGuard no_grad;
  const bool server = layout.is_server(group.rank());
  for (const Variable& b : buffers) {
    if (!is_floating(b.dtype())) continue;  // num_batches_tracked: every worker counts alike
    Tensor sum = server ? zeros_like(b.data()) : b.data().contiguous().clone();
    group.all_reduce(sum.reshape({-1}), ReduceOp::kSum)->wait();
    Tensor(b.data()).copy_(div(sum, static_cast<double>(layout.workers())));
  }
}

}  // namespace dist
}  // namespace tessera
