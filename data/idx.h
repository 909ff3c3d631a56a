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
// file holds fewer): the header is checked as above, the data after them is not inflated, so
// damage further on, or bytes past what the header describes, go unnoticed. A quick run on the
// first 2,000 of Fashion-MNIST's 60,000 training images reads 1.6 MB instead of 47 MB.
Tensor read_idx(const std::string& path, int64_t rows = -1);

}  // namespace data
}  // namespace tessera
