// relabel(from, to, name, dtype): a copy of the safetensors file `from` at `to` with tensor
// `name`'s dtype string replaced by `dtype` of the same width ("F32" -> "I32"), so the file stays
// well-formed and only a loader that compares dtypes can tell. The loaders' dtype checks
// (dist/checkpoint.h, nn/serialize.h) are tested with it.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

namespace tessera {
namespace testing {

inline void relabel(const std::string& from, const std::string& to, const std::string& name,
                    const std::string& dtype) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string field = "\"" + name + "\":{\"dtype\":\"";
  const size_t at = bytes.find(field);
  ASSERT_NE(at, std::string::npos) << name;
  const size_t begin = at + field.size();
  ASSERT_EQ(bytes.find('"', begin) - begin, dtype.size()) << name;
  bytes.replace(begin, dtype.size(), dtype);
  std::ofstream(to, std::ios::binary).write(bytes.data(), bytes.size());
}

}  // namespace testing
}  // namespace tessera
