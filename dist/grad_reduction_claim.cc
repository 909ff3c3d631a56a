#include "dist/grad_reduction_claim.h"

#include <mutex>
#include <unordered_map>

#include "tensor/check.h"

namespace tessera {
namespace dist {

namespace {

std::mutex& claims_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_map<const VariableImpl*, std::string>& claims() {
  static auto* table = new std::unordered_map<const VariableImpl*, std::string>();
  return *table;
}

}  // namespace

GradReductionClaim::GradReductionClaim(const std::vector<Variable>& params, std::string owner,
                                       std::string clip_with) {
  std::lock_guard<std::mutex> lock(claims_mutex());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto it = claims().find(params[i].impl());
    TS_CHECK(it == claims().end(), owner, ": parameter ", i, " ('", params[i].name(),
             "') already has its gradient reduced across ranks by ", it->second,
             "; reducing it again would double the communication for the same result. Use one "
             "of them: a ZeRO optimizer reduces gradients itself, so give it the parameters of "
             "the model without wrapping the model in DistributedDataParallel");
  }
  for (const Variable& p : params) {
    claims().emplace(p.impl(), owner);
    claimed_.push_back(p);
    if (!clip_with.empty()) p.set_grad_held_by(owner + "; " + clip_with);
  }
}

GradReductionClaim::~GradReductionClaim() { release(); }

GradReductionClaim::GradReductionClaim(GradReductionClaim&& other) noexcept
    : claimed_(std::move(other.claimed_)) {
  other.claimed_.clear();
}

GradReductionClaim& GradReductionClaim::operator=(GradReductionClaim&& other) noexcept {
  if (this != &other) {
    release();
    claimed_ = std::move(other.claimed_);
    other.claimed_.clear();
  }
  return *this;
}

void GradReductionClaim::release() {
  std::lock_guard<std::mutex> lock(claims_mutex());
  for (const Variable& p : claimed_) {
    claims().erase(p.impl());
    p.set_grad_held_by("");
  }
  claimed_.clear();
}

}  // namespace dist
}  // namespace tessera
