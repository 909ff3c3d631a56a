#include "data/tokenizer.h"

#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "tensor/check.h"

namespace tessera {
namespace data {

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& gpt2_dir) {
  if (name == "gpt2") return std::make_unique<BpeTokenizer>(gpt2_dir);
  if (name == "byte") return std::make_unique<ByteTokenizer>();
  TS_FAIL("make_tokenizer: unknown tokenizer \"", name, "\" (expected \"gpt2\" or \"byte\")");
}

}  // namespace data
}  // namespace tessera
