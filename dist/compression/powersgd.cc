#include "dist/compression/powersgd.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "dist/compression/finite.h"
#include "tensor/check.h"
#include "tensor/ops.h"
#include "tensor/random.h"

namespace tessera {
namespace dist {
namespace compression {

namespace {

const char* on_off(bool b) { return b ? "on" : "off"; }

std::string key(size_t bucket, const std::string& what) {
  return "bucket." + std::to_string(bucket) + "." + what;
}

// The Philox seed of a bucket's initial Qs: splitmix64 over (seed, iter, bucket), so distinct
// keys give unrelated streams and every rank computes the same one.
uint64_t q_seed(uint64_t seed, int64_t iter, size_t bucket) {
  uint64_t z = seed;
  for (uint64_t v : {static_cast<uint64_t>(iter), static_cast<uint64_t>(bucket)}) {
    z += 0x9E3779B97F4A7C15ull + v;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
  }
  return z;
}

Tensor p_view(const Tensor& p, const PowerSGDPlan::Matrix& m) {
  return p.narrow(0, m.p_offset, m.rows * m.rank).view({m.rows, m.rank});
}

Tensor q_view(const Tensor& q, const PowerSGDPlan::Matrix& m) {
  return q.narrow(0, m.q_offset, m.cols * m.rank).view({m.cols, m.rank});
}

// "123" -> 123; false unless the whole string is decimal digits.
bool parse_index(const std::string& s, size_t& out) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  out = static_cast<size_t>(std::stoull(s));
  return true;
}

}  // namespace

void PowerSGDOptions::check() const {
  TS_CHECK(rank_ >= 1, "PowerSGDOptions: matrix_approximation_rank must be at least 1, got ", rank_);
  TS_CHECK(start_ >= 0, "PowerSGDOptions: start_powerSGD_iter must be >= 0, got ", start_);
  TS_CHECK(!((error_feedback_ || warm_start_) && start_ < 2),
           "PowerSGDOptions: start_powerSGD_iter must be at least 2 when error feedback or warm "
           "start is on (PyTorch's rule), got ", start_, " (use_error_feedback ",
           on_off(error_feedback_), ", warm_start ", on_off(warm_start_),
           "). Start later, or turn both off to compress from iteration ", start_);
  TS_CHECK(std::isfinite(min_rate_) && min_rate_ >= 0,
           "PowerSGDOptions: min_compression_rate must be finite and >= 0, got ", min_rate_);
  TS_CHECK(std::isfinite(epsilon_) && epsilon_ >= 0,
           "PowerSGDOptions: orthogonalization_epsilon must be finite and >= 0, got ", epsilon_);
}

PowerSGDPlan plan_powersgd(const GradBucket& bucket, const PowerSGDOptions& options) {
  std::vector<Shape> shapes;
  for (const Tensor& g : bucket.gradients) shapes.push_back(g.shape());
  return plan_powersgd(shapes, options);
}

PowerSGDPlan plan_powersgd(const std::vector<Shape>& shapes, const PowerSGDOptions& options) {
  PowerSGDPlan plan;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Shape& shape = shapes[k];
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    PowerSGDPlan::Matrix m;
    bool compress = false;
    if (shape.size() >= 2 && numel > 0) {
      m.gradient = k;
      m.rows = shape[0];
      m.cols = numel / m.rows;
      m.rank = std::min({m.rows, m.cols, options.matrix_approximation_rank()});
      // PyTorch's _should_compress: compressed * min_compression_rate < uncompressed.
      compress = static_cast<double>(m.rank * (m.rows + m.cols)) * options.min_compression_rate() <
                 static_cast<double>(m.rows * m.cols);
    }
    if (compress) {
      m.p_offset = plan.p_numel;
      m.q_offset = plan.q_numel;
      plan.p_numel += m.rows * m.rank;
      plan.q_numel += m.cols * m.rank;
      plan.matrices.push_back(m);
    } else {
      plan.uncompressed.push_back(k);
      plan.uncompressed_numel += numel;
    }
  }
  return plan;
}

std::vector<Tensor> powersgd_initial_qs(uint64_t seed, int64_t iter, size_t bucket,
                                        const PowerSGDPlan& plan, const TensorOptions& options) {
  Generator gen(q_seed(seed, iter, bucket));
  std::vector<Tensor> qs;
  for (const PowerSGDPlan::Matrix& m : plan.matrices) {
    qs.push_back(randn({m.cols, m.rank}, options, &gen));
  }
  return qs;
}

void orthogonalize(const Tensor& matrix, double epsilon) {
  TS_CHECK(matrix.dim() == 2, "orthogonalize: expected a [rows, r] matrix, got ", matrix.shape());
  const int64_t r = matrix.size(1);
  for (int64_t i = 0; i < r; ++i) {
    Tensor col = matrix.narrow(1, i, 1);
    const double divisor = sqrt(sum(square(col))).item() + epsilon;
    if (divisor == 0) {
      col.zero_();  // nothing to normalize, nothing to remove from the later columns
      continue;
    }
    col.copy_(div(col, divisor));
    if (i + 1 < r) {
      Tensor rest = matrix.narrow(1, i + 1, r - i - 1);
      rest.copy_(sub(rest, mul(sum(mul(col, rest), {0}, /*keepdim=*/true), col)));
    }
  }
}

// One bucket's reduction in flight.
struct PowerSGDHook::Round {
  ProcessGroup* group = nullptr;
  GradBucket bucket;  // handles to DDP's buffer and views
  BucketState* state = nullptr;
  PowerSGDPlan plan;
  std::vector<Tensor> matrices;  // the compressed gradients as [rows, cols] views of the buffer
  Tensor input;                  // the buffer with the residual added (error feedback)
  Tensor uncompressed, p, q;     // the three all-reduced buffers, flat
  std::shared_ptr<Work> uncompressed_work, p_work, q_work;
  bool q_started = false, finished = false;
};

class PowerSGDHook::RoundWork : public Work {
 public:
  RoundWork(PowerSGDHook* hook, std::shared_ptr<Round> round)
      : hook_(hook), round_(std::move(round)) {}
  void wait() override { hook_->finish(*round_); }
  bool is_completed() override {
    std::lock_guard<std::mutex> lock(hook_->mutex_);
    const Round& r = *round_;
    if (r.finished) return true;
    if (!r.q_started) return false;
    return (!r.q_work || r.q_work->is_completed()) &&
           (!r.uncompressed_work || r.uncompressed_work->is_completed());
  }

