// The train tool's --help text, read off the flag table: a section per topic, a line per flag
// with the values it takes, what it does, its default and the strategies it needs.
#include <sstream>

#include "tools/train/flag_table.h"

namespace tessera {
namespace train {

namespace {

constexpr size_t kWidth = 100;  // columns
constexpr size_t kHelpColumn = 30;

// Within brackets a space does not break a line ("[default: 25]" stays whole).
constexpr char kKeep = '\x01';

// `first` (the flag), then `text` from column `indent`, wrapped at kWidth; when `first` is too
// long, the text starts on the next line.
std::string wrapped(const std::string& first, const std::string& text, size_t indent) {
  std::string out, line = first;
  if (first.size() + 2 <= indent || first.empty()) {
    line.resize(indent, ' ');
  } else {
    out = first + "\n";
    line = std::string(indent, ' ');
  }
  std::istringstream words(text);
  std::string word;
  bool empty = true;
  while (words >> word) {
    if (!empty && line.size() + 1 + word.size() > kWidth) {
      out += line + "\n";
      line = std::string(indent, ' ');
      empty = true;
    }
    line += (empty ? "" : " ") + word;
    empty = false;
  }
  out += line + "\n";
  for (char& ch : out) {
    if (ch == kKeep) ch = ' ';
  }
  return out;
}

// "[default: the model's]" as one word for wrapped().
std::string bracketed(std::string text) {
  for (char& ch : text) {
    if (ch == ' ') ch = kKeep;
  }
  return " [" + text + "]";
}

std::string described(const Flag& f) {
  std::string s = f.help;
  const std::string fallback = shown_default(f);
  if (!fallback.empty()) s += bracketed("default: " + fallback);
  if (!f.strategies.empty()) {
    std::string list;
    for (const std::string& name : f.strategies) list += (list.empty() ? "" : "|") + name;
    s += bracketed("--strategy=" + list + " only");
  }
  return s;
}

}  // namespace

std::string usage() {
  std::string s = R"(train: trains a model with tessera and reports its test accuracy.

  bazel run -c opt //tools:train -- --model=logistic
  mpirun -np 2 bazel-bin/tools/train --model=logistic --strategy=zero1

Every flag is --name=VALUE. What combines with what: --support-table prints the support
table (docs/COMPOSITION.md); combinations it refuses exit with code 2, saying why.
)";
  for (const FlagSection& section : flag_sections()) {
    s += "\n" + section.title + ":\n";
    for (const Flag& f : section.flags) {
      s += wrapped("  --" + f.name + "=" + f.value.form, described(f), kHelpColumn);
    }
    if (!section.note.empty()) s += wrapped("", section.note, 2);
  }
  return s + R"(
defaults:
  logistic  adam lr 1e-3, batch 64, 5 epochs, cosine
  mlp       adam lr 1e-3, batch 64, 10 epochs, cosine
  resnet*   sgd (nesterov, momentum 0.9) lr 0.1, weight decay 5e-4, batch 128,
            cosine, random crop + flip, 10 epochs (ResNet-20: 0.93 test accuracy)
)";
}

}  // namespace train
}  // namespace tessera
