#include "dist/zero/offload/store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "tensor/ops.h"

namespace tessera {
namespace dist {
namespace offload {

int64_t round_up_to_block(int64_t bytes) {
  return (bytes + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
}

StagingBuffer::StagingBuffer(int64_t capacity, bool pinned) : capacity_(round_up_to_block(capacity)) {
  base_ = empty({capacity_ + kBlockBytes}, TensorOptions(kU8));
  if (pinned) base_ = base_.pin_memory();
  const auto address = reinterpret_cast<uintptr_t>(base_.raw_data());
  offset_ = static_cast<int64_t>((kBlockBytes - address % kBlockBytes) % kBlockBytes);
  data_ = static_cast<char*>(base_.raw_data()) + offset_;
}

Tensor StagingBuffer::view(DType dtype, int64_t numel) const {
  const int64_t size = static_cast<int64_t>(element_size(dtype));
  TS_CHECK(numel * size <= capacity_, "StagingBuffer: ", numel, " elements of ", dtype,
           " do not fit in ", capacity_, " bytes");
  TS_INTERNAL_ASSERT(offset_ % size == 0, "staging offset ", offset_, " is not a multiple of ", size);
  return Tensor(base_.storage(), {numel}, {1}, offset_ / size, dtype);
}

StagingBuffer StagingBuffer::at(int64_t offset) const {
  TS_CHECK(offset % kBlockBytes == 0 && offset >= 0 && offset <= capacity_, "StagingBuffer::at: "
           "offset ", offset, " is not a block boundary within ", capacity_, " bytes");
  StagingBuffer out = *this;
  out.data_ = static_cast<char*>(data_) + offset;
  out.offset_ += offset;
  out.capacity_ -= offset;
  return out;
}

Segment OffloadStore::reserve(int64_t bytes) {
  TS_CHECK(!committed_, "OffloadStore::reserve: the store was already committed");
  const Segment s{reserved_, round_up_to_block(bytes)};
  reserved_ += s.bytes;
  return s;
}

void OffloadStore::check_transfer(const Segment& segment, const StagingBuffer& buffer,
                                  const char* what) const {
  TS_CHECK(committed_, "OffloadStore::", what, ": commit() the store first");
  TS_CHECK(segment.offset >= 0 && segment.offset + segment.bytes <= reserved_ &&
               buffer.capacity() >= segment.bytes,
           "OffloadStore::", what, ": segment [", segment.offset, ", +", segment.bytes,
           ") outside the ", reserved_, " bytes reserved or larger than its buffer of ",
           buffer.capacity());
}

// ---- Host ---------------------------------------------------------------------------------------

void HostStore::commit() {
  memory_ = empty({reserved_}, TensorOptions(kU8));
  if (pinned_) memory_ = memory_.pin_memory();
  committed_ = true;
}

// A copy in host memory finishes before it returns: the request is already done.
IoRequest HostStore::read(const Segment& segment, const StagingBuffer& buffer) {
  check_transfer(segment, buffer, "read");
  std::memcpy(buffer.data(), static_cast<char*>(memory_.raw_data()) + segment.offset, segment.bytes);
  bytes_read_ += segment.bytes;
  return IoRequest();
}

IoRequest HostStore::write(const Segment& segment, const StagingBuffer& buffer) {
  check_transfer(segment, buffer, "write");
  std::memcpy(static_cast<char*>(memory_.raw_data()) + segment.offset, buffer.data(), segment.bytes);
  bytes_written_ += segment.bytes;
  return IoRequest();
}

// ---- Disk ---------------------------------------------------------------------------------------

DiskStore::DiskStore(const std::string& dir, int io_threads, const char* who,
                     const std::string& name)
    : who_(who), directory_(dir, who), pool_(std::make_unique<IoPool>(io_threads)) {
  file_ = (std::filesystem::path(directory_.path()) / (name + ".bin")).string();
  // O_DIRECT where the file system has it: the transfers then bypass the page cache, which would
  // otherwise keep the "offloaded" bytes in memory and hide the disk's real bandwidth.
  fd_ = ::open(file_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0600);
  direct_ = fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL) fd_ = ::open(file_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  TS_CHECK(fd_ >= 0, who, ": the offload directory '", dir, "' is not writable: creating '", file_,
           "' failed: ", std::strerror(errno));
}

DiskStore::~DiskStore() {
  pool_.reset();  // finishes the requests in flight
  if (fd_ >= 0) ::close(fd_);
}

void DiskStore::commit() {
  check_free_space(directory_.path(), reserved_, who_.c_str());
  if (reserved_ > 0) {
    const int rc = ::posix_fallocate(fd_, 0, reserved_);
    TS_CHECK(rc == 0, who_, ": allocating ", reserved_, " bytes for the offloaded state in '", file_,
             "' failed: ", std::strerror(rc));
  }
  committed_ = true;
}

IoRequest DiskStore::read(const Segment& segment, const StagingBuffer& buffer) {
  check_transfer(segment, buffer, "read");
  bytes_read_ += segment.bytes;
  return pool_->read(fd_, file_, buffer.data(), segment.bytes, segment.offset);
}

IoRequest DiskStore::write(const Segment& segment, const StagingBuffer& buffer) {
  check_transfer(segment, buffer, "write");
  bytes_written_ += segment.bytes;
  return pool_->write(fd_, file_, buffer.data(), segment.bytes, segment.offset);
}

std::unique_ptr<OffloadStore> make_store(const Offload& options, OffloadTier tier, const char* who,
                                         const std::string& name, bool pinned) {
  options.validate(who);
  switch (tier) {
    case OffloadTier::kHost: return std::make_unique<HostStore>(pinned);
    case OffloadTier::kDisk: return std::make_unique<DiskStore>(options.dir(), options.io_threads(), who, name);
    case OffloadTier::kDevice: break;
  }
  TS_FAIL(who, ": the device tier has no store (nothing is offloaded)");
}

}  // namespace offload
}  // namespace dist
}  // namespace tessera
