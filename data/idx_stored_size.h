// What an IDX file's size on disk says about it, read without inflating or reading its data.
//
// read_idx with rows >= 0 stops after the rows it keeps, so it never reaches the end of the
// file, where a whole read finds a file cut short, one that holds more than its header says, or
// a damaged gzip trailer. Two facts at the end of the file stand in for that, and cost nothing:
//
//   plain file   its size (stat) must be the header's bytes plus the data the header implies;
//   gzip'd file  its last 4 bytes, the trailer's ISIZE (RFC 1952: the inflated size mod 2^32,
//                little-endian), must be that same size mod 2^32.
//
//   | 1f 8b ... gzip header | deflate stream ............ | CRC32 (4) | ISIZE (4) |
//                                                                        ^ read here
//
// A gzip file cut short ends in deflate bytes, not in its ISIZE: it fails (but for 1 chance in
// 2^32). Damage inside the stream that leaves the trailer intact is found only by inflating to
// the CRC32, i.e. by a whole read. A file of several gzip members (cat a.gz b.gz) inflates as one
// stream but its last ISIZE counts only the last member: a prefix read rejects it.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/shape.h"

namespace tessera {
namespace data {

// Throws an Error naming the file, the header's shape and the expected and found sizes unless
// the file on disk holds `expected_bytes` (header and data; `gzipped`: inflated, mod 2^32).
void check_stored_size(const std::string& path, bool gzipped, const Shape& header_shape,
                       uint64_t expected_bytes);

}  // namespace data
}  // namespace tessera
