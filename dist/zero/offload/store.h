// OffloadStore: the tiers below the device as one interface. A store holds segments reserved
// once (their sizes are known before training: a shard's state does not grow), moved whole
// between a segment and a staging buffer in memory:
//
//   reserve(bytes) ... reserve(bytes)  commit()         then per step, per piece:
//   [seg 0][seg 1][seg 2] ...          space checked    read(seg, staging)  -> IoRequest
//   (4 KiB aligned, whole blocks)      and allocated    write(seg, staging) -> IoRequest
//
// HostStore keeps the segments in host memory (page-locked for a GPU's state, on a CUDA build), DiskStore in one file per rank under the offload directory (dist/zero/offload/
// job_directory.h), read and written with O_DIRECT where the file system allows it, so the
// bytes really cross the disk rather than the page cache. Both count the bytes they move.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/zero/offload/io_pool.h"
#include "dist/zero/offload/job_directory.h"
#include "dist/zero/offload/offload.h"
#include "tensor/tensor.h"

namespace tessera {
namespace dist {
namespace offload {

// Transfers are in whole blocks of this size, from buffers aligned to it (O_DIRECT's rule).
constexpr int64_t kBlockBytes = 4096;
int64_t round_up_to_block(int64_t bytes);

struct Segment {
  int64_t offset = 0;
  int64_t bytes = 0;  // a multiple of kBlockBytes
};

// Memory a segment is read into and written from: `capacity` bytes at a block-aligned address,
// allocated as an ordinary (counted) tensor, page-locked when `pinned` (CUDA builds, so copies
// to the device run asynchronously). view() is a tensor of its first elements.
class StagingBuffer {
 public:
  StagingBuffer() = default;
  StagingBuffer(int64_t capacity, bool pinned);
  Tensor view(DType dtype, int64_t numel) const;
  // The same memory from `offset` bytes on (a multiple of kBlockBytes): a piece's place in a
  // buffer read or written piece by piece.
  StagingBuffer at(int64_t offset) const;
  void* data() const { return data_; }
  int64_t capacity() const { return capacity_; }

 private:
  Tensor base_;  // u8, capacity + one block, so an aligned start fits
  void* data_ = nullptr;
  int64_t offset_ = 0;  // of data_ in base_, bytes
  int64_t capacity_ = 0;
};

class OffloadStore {
 public:
  virtual ~OffloadStore() = default;
  virtual OffloadTier tier() const = 0;
  // Room for `bytes` (rounded up to whole blocks); before commit() only.
  Segment reserve(int64_t bytes);
  // Checks and allocates the reserved bytes: a clear error now, before training, rather than a
  // full disk halfway through it.
  virtual void commit() = 0;
  // The whole segment from or into `buffer` (capacity >= segment.bytes).
  virtual IoRequest read(const Segment& segment, const StagingBuffer& buffer) = 0;
  virtual IoRequest write(const Segment& segment, const StagingBuffer& buffer) = 0;

  int64_t reserved_bytes() const { return reserved_; }
  int64_t bytes_read() const { return bytes_read_; }
  int64_t bytes_written() const { return bytes_written_; }

 protected:
  void check_transfer(const Segment& segment, const StagingBuffer& buffer, const char* what) const;
  bool committed_ = false;
  int64_t reserved_ = 0;
  std::atomic<int64_t> bytes_read_{0};
  std::atomic<int64_t> bytes_written_{0};
};

class HostStore : public OffloadStore {
 public:
  // `pinned`: page-locked memory (the state of a GPU, on a CUDA build).
  explicit HostStore(bool pinned = false) : pinned_(pinned) {}
  OffloadTier tier() const override { return OffloadTier::kHost; }
  void commit() override;
  IoRequest read(const Segment& segment, const StagingBuffer& buffer) override;
  IoRequest write(const Segment& segment, const StagingBuffer& buffer) override;

 private:
  bool pinned_;
  Tensor memory_;  // u8, reserved_bytes()
};

class DiskStore : public OffloadStore {
 public:
  // `dir`: the offload directory (this store's file, NAME.bin, goes in a JobDirectory inside it).
  DiskStore(const std::string& dir, int io_threads, const char* who,
            const std::string& name = "optimizer_state");
  ~DiskStore() override;
  OffloadTier tier() const override { return OffloadTier::kDisk; }
  // Checks statvfs's free bytes against reserved_bytes(), then allocates the file whole
  // (posix_fallocate), so neither a full disk nor a shared one fails mid-training.
  void commit() override;
  IoRequest read(const Segment& segment, const StagingBuffer& buffer) override;
  IoRequest write(const Segment& segment, const StagingBuffer& buffer) override;

  const JobDirectory& directory() const { return directory_; }
  const std::string& file() const { return file_; }
  // Whether the file is open with O_DIRECT (not on file systems without it, e.g. tmpfs).
  bool direct() const { return direct_; }

 private:
  std::string who_;
  JobDirectory directory_;
  std::string file_;
  int fd_ = -1;
  bool direct_ = false;
  std::unique_ptr<IoPool> pool_;  // joined before the file is closed and its directory removed
};

// The store of a tier below the device: host or disk (`who` names the caller in errors, `name`
// the disk tier's file, `pinned` the host tier's page-locked memory for a GPU's state).
std::unique_ptr<OffloadStore> make_store(const Offload& options, OffloadTier tier, const char* who,
                                         const std::string& name = "optimizer_state",
                                         bool pinned = false);

}  // namespace offload
}  // namespace dist
}  // namespace tessera
