// Which process group carries collectives on a device's tensors.
//
// MPI moves CPU memory; CUDA tensors want NCCL (GPU-to-GPU, on a stream). A build with
// --config=cuda registers a factory that makes a ProcessGroupNCCL over the same ranks as a
// given group; group_for_device() then hands DDP and ZeRO the NCCL group for CUDA parameters
// and the given group for CPU ones. Without a factory (a CPU-only build) it returns the given
// group, which stages CUDA tensors through host memory.
#pragma once

#include <functional>
#include <memory>

#include "dist/process_group.h"
#include "tensor/device.h"

namespace tessera {
namespace dist {

using DeviceGroupFactory = std::function<std::shared_ptr<ProcessGroup>(
    const std::shared_ptr<ProcessGroup>& bootstrap, Device device)>;

void register_device_group_factory(DeviceType type, DeviceGroupFactory factory);
bool has_device_group_factory(DeviceType type);

// `group` itself for CPU tensors (or when no factory is registered for the device type);
// otherwise the device's group over the same ranks, created on first use and cached per
// (group, device). The first call for a (group, device) is collective over group's members.
std::shared_ptr<ProcessGroup> group_for_device(const std::shared_ptr<ProcessGroup>& group,
                                               Device device);

}  // namespace dist
}  // namespace tessera
