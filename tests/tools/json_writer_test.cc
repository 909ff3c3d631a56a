// tools/json/json_writer.h against JSON written out by hand.
#include "tools/json/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace tessera {
namespace json {
namespace {

TEST(JsonWriter, StringsAreQuotedAndEscaped) {
  EXPECT_EQ(quote("plain"), "\"plain\"");
  EXPECT_EQ(quote("a \"b\" \\c"), "\"a \\\"b\\\" \\\\c\"");
  EXPECT_EQ(quote(std::string("tab\there\nnl") + '\x01'), "\"tab\\u0009here\\u000anl\\u0001\"");
  EXPECT_EQ(quote(""), "\"\"");
}

TEST(JsonWriter, NumbersHaveTheirDigitsAndNonFiniteIsNull) {
  EXPECT_EQ(number(0.1234567891), "0.123457");
  EXPECT_EQ(number(0.1234567891, 10), "0.1234567891");
  EXPECT_EQ(number(3.0), "3");
  EXPECT_EQ(number(1e-9), "1e-09");
  EXPECT_EQ(number(int64_t{9007199254740993}), "9007199254740993");  // exact past 2^53
  EXPECT_EQ(number(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(number(-std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(number(std::nan("")), "null");
  EXPECT_EQ(fixed(0.58, 4), "0.5800");
  EXPECT_EQ(fixed(std::nan(""), 4), "null");
}

TEST(JsonWriter, ObjectsKeepOrderSpacedOrCompact) {
  const auto fill = [](Object o) {
    return o.add("z", "last?")
        .add("a", 1)
        .add("pi", 3.14159265358979)
        .add("ranks", std::vector<int64_t>{4, 3})
        .add("names", std::vector<std::string>{"x", "y"})
        .add_raw("inner", Object().add("k", int64_t{2}).str())
        .str();
  };
  EXPECT_EQ(fill(Object()),
            "{\"z\": \"last?\", \"a\": 1, \"pi\": 3.14159, \"ranks\": [4, 3], "
            "\"names\": [\"x\", \"y\"], \"inner\": {\"k\": 2}}");
  EXPECT_EQ(fill(Object({10, true})),
            "{\"z\":\"last?\",\"a\":1,\"pi\":3.141592654,\"ranks\":[4,3],"
            "\"names\":[\"x\",\"y\"],\"inner\":{\"k\": 2}}");
  EXPECT_EQ(Object().str(), "{}");
}

TEST(JsonWriter, ArraysTakeTheirOwnFormat) {
  Array spaced(std::vector<double>{0.5, 1.0 / 3});
  EXPECT_EQ(spaced.str(), "[0.5, 0.333333]");
  Array compact(std::vector<double>{0.5, 1.0 / 3}, Format{3, true});
  EXPECT_EQ(compact.str(), "[0.5,0.333]");
  Array mixed;
  EXPECT_TRUE(mixed.empty());
  mixed.add("s").add(2).add(std::nan("")).add_raw(Object().add("k", "v").str());
  EXPECT_FALSE(mixed.empty());
  EXPECT_EQ(mixed.str(), "[\"s\", 2, null, {\"k\": \"v\"}]");
  EXPECT_EQ(Object().add("list", mixed).str(), "{\"list\": [\"s\", 2, null, {\"k\": \"v\"}]}");
}

}  // namespace
}  // namespace json
}  // namespace tessera
