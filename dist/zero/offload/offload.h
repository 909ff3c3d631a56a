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
// state, is not built. This phase offloads the optimizer state (Adam's exp_avg and exp_avg_sq, SGD's momentum):
//   dist::ZeroOptions().offload(dist::Offload().optimizer(dist::OffloadTier::kDisk).dir("/nvme"))
// or the same Offload given to zero::GroupedShardOptimizer over a ZeRO-3 model's flat shards.
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
  const std::string& dir() const { return dir_; }
  int64_t piece_numel() const { return piece_numel_; }
  int io_threads() const { return io_threads_; }
  bool any() const { return optimizer_ != OffloadTier::kDevice; }
  // Throws, naming `who` and the values, for a disk tier without a directory, a piece size that
  // is not a positive multiple of 1024, or fewer than one I/O thread.
  void validate(const char* who) const;

 private:
  OffloadTier optimizer_ = OffloadTier::kDevice;
  std::string dir_;
  int64_t piece_numel_ = int64_t{1} << 20;  // 4 MiB of f32 per state tensor
  int io_threads_ = 2;
};

}  // namespace dist
}  // namespace tessera
