// DDP communication hooks: what DDP does with a full gradient bucket.
//
// A hook starts the reduction of `bucket` (a flat tensor) across the group and returns its
// Work; when that Work is done the bucket must hold the *sum* over ranks (DDP divides by the
// world size afterwards). The default hook is a plain all-reduce; fp16_compress_hook halves the
// bytes on the wire by sending an f16 copy and converting the result back, as PyTorch's.
#pragma once

#include <functional>
#include <memory>

#include "dist/process_group.h"

namespace tessera {
namespace dist {

using CommHook = std::function<std::shared_ptr<Work>(ProcessGroup& group, const Tensor& bucket)>;

std::shared_ptr<Work> allreduce_hook(ProcessGroup& group, const Tensor& bucket);
std::shared_ptr<Work> fp16_compress_hook(ProcessGroup& group, const Tensor& bucket);

}  // namespace dist
}  // namespace tessera
