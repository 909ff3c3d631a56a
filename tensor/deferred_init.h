// DeferredInit: build a model without allocating its parameters (DeepSpeed's zero.Init,
// torchdistx's deferred_init, PyTorch's meta device followed by materialization).
//
// While a DeferredInit is alive on this thread, every new tensor's storage is deferred: it has a
// shape and a dtype but no bytes. The initializers a constructor runs on a whole tensor
// (fill_, uniform_, normal_, and nn::init's functions built on them) do not compute: they record
// themselves in the storage, claiming the generator's counters exactly as the eager call would
// (tensor/random.h: Philox is counter-based, so the values are a function of seed and offset).
// The last initializer wins, as it would have overwritten the others.
//
//   { DeferredInit deferred;  model = models::GPT(config); }   // shapes only: no bytes
//   materialize(p.data());   // allocated and filled: bit for bit the eager model's values
//
// So a model larger than memory can be built and then materialized one ZeRO-3 unit at a time,
// each unit sharded (and offloaded) before the next is made (dist::FullyShardedDataParallel does
// this). Any other use of a deferred tensor's values (a copy, an op, data()) is an error that
// says it is deferred, never garbage.
#pragma once

#include "tensor/tensor.h"

namespace tessera {

class DeferredInit {
 public:
  DeferredInit();
  ~DeferredInit();
  DeferredInit(const DeferredInit&) = delete;
  DeferredInit& operator=(const DeferredInit&) = delete;
  // Whether tensors made on this thread now are deferred.
  static bool active();

 private:
  bool previous_;
};

// Whether `t`'s storage is deferred (built under DeferredInit, not yet materialized).
bool is_deferred(const Tensor& t);

// Allocates and fills `t`'s deferred storage with its recorded initializer (zeros if none ran);
// a no-op for an ordinary tensor. `t` must view its whole storage (a parameter does).
void materialize(const Tensor& t);

namespace detail {
// Initializers record themselves on a deferred tensor instead of computing: true when `t` was
// deferred and the fill is recorded. `t` must view its whole storage contiguously.
bool record_deferred_fill(const Tensor& t, const DeferredFill& fill, const char* op);
}  // namespace detail

}  // namespace tessera
