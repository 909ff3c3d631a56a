// "state.I.NAME": built, and parsed back only when written as state_key writes it.
#include "optim/state_keys.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace tessera {
namespace optim {
namespace {

TEST(StateKeys, BuiltAndParsedBack) {
  EXPECT_EQ(state_key_prefix(12), "state.12.");
  EXPECT_EQ(state_key(12, "exp_avg"), "state.12.exp_avg");
  for (int64_t i : {int64_t{0}, int64_t{7}, int64_t{123456789012345678}}) {
    const std::optional<StateKey> k = parse_state_key(state_key(i, "exp_avg_sq"));
    ASSERT_TRUE(k.has_value()) << i;
    EXPECT_EQ(k->index, i);
    EXPECT_EQ(k->name, "exp_avg_sq");
  }
}

TEST(StateKeys, TheNameIsEverythingAfterTheIndex) {
  const std::optional<StateKey> k = parse_state_key("state.3.inner.momentum");
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->index, 3);
  EXPECT_EQ(k->name, "inner.momentum");
}

TEST(StateKeys, OtherKeysAreNotStateKeys) {
  for (const std::string key :
       {"state.01.step",                  // leading zero: state_key never writes it
        "state.00.step", "state.-1.step",  // sign
        "state.+1.step", "state.x.step",   // non-digits
        "state.1a.step", "state. 1.step", "state..step",  // no index
        "state.1", "state.1.",             // no name
        "state.", "state", "param_groups.0.lr", "State.0.step", "",
        "state.1234567890123456789.step"}) {  // 19 digits: past what is read
    EXPECT_FALSE(parse_state_key(key).has_value()) << "'" << key << "'";
  }
}

TEST(StateKeys, TheCountBoundsTheIndex) {
  EXPECT_TRUE(parse_state_key("state.1.step", 2).has_value());
  EXPECT_FALSE(parse_state_key("state.2.step", 2).has_value());
  EXPECT_FALSE(parse_state_key("state.0.step", 0).has_value());
  EXPECT_FALSE(parse_state_key("state.01.step", 5).has_value());
}

TEST(StateKeys, ThePrefixAloneSaysWhatAKeyIsMeantAs) {
  EXPECT_TRUE(has_state_prefix("state.x.step"));
  EXPECT_TRUE(has_state_prefix("state."));
  EXPECT_FALSE(has_state_prefix("state"));
  EXPECT_FALSE(has_state_prefix("param_groups.0.lr"));
}

}  // namespace
}  // namespace optim
}  // namespace tessera
