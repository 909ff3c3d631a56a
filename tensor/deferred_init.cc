#include "tensor/deferred_init.h"

#include "tensor/backend.h"

namespace tessera {

namespace {
thread_local bool deferring = false;

void check_whole(const Tensor& t, const char* op) {
  TS_CHECK(t.is_contiguous() && t.offset() == 0 &&
               static_cast<size_t>(t.nbytes()) == t.storage()->nbytes(),
           op, ": a deferred tensor (tensor/deferred_init.h) is initialized or materialized "
           "whole; this ", t.shape(), " ", t.dtype(), " tensor views ", t.nbytes(), " of its "
           "storage's ", t.storage()->nbytes(), " bytes");
}
}  // namespace

DeferredInit::DeferredInit() : previous_(deferring) { deferring = true; }
DeferredInit::~DeferredInit() { deferring = previous_; }
bool DeferredInit::active() { return deferring; }

bool is_deferred(const Tensor& t) { return t.defined() && t.storage()->deferred(); }

void materialize(const Tensor& t) {
  if (!is_deferred(t)) return;
  check_whole(t, "materialize");
  Storage& storage = *t.storage();
  const DeferredFill fill = storage.deferred_fill();
  storage.end_deferral();
  storage.materialize();
  Backend& b = backend(t.device());
  switch (fill.kind) {
    case DeferredFill::Kind::kNone: b.fill(t, 0.0); break;
    case DeferredFill::Kind::kConstant: b.fill(t, fill.a); break;
    case DeferredFill::Kind::kUniform: b.uniform(t, fill.a, fill.b, fill.seed, fill.offset); break;
    case DeferredFill::Kind::kNormal: b.normal(t, fill.a, fill.b, fill.seed, fill.offset); break;
  }
}

namespace detail {
bool record_deferred_fill(const Tensor& t, const DeferredFill& fill, const char* op) {
  if (!is_deferred(t)) return false;
  check_whole(t, op);
  t.storage()->deferred_fill() = fill;
  return true;
}
}  // namespace detail

}  // namespace tessera
