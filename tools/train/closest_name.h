// "did you mean ...?": the known name closest to a mistyped one, as argparse (suggest_on_error)
// and git ("The most similar command is") suggest it.
//
// Closeness is the edit distance with transpositions (Damerau's optimal string alignment: an
// insertion, a deletion, a substitution or a swap of two neighbours costs 1), so
//
//   stratgy  -> strategy    (one letter left out)
//   strategy -> strategy    ("sr" for "rs": one swap)
//
// A name is offered only when it is at most a third of the typed word away (at least 1), so
// "bogus" gets no suggestion rather than a wild one. Names tied at the smallest distance are
// told apart by the number they differ in, compared as a number (zero4 -> zero3, resnet30 ->
// resnet32); names still tied are all offered ("zero1 or zero2").
#pragma once

#include <string>
#include <vector>

namespace tessera {
namespace train {

// The optimal string alignment distance between a and b.
int edit_distance(const std::string& a, const std::string& b);

// The names of `known` closest to `typed` (usually one; "" and no names when none is close).
std::vector<std::string> closest_names(const std::string& typed,
                                       const std::vector<std::string>& known);

// "; did you mean --strategy?" (prefix "--") or "; did you mean zero3?" (prefix ""), or "".
std::string did_you_mean(const std::string& typed, const std::vector<std::string>& known,
                         const std::string& prefix);

}  // namespace train
}  // namespace tessera