 private:
  PowerSGDHook* hook_;
  std::shared_ptr<Round> round_;
};

PowerSGDHook::PowerSGDHook(const PowerSGDOptions& options) : options_(options) { options_.check(); }

PowerSGDHook::~PowerSGDHook() = default;

std::string PowerSGDHook::name() const {
  return "powersgd:" + std::to_string(options_.matrix_approximation_rank());
}

int64_t PowerSGDHook::iter() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return iterations();
}

int64_t PowerSGDHook::iterations() const {
  return completed_ + (last_index_ >= 0 && !skipping_ ? 1 : 0);
}

std::shared_ptr<Work> PowerSGDHook::reduce(ProcessGroup& group, GradBucket& bucket) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t index = bucket.index;
  Tensor buffer = bucket.buffer;
  TS_CHECK(buffer.dtype() == kF32, "PowerSGDHook: bucket ", index, " holds ", buffer.dtype(),
           " gradients; PowerSGD works in f32 (register it on a model with f32 parameters)");
  // DDP reduces buckets 0, 1, ..., B-1 each step: a bucket not after the last one begins the
  // next iteration (PyTorch counts at its last bucket instead; the numbers agree).
  // An iteration whose result was not finite (skipping_) does not count.
  if (last_index_ >= 0 && static_cast<int64_t>(index) <= last_index_) {
    if (!skipping_) ++completed_;
    skipping_ = false;
  }
  last_index_ = static_cast<int64_t>(index);
  const int64_t iter = completed_;

  // Earlier buckets' Q all-reduces are issued before anything of this one, so the order of
  // collectives follows the order of calls, the same on every rank.
  flush_p_phases(nullptr);
  if (iter < options_.start_powerSGD_iter()) {
    // The plain all-reduce: its sum, identical on every rank, still says whether the
    // iteration counts.
    std::shared_ptr<Work> work = group.all_reduce(buffer, ReduceOp::kSum);
    return std::make_shared<ChainedWork>(work, [this, buffer] {
      if (all_finite(buffer)) return;
      std::lock_guard<std::mutex> lock(mutex_);
      skipping_ = true;
    });
  }

  auto round = std::make_shared<Round>();
  round->group = &group;
  round->bucket = bucket;
  BucketState& state = buckets_[index];
  round->state = &state;
  round->plan = plan_powersgd(bucket, options_);
  const PowerSGDPlan& plan = round->plan;

  if (options_.use_error_feedback()) {
    if (state.residual.defined()) {
      TS_CHECK(state.residual.numel() == buffer.numel(), "PowerSGDHook: ", key(index, "residual"),
               " has ", state.residual.numel(), " elements but bucket ", index, " has ",
               buffer.numel(), " (a state saved from another model or bucket layout?)");
      add_(buffer, state.residual.to(buffer.options()));
    }
    round->input = buffer.clone();
  }

  if (plan.uncompressed_numel > 0) {
    round->uncompressed = empty({plan.uncompressed_numel}, buffer.options());
    int64_t at = 0;
    for (size_t k : plan.uncompressed) {
      const Tensor& g = bucket.gradients[k];
      round->uncompressed.narrow(0, at, g.numel()).copy_(g.reshape({g.numel()}));
      at += g.numel();
    }
  }

  // The Qs: the warm start's from the last step (or from load_state_dict), else fresh draws;
  // this round's own copy, which becomes the warm start only if the round's result is finite.
  round->q = empty({plan.q_numel}, buffer.options());
  if (!state.loaded_q.empty()) {
    bool fits = state.loaded_q.size() == plan.matrices.size();
    for (const PowerSGDPlan::Matrix& m : plan.matrices) {
      auto it = state.loaded_q.find(m.gradient);
      fits = fits && it != state.loaded_q.end() && it->second.shape() == Shape{m.cols, m.rank};
    }
    if (!fits) {
      std::vector<std::string> expected, got;
      for (const PowerSGDPlan::Matrix& m : plan.matrices) {
        expected.push_back(key(index, "q." + std::to_string(m.gradient)) + " [" +
                           std::to_string(m.cols) + ", " + std::to_string(m.rank) + "]");
      }
      for (const auto& [k, t] : state.loaded_q) {
        got.push_back(key(index, "q." + std::to_string(k)) + " " + t.str());
      }
      TS_FAIL("PowerSGDHook: the loaded warm-start Qs of bucket ", index, " do not fit it: it needs ",
              expected, ", the state held ", got, " (a state saved with another model, bucket "
              "layout or matrix_approximation_rank?)");
    }
    for (const PowerSGDPlan::Matrix& m : plan.matrices) {
      q_view(round->q, m).copy_(state.loaded_q.at(m.gradient));
    }
  } else if (!options_.warm_start() || !state.q.defined()) {
    const std::vector<Tensor> fresh =
        powersgd_initial_qs(options_.random_seed(), iter, index, plan, buffer.options());
    for (size_t i = 0; i < plan.matrices.size(); ++i) q_view(round->q, plan.matrices[i]).copy_(fresh[i]);
  } else {
    TS_INTERNAL_ASSERT(state.q.numel() == plan.q_numel, "PowerSGDHook: bucket ", index,
                       "'s warm-start Q has ", state.q.numel(), " elements, its plan ", plan.q_numel);
    round->q.copy_(state.q);
  }
  // #3 all-reduces the Qs in place: afterwards they are the next step's warm start.
  round->p = empty({plan.p_numel}, buffer.options());
  for (const PowerSGDPlan::Matrix& m : plan.matrices) {
    const Tensor matrix = bucket.gradients[m.gradient].view({m.rows, m.cols});
    round->matrices.push_back(matrix);
    const Tensor q = q_view(round->q, m);
    orthogonalize(q, options_.orthogonalization_epsilon());
    p_view(round->p, m).copy_(matmul(matrix, q));
  }

  // #1 and #2 do not depend on each other: both go now. (P is not divided by the world size:
  // it is orthogonalized next.)
  if (plan.uncompressed_numel > 0) round->uncompressed_work = group.all_reduce(round->uncompressed);
  if (plan.p_numel > 0) round->p_work = group.all_reduce(round->p);
  awaiting_q_.push_back(round);
  return std::make_shared<RoundWork>(this, round);
}

