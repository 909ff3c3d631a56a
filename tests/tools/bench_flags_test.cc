// The benches' number flags (tools/bench/bench_flags.h): whole numbers and comma lists of them,
// and for every kind of bad value a message on stderr naming the bench, the flag, its value and
// what was wrong, with the output left as it was.
#include "tools/bench/bench_flags.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {
namespace bench {
namespace {

TEST(BenchFlags, WholeNumbers) {
  int n = -1;
  EXPECT_TRUE(parse_number("b", "--steps=", "7", 1, &n));
  EXPECT_EQ(n, 7);
  EXPECT_TRUE(parse_number("b", "--tensor-parallel=", "0", 0, &n));
  EXPECT_EQ(n, 0);
  int64_t big = 0;
  EXPECT_TRUE(parse_number("b", "--batch=", "9000000000", int64_t{1}, &big));
  EXPECT_EQ(big, int64_t{9000000000});
}

// The message for `text` as the value of --steps= (at least 1, an int), and that n kept its value.
std::string refusal(const std::string& text) {
  int n = 42;
  testing::internal::CaptureStderr();
  const bool ok = parse_number("my_bench", "--steps=", text, 1, &n);
  const std::string message = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(ok) << text;
  EXPECT_EQ(n, 42) << text;
  return message;
}

TEST(BenchFlags, BadNumbersAreRefusedSayingWhy) {
  EXPECT_EQ(refusal("x"), "my_bench: --steps=x: 'x' is not a whole number\n");
  EXPECT_EQ(refusal(""), "my_bench: --steps=: '' is not a whole number\n");
  EXPECT_EQ(refusal("2.5"), "my_bench: --steps=2.5: '2.5' is not a whole number\n");
  EXPECT_EQ(refusal("4k"), "my_bench: --steps=4k: '4k' is not a whole number\n");
  EXPECT_EQ(refusal("0"), "my_bench: --steps=0: 0 is below the least allowed, 1\n");
  EXPECT_EQ(refusal("-3"), "my_bench: --steps=-3: -3 is below the least allowed, 1\n");
  // Past an int (the field's type), and past int64.
  EXPECT_EQ(refusal("3000000000"), "my_bench: --steps=3000000000: 3000000000 is out of range\n");
  EXPECT_EQ(refusal("99999999999999999999"),
            "my_bench: --steps=99999999999999999999: 99999999999999999999 is out of range\n");
}

TEST(BenchFlags, ListsOfNumbers) {
  std::vector<int> threads = {9};
  EXPECT_TRUE(parse_numbers("b", "--threads=", "1,2,4", 1, &threads));
  EXPECT_EQ(threads, (std::vector<int>{1, 2, 4}));
  EXPECT_TRUE(parse_numbers("b", "--threads=", "3", 1, &threads));
  EXPECT_EQ(threads, (std::vector<int>{3}));
}

TEST(BenchFlags, ABadItemRefusesTheWholeListNamingIt) {
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"1,,2", "'' is not a whole number"},
           {"1,2,", "'' is not a whole number"},
           {"1,x", "'x' is not a whole number"},
           {"4096,0", "0 is below the least allowed, 1"}}) {
    std::vector<int64_t> sizes = {5};
    testing::internal::CaptureStderr();
    EXPECT_FALSE(parse_numbers("pipeline_bench", "--sizes=", text, int64_t{1}, &sizes)) << text;
    EXPECT_EQ(testing::internal::GetCapturedStderr(),
              "pipeline_bench: --sizes=" + text + ": " + why + "\n");
    EXPECT_EQ(sizes, (std::vector<int64_t>{5})) << text;
  }
}

// The ranks other than rank 0 of a multi-process bench pass no name: refused, silently.
TEST(BenchFlags, WithoutABenchNameNothingIsPrinted) {
  int n = 1;
  testing::internal::CaptureStderr();
  EXPECT_FALSE(parse_number(nullptr, "--steps=", "x", 1, &n));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace bench
}  // namespace tessera
