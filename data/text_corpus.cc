#include "data/text_corpus.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tensor/check.h"

namespace tessera {
namespace data {

const std::vector<std::string> kFortuneFiles = {
    "art",       "ascii-art",   "computers",  "cookie",        "debian",       "definitions",
    "disclaimer", "drugs",      "education",  "ethnic",        "food",         "fortunes",
    "goedel",    "humorists",   "kids",       "knghtbrd",      "law",          "linux",
    "linuxcookie", "literature", "love",      "magic",         "medicine",     "men-women",
    "miscellaneous", "news",    "paradoxum",  "people",        "perl",         "pets",
    "platitudes", "politics",   "pratchett",  "riddles",       "science",      "songs-poems",
    "sports",    "startrek",    "tao",        "translate-me",  "wisdom",       "work",
    "zippy",
};

namespace {

std::string read_text(const std::string& path, const char* hint) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in, "cannot open '", path, "': ", std::strerror(errno), hint);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Drops each backspace and the character before it (a whole UTF-8 character).
std::string remove_overstrikes(const std::string& line) {
  std::string out;
  for (char c : line) {
    if (c != '\b') {
      out.push_back(c);
      continue;
    }
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty()) out.pop_back();
  }
  return out;
}

}  // namespace

std::vector<std::string> split_fortunes(const std::string& file_text) {
  std::vector<std::string> quotes;
  std::string current, line;
  std::istringstream lines(file_text);
  while (std::getline(lines, line)) {
    if (line == "%") {
      if (!current.empty()) quotes.push_back(current);
      current.clear();
    } else {
      current += remove_overstrikes(line) + "\n";
    }
  }
  if (!current.empty()) quotes.push_back(current);
  return quotes;
}

TextCorpus fortunes_corpus(const std::string& dir) {
  TextCorpus corpus{"fortunes", "", ""};
  int64_t index = 0;
  for (const std::string& file : kFortuneFiles) {
    const std::string text = read_text(dir + "/" + file,
                                       " (the fortunes corpus is the Debian packages fortunes and "
                                       "fortunes-min: tools/setup.sh, as root, installs them)");
    for (const std::string& quote : split_fortunes(text)) {
      std::string& split = ++index % 10 == 0 ? corpus.val : corpus.train;
      split += quote;
      split += '\n';
    }
  }
  return corpus;
}

TextCorpus text_file_corpus(const std::string& path) {
  const std::string text = read_text(path, "");
  TS_CHECK(!text.empty(), "text_file_corpus: '", path, "' is empty");
  // The validation text starts at the first line that starts in the last tenth.
  size_t cut = text.size() - text.size() / 10;
  while (cut < text.size() && cut > 0 && text[cut - 1] != '\n') ++cut;
  TS_CHECK(cut > 0 && cut < text.size(), "text_file_corpus: '", path, "' (", text.size(),
           " bytes) has no line starting in its last tenth, to be the validation text");
  const std::string name = path.substr(path.find_last_of('/') + 1);
  return {name, text.substr(0, cut), text.substr(cut)};
}

}  // namespace data
}  // namespace tessera
