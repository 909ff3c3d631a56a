// "did you mean ...?" (tools/train/closest_name.h): the distance on literal pairs, and which
// names are offered, asserted name by name.
#include "tools/train/closest_name.h"

#include <gtest/gtest.h>

namespace tessera {
namespace train {
namespace {

using Names = std::vector<std::string>;

TEST(ClosestName, EditDistanceCountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(edit_distance("", ""), 0);
  EXPECT_EQ(edit_distance("", "ddp"), 3);
  EXPECT_EQ(edit_distance("stratgy", "strategy"), 1);   // one left out
  EXPECT_EQ(edit_distance("strattegy", "strategy"), 1);  // one too many
  EXPECT_EQ(edit_distance("zero4", "zero3"), 1);         // one replaced
  EXPECT_EQ(edit_distance("sratetgy", "strategy"), 2);   // two swaps
  EXPECT_EQ(edit_distance("ab", "ba"), 1);               // a swap, not two substitutions
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);      // Levenshtein's example
  EXPECT_EQ(edit_distance("ca", "abc"), 3);              // optimal string alignment, not 2
}

TEST(ClosestName, OffersTheNearestNameOnlyWhenItIsClose) {
  const Names flags = {"strategy", "stages", "seed", "lr", "model", "micro-batches"};
  EXPECT_EQ(closest_names("stratgy", flags), Names{"strategy"});
  EXPECT_EQ(closest_names("modle", flags), Names{"model"});
  EXPECT_EQ(closest_names("micro-batch", flags), Names{"micro-batches"});
  EXPECT_EQ(closest_names("bogus", flags), Names{});  // 5 letters: at most 1 away
  EXPECT_EQ(closest_names("xr", flags), Names{"lr"});  // short words: 1 away
  EXPECT_EQ(closest_names("x", flags), Names{});
}

TEST(ClosestName, TiesAreToldApartByTheNumberThatDiffers) {
  const Names strategies = {"single", "ddp", "zero1", "zero2", "zero3", "pipeline"};
  EXPECT_EQ(closest_names("zero4", strategies), Names{"zero3"});
  EXPECT_EQ(closest_names("zero0", strategies), Names{"zero1"});
  const Names models = {"resnet20", "resnet32", "resnet56", "resnet18"};
  EXPECT_EQ(closest_names("resnet30", models), Names{"resnet32"});
  EXPECT_EQ(closest_names("resnet19", models), Names{"resnet18"});
  // Not a number: every tied name is offered.
  EXPECT_EQ(closest_names("zerox", strategies), (Names{"zero1", "zero2", "zero3"}));
}

TEST(ClosestName, DidYouMeanReadsAsASentence) {
  EXPECT_EQ(did_you_mean("stratgy", {"strategy", "seed"}, "--"), "; did you mean --strategy?");
  EXPECT_EQ(did_you_mean("ab", {"aa", "bb"}, ""), "; did you mean aa or bb?");
  EXPECT_EQ(did_you_mean("a", {"b", "c", "d"}, ""), "; did you mean b, c or d?");
  EXPECT_EQ(did_you_mean("bogus", {"strategy"}, "--"), "");
}

}  // namespace
}  // namespace train
}  // namespace tessera