void PowerSGDHook::flush_p_phases(const Round* through) {
  while (!awaiting_q_.empty()) {
    const std::shared_ptr<Round> round = awaiting_q_.front();
    awaiting_q_.pop_front();
    start_q_phase(*round);
    if (round.get() == through) return;
  }
}

void PowerSGDHook::start_q_phase(Round& round) {
  round.q_started = true;
  if (round.p_work) round.p_work->wait();
  for (size_t i = 0; i < round.plan.matrices.size(); ++i) {
    const PowerSGDPlan::Matrix& m = round.plan.matrices[i];
    const Tensor p = p_view(round.p, m);
    orthogonalize(p, options_.orthogonalization_epsilon());
    q_view(round.q, m).copy_(matmul(round.matrices[i].t(), p));
  }
  if (round.plan.q_numel > 0) round.q_work = round.group->all_reduce(round.q);
}

void PowerSGDHook::finish(Round& round) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (round.finished) return;
  if (!round.q_started) flush_p_phases(&round);
  if (round.q_work) round.q_work->wait();
  if (round.uncompressed_work) round.uncompressed_work->wait();
  const double n = static_cast<double>(round.group->size());
  const PowerSGDPlan& plan = round.plan;
  const GradBucket& bucket = round.bucket;
  BucketState& state = *round.state;
  // Q = sum / N, so P Q^T approximates the average (PyTorch's Q, kept for the warm start).
  if (plan.q_numel > 0) round.q.copy_(div(round.q, n));

  // Each uncompressed gradient's all-reduced sum, in place.
  auto unpack_sums = [&] {
    int64_t at = 0;
    for (size_t k : plan.uncompressed) {
      const Tensor& g = bucket.gradients[k];
      Tensor(g).copy_(round.uncompressed.narrow(0, at, g.numel()).view(g.shape()));
      at += g.numel();
    }
  };
  Tensor residual;
  if (options_.use_error_feedback()) {
    // PyTorch's result (averages) first: the residual is the input minus it.
    for (size_t i = 0; i < plan.matrices.size(); ++i) {
      const PowerSGDPlan::Matrix& m = plan.matrices[i];
      Tensor(round.matrices[i]).copy_(matmul(p_view(round.p, m), q_view(round.q, m).t()));
    }
    unpack_sums();
    for (size_t k : plan.uncompressed) {
      Tensor g = bucket.gradients[k];
      g.copy_(div(g, n));
    }
    residual = sub(round.input, bucket.buffer);
    // Then the sums DDP expects (it divides by N next).
    for (Tensor m : round.matrices) mul_(m, n);
    unpack_sums();
  } else {
    for (size_t i = 0; i < plan.matrices.size(); ++i) {
      const PowerSGDPlan::Matrix& m = plan.matrices[i];
      Tensor(round.matrices[i]).copy_(mul(matmul(p_view(round.p, m), q_view(round.q, m).t()), n));
    }
    unpack_sums();
  }
  // The result is the same on every rank (sums of all-reduced P, Q and tensors), so every rank
  // decides alike: a finite one becomes the bucket's state; one that is not (an overflow the
  // GradScaler will skip) leaves the residual, the warm start and the iteration count as they
  // were, or inf - inf = NaN would poison every later step.
  if (all_finite(bucket.buffer)) {
    if (options_.use_error_feedback()) state.residual = residual;
    if (options_.warm_start()) {
      state.q = round.q;
      state.plan = plan;
    }
    state.loaded_q.clear();
  } else {
    skipping_ = true;
  }
  round.input = Tensor();
  round.uncompressed = Tensor();
  round.finished = true;
}

