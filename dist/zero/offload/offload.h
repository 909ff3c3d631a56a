// Offload: where ZeRO keeps a kind of training state (ZeRO-Offload, Ren et al. 2021; ZeRO-Infinity,
// Rajbhandari et al. 2021), and the options of the tiers below the device.
//
//   tier      where the state lives between steps        how the step reaches it
//   device    the parameters' device (no offload)         in place
//   host      host memory (page-locked for a GPU)         copied in piece by piece, stepped,
//                                                         copied back
//   disk      files under dir(), one per rank, in         read piece by piece in large aligned
//             large aligned blocks                        blocks on an I/O thread pool, the
//                                                         next piece read while this one steps,
//                                                         written back behind the step
//
// The step runs where the parameters are and the state's pieces are brought to it (ZeRO-
// Infinity's way); ZeRO-Offload's other choice, Adam stepped on the CPU beside the host-resident
// state, is not built. Three kinds of state have a tier each:
//   optimizer   Adam's exp_avg and exp_avg_sq, SGD's momentum (ZeRO-1/2/3):
//                 dist::ZeroOptions().offload(dist::Offload().optimizer(kDisk).dir("/nvme"))
//   params      a ZeRO-3 unit's f32 master shard: read for the unit's all-gather and for the
//               step, written back by the step (dist/zero/offload/shard_home.h)
//   gradients   a ZeRO-3 unit's averaged gradient shard: written by the reduce-scatter, read by
//               the step and by gradient clipping
// Parameters and gradients are offloaded through FullyShardedOptions().offload(o), the optimizer
// state through the same Offload given to zero::GroupedShardOptimizer over the flat shards
// (ZeRO-Infinity's offload_param and offload_optimizer).
// The names follow DeepSpeed's offload_optimizer {device: cpu | nvme, nvme_path} and PyTorch
// FSDP's CPUOffload.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {
namespace dist {

enum class OffloadTier { kDevice, kHost, kDisk };

// "device", "host", "disk"; parse_offload_tier is its inverse (an error names the choices).
const char* offload_tier_name(OffloadTier tier);
OffloadTier parse_offload_tier(const std::string& name);

class Offload {
 public:
  // Where the optimizer state lives between steps.
  Offload& optimizer(OffloadTier t) { optimizer_ = t; return *this; }
  // Where a ZeRO-3 unit's master shard lives between its uses (FullyShardedOptions::offload).
  Offload& params(OffloadTier t) { params_ = t; return *this; }
  // Where a ZeRO-3 unit's gradient shard lives between backward and the step.
  Offload& gradients(OffloadTier t) { gradients_ = t; return *this; }
  // All three in one tier (the train tool's --offload=all).
  Offload& all(OffloadTier t) { return optimizer(t).params(t).gradients(t); }
  // The disk tier's directory: each rank's files go in a subdirectory of its own, removed when
  // the optimizer is destroyed (and, after a killed run, at the next start in this directory).
  Offload& dir(std::string path) { dir_ = std::move(path); return *this; }
  // Elements stepped at once (DeepSpeed's sub_group_size): the state is streamed through memory
  // in pieces of at most this many elements, a multiple of 1024 (a piece of f32 state is then
  // whole 4 KiB blocks, as O_DIRECT needs). Resident: a few pieces per state tensor.
  Offload& piece_numel(int64_t n) { piece_numel_ = n; return *this; }
  // Threads of the disk tier's I/O pool (pread/pwrite).
  Offload& io_threads(int n) { io_threads_ = n; return *this; }

  OffloadTier optimizer() const { return optimizer_; }
  OffloadTier params() const { return params_; }
  OffloadTier gradients() const { return gradients_; }
  const std::string& dir() const { return dir_; }
  int64_t piece_numel() const { return piece_numel_; }
  int io_threads() const { return io_threads_; }
  bool any() const {
    return optimizer_ != OffloadTier::kDevice || params_ != OffloadTier::kDevice ||
           gradients_ != OffloadTier::kDevice;
  }
  // Parameters or gradients below the device (the shards are then brought in unit by unit).
  bool shards() const {
    return params_ != OffloadTier::kDevice || gradients_ != OffloadTier::kDevice;
  }
  // Throws, naming `who` and the values, for a disk tier without a directory, a piece size that
  // is not a positive multiple of 1024, fewer than one I/O thread, or parameters or gradients
  // offloaded while the optimizer state stays on the device (the step streams the offloaded
  // shards through memory with their state, unit by unit; a device-resident state would need
  // every shard in memory at once).
  void validate(const char* who) const;

 private:
  OffloadTier optimizer_ = OffloadTier::kDevice;
  OffloadTier params_ = OffloadTier::kDevice;
  OffloadTier gradients_ = OffloadTier::kDevice;
  std::string dir_;
  int64_t piece_numel_ = int64_t{1} << 20;  // 4 MiB of f32 per state tensor
  int io_threads_ = 2;
};

}  // namespace dist
}  // namespace tessera
