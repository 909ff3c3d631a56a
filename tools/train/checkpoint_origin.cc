#include "tools/train/checkpoint_origin.h"

#include <sys/stat.h>

#include "dist/zero/checkpoint_index.h"

namespace tessera {
namespace train {

std::string model_flags(const Config& c) {
  std::string s = "--model=" + c.model;
  if (language_model(c)) {
    // The GPT's shape as resolved (the named config's, with the flags given over it), and its
    // tokenizer (the vocabulary's size).
    const models::GPTConfig g = gpt_config(c, 256);
    s += " --context=" + std::to_string(g.context) + " --n-layer=" + std::to_string(g.n_layer) +
         " --n-head=" + std::to_string(g.n_head) + " --n-embd=" + std::to_string(g.n_embd);
    if (c.tokenizer != Config().tokenizer) s += " --tokenizer=" + c.tokenizer;
  } else if (c.num_classes != Config().num_classes) {
    s += " --num-classes=" + std::to_string(c.num_classes);
  }
  return s;
}

Metadata checkpoint_origin(const Config& c) {
  return {{"model", c.model}, {"model_flags", model_flags(c)}, {"optimizer", c.optimizer}};
}

Metadata read_checkpoint_strings(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return dist::zero::read_index(path).extra;
  }
  return read_safetensors_header(path).metadata;
}

void check_checkpoint_origin(const Metadata& written, const Config& c, const std::string& path,
                             const std::string& given) {
  const auto said = [&](const char* key) {
    const auto it = written.find(key);
    return it == written.end() ? std::string() : it->second;
  };
  // The model as precisely as the checkpoint says it: its flags, else its name alone.
  std::string then = said("model_flags"), now = model_flags(c);
  if (then.empty() && !said("model").empty()) {
    then = "--model=" + said("model");
    now = "--model=" + c.model;
  }
  if (!said("optimizer").empty()) {
    then += (then.empty() ? "" : " ") + std::string("--optimizer=") + said("optimizer");
    now += " --optimizer=" + c.optimizer;
  }
  if (then.empty() || then == now) return;
  if (then.rfind("--optimizer", 0) == 0) now = now.substr(now.find("--optimizer"));
  throw FlagError("--resume=" + given + ": " + path + " was written by " + then +
                  "; this run is " + now +
                  " (resume with the same model and optimizer, or start afresh without --resume)");
}

}  // namespace train
}  // namespace tessera