StateDict PowerSGDHook::state_dict() const {
  std::lock_guard<std::mutex> lock(mutex_);
  StateDict out;
  out.set("iter", scalar_tensor(static_cast<double>(iterations()), kI64));
  for (const auto& [b, state] : buckets_) {
    if (state.residual.defined()) out.set(key(b, "residual"), state.residual.clone());
    if (state.q.defined()) {
      for (const PowerSGDPlan::Matrix& m : state.plan.matrices) {
        out.set(key(b, "q." + std::to_string(m.gradient)), q_view(state.q, m).clone());
      }
    }
    for (const auto& [k, t] : state.loaded_q) out.set(key(b, "q." + std::to_string(k)), t.clone());
  }
  return out;
}

void PowerSGDHook::load_state_dict(const StateDict& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  TS_CHECK(awaiting_q_.empty(), "PowerSGDHook::load_state_dict: a reduction is in flight; load "
           "between steps");
  const Tensor* iter = state.find("iter");
  TS_CHECK(iter != nullptr, "PowerSGDHook::load_state_dict: no 'iter' entry (is this a PowerSGD "
           "hook's state? it has ", state.size(), " entries)");
  TS_CHECK(iter->numel() == 1 && iter->item() >= 0 && iter->item() == std::floor(iter->item()),
           "PowerSGDHook::load_state_dict: 'iter' must be one non-negative integer, got ", iter->str());
  std::map<size_t, BucketState> loaded;
  for (const auto& [name, t] : state.items()) {
    if (name == "iter") continue;
    // bucket.<b>.residual or bucket.<b>.q.<k>
    size_t b = 0, k = 0;
    const size_t dot = name.find('.', 7);
    const bool bucket_ok = name.rfind("bucket.", 0) == 0 && dot != std::string::npos &&
                           parse_index(name.substr(7, dot - 7), b);
    const std::string rest = bucket_ok ? name.substr(dot + 1) : "";
    const bool is_residual = rest == "residual";
    const bool is_q = rest.rfind("q.", 0) == 0 && parse_index(rest.substr(2), k);
    TS_CHECK(bucket_ok && (is_residual || is_q), "PowerSGDHook::load_state_dict: unexpected entry '",
             name, "' (expected 'iter', 'bucket.<b>.residual' or 'bucket.<b>.q.<k>')");
    TS_CHECK(t.dtype() == kF32 && t.dim() == (is_residual ? 1 : 2), "PowerSGDHook::load_state_dict: '",
             name, "' must be f32 with ", is_residual ? 1 : 2, " dims, got ", t.str());
    TS_CHECK(!is_residual || options_.use_error_feedback(), "PowerSGDHook::load_state_dict: '", name,
             "' is an error-feedback residual, but this hook has use_error_feedback off");
    TS_CHECK(!is_q || options_.warm_start(), "PowerSGDHook::load_state_dict: '", name,
             "' is a warm-start Q, but this hook has warm_start off");
    if (is_residual) {
      loaded[b].residual = t.clone();
    } else {
      loaded[b].loaded_q[k] = t.clone();
    }
  }
  buckets_ = std::move(loaded);
  completed_ = static_cast<int64_t>(iter->item());
  last_index_ = -1;
  skipping_ = false;
}

}  // namespace compression
}  // namespace dist
}  // namespace tessera
