// The text a GPT trains on: a corpus read from disk, cut into a training and a validation text.
//
// The default corpus is the `fortunes` Debian package's quotations (fortunes and fortunes-min,
// tools/setup.sh installs them): 43 files of English text, ~2.5 MB, ~15,000 quotations, jokes,
// definitions and short poems, under /usr/share/games/fortunes. It is real prose of many
// authors, small enough to tokenize in a second and to overfit a gpt-nano on two cores, and it
// installs from Debian's archive like everything else here. Each file holds quotations
// separated by lines of a single '%' (the format strfile(1) indexes):
//
//   "If it ain't broke, don't fix it."
//           -- Bert Lantz
//   %
//   "The one charm of marriage ...
//
// The corpus reads the files in a fixed order (kFortuneFiles) and turns each into quotations:
// the '%' lines are file format, not text, so they become blank lines: every quotation is
// followed by one empty line, as paragraphs are in prose (GPT-2 tokenizes the "\n\n" between
// them much as it saw paragraph breaks in WebText; a '%' line kept would be a token the model
// learns to print). Some quotations underline or embolden with backspaces, as nroff did
// ("_\bw" is an underlined w); the overstruck character and its backspace are dropped, leaving
// the letter that was printed last. Every tenth quotation (the 10th, 20th, ... in file order)
// goes to validation, the rest to training: both splits draw from every file and author, which
// the last 10% of the stream (a few files, the last in alphabetical order) would not.
//
// A text file of one's own (--data=text:FILE) is read as it is; its last tenth, from the first
// line that starts there, is the validation text.
#pragma once

#include <string>
#include <vector>

namespace tessera {
namespace data {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

struct TextCorpus {
  std::string name;        // "fortunes", or the file's name: part of the token files' names
  std::string train, val;  // the two texts
};

// The files of the fortunes and fortunes-min packages in Debian 12, in the corpus's order.
extern const std::vector<std::string> kFortuneFiles;

// One fortune file's text -> its quotations, each ending in '\n', backspace overstrikes removed.
std::vector<std::string> split_fortunes(const std::string& file_text);

// The fortunes corpus (an Error naming a missing file and tools/setup.sh).
TextCorpus fortunes_corpus(const std::string& dir = kFortunesDir);
// A plain text file, split 90/10 at a line start.
TextCorpus text_file_corpus(const std::string& path);

}  // namespace data
}  // namespace tessera
