// The Chrome trace of a pipeline step, checked literally.
#include "pipeline/trace.h"

#include <gtest/gtest.h>

namespace tessera {
namespace pipeline {
namespace {

TEST(Trace, ChromeJsonHasOneTrackPerStageInMicrosecondsFromTheFirstSpan) {
  const std::vector<std::vector<Span>> spans = {
      {{F(0), false, 10.0, 10.5}, {SA(0), false, 10.5, 10.5001}},
      {{RA(0), false, 10.0, 10.5}, {F(0), false, 10.5, 11.0}, {Action{}, true, 11.0, 11.25}},
  };
  EXPECT_EQ(chrome_trace_json(spans),
            "{\"traceEvents\":[\n"
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"stage 0\"}},\n"
            "{\"name\":\"F0\",\"cat\":\"forward\",\"ph\":\"X\",\"ts\":0.0,\"dur\":500000.0,\"pid\":0,\"tid\":0},\n"
            "{\"name\":\"SA0\",\"cat\":\"send\",\"ph\":\"X\",\"ts\":500000.0,\"dur\":100.0,\"pid\":0,\"tid\":0},\n"
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"stage 1\"}},\n"
            "{\"name\":\"RA0\",\"cat\":\"recv\",\"ph\":\"X\",\"ts\":0.0,\"dur\":500000.0,\"pid\":0,\"tid\":1},\n"
            "{\"name\":\"F0\",\"cat\":\"forward\",\"ph\":\"X\",\"ts\":500000.0,\"dur\":500000.0,\"pid\":0,\"tid\":1},\n"
            "{\"name\":\"all_reduce\",\"cat\":\"reduce\",\"ph\":\"X\",\"ts\":1000000.0,\"dur\":250000.0,\"pid\":0,\"tid\":1}\n"
            "],\"displayTimeUnit\":\"ms\"}\n");
}

TEST(Trace, WithoutASharedClockEachTrackStartsAtItsFirstSpan) {
  const std::vector<std::vector<Span>> spans = {{{F(0), false, 5.0, 6.0}}, {{F(0), false, 100.0, 101.0}}};
  const std::string json = chrome_trace_json(spans, false, /*same_clock=*/false);
  EXPECT_EQ(json.find("\"ts\":95000000"), std::string::npos) << json;
  EXPECT_NE(json.find("\"ts\":0.0,\"dur\":1000000.0,\"pid\":0,\"tid\":1"), std::string::npos) << json;
}

TEST(Trace, SpanNamesShowTheChunkWhenAsked) {
  EXPECT_EQ(span_name({B(3, 1), false, 0, 0}, true), "B3.1");
  EXPECT_STREQ(span_category({RG(3), false, 0, 0}), "recv");
}

}  // namespace
}  // namespace pipeline
}  // namespace tessera
