// IDX files: the format of MNIST and Fashion-MNIST (LeCun et al.), plain or gzip'd.
//
// Layout: two zero bytes, a type byte (0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32,
// 0x0E f64), a rank byte, then `rank` big-endian u32 dimensions, then the elements,
// big-endian, row-major. read_idx checks each of these, that the element and byte counts fit
// in 64 bits, and that the file holds exactly the elements its header promises; any problem is
// an Error naming the file and what is wrong. A gzip'd file is inflated a chunk at a time, never
// held past what its header promises (and one byte more). zlib's verdict comes before the
// sizes: a damaged stream or trailer, or a stream cut short, is "'<file>' is corrupt: <zlib's
// reason>" (e.g. "incorrect data check"), even where the damage made it decode to more bytes
// than the header describes; to tell that from a file that really holds more, a stream that
// runs past the header's size is read on, and discarded, to its end (at most 64 MiB further,
// so a gzip bomb costs bounded time and no memory) before "unexpected bytes after" is reported.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace tessera {
namespace data {

// u8 files give u8 tensors, i8/i16/i32 give i32, f32 gives f32, f64 gives f64.
//
// rows >= 0 reads only the first `rows` entries along the first dimension (all of them when the
// file holds fewer): the header is checked as above, the data after them is not inflated. What a
// whole read finds at the end of the file is checked from its size on disk instead
// (idx_stored_size.h): a plain file must be exactly as long as its header implies, a gzip'd
// one's trailer (ISIZE) must give that length mod 2^32. So a file cut short, or one with bytes
// after its data, is an error whatever the rows; only damage inside a gzip stream that leaves
// its trailer intact goes unnoticed. A quick run on the first 2,000 of Fashion-MNIST's 60,000
// training images reads 1.6 MB instead of 47 MB.
Tensor read_idx(const std::string& path, int64_t rows = -1);

// The shape the file's header declares, read (and checked as above) without the data: how a
// caller compares files before reading them, e.g. the image and label counts of a dataset.
Shape read_idx_shape(const std::string& path);

}  // namespace data
}  // namespace tessera
