#include "pipeline/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dist/trace_recorder.h"
#include "tensor/check.h"

namespace tessera {
namespace pipeline {
namespace {

constexpr int64_t kFields = 6;  // kind (-1: reduction), microbatch, chunk, start, end, unused

}  // namespace

std::string span_name(const Span& span, bool show_chunk) {
  return span.reduction ? "all_reduce" : to_string(span.action, show_chunk);
}

const char* span_category(const Span& span) {
  if (span.reduction) return "reduce";
  switch (span.action.kind) {
    case ActionKind::kForward: return "forward";
    case ActionKind::kBackward: return "backward";
    case ActionKind::kWeight: return "weight";
    case ActionKind::kSendActivation:
    case ActionKind::kSendGradient: return "send";
    case ActionKind::kRecvActivation:
    case ActionKind::kRecvGradient: return "recv";
  }
  return "?";
}

std::vector<std::vector<Span>> gather_trace(const std::vector<Span>& mine, dist::ProcessGroup& group) {
  const int n = group.size();
  // First how many spans each rank has, then all of them packed as f64 rows.
  Tensor count = scalar_tensor(static_cast<double>(mine.size()), kI64).reshape({1});
  Tensor counts = zeros({n}, kI64);
  group.all_gather(count, counts, std::vector<int64_t>(n, 1))->wait();
  std::vector<int64_t> sizes;
  for (int64_t c : counts.to_vector<int64_t>()) sizes.push_back(c * kFields);
  Tensor packed = zeros({static_cast<int64_t>(mine.size()) * kFields}, kF64);
  double* p = packed.numel() ? packed.data<double>() : nullptr;
  for (const Span& s : mine) {
    *p++ = s.reduction ? -1 : static_cast<int>(s.action.kind);
    *p++ = s.action.microbatch;
    *p++ = s.action.chunk;
    *p++ = s.start;
    *p++ = s.end;
    *p++ = 0;
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  Tensor all = zeros({total}, kF64);
  group.all_gather(packed, all, sizes)->wait();
  std::vector<std::vector<Span>> out(n);
  const std::vector<double> v = all.to_vector<double>();
  size_t at = 0;
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < sizes[r] / kFields; ++i, at += kFields) {
      Span s;
      s.reduction = v[at] < 0;
      s.action = {s.reduction ? ActionKind::kForward : static_cast<ActionKind>(static_cast<int>(v[at])),
                  static_cast<int>(v[at + 1]), static_cast<int>(v[at + 2])};
      s.start = v[at + 3];
      s.end = v[at + 4];
      out[r].push_back(s);
    }
  }
  return out;
}

std::string chrome_trace_json(const std::vector<std::vector<Span>>& spans, bool show_chunk,
                              bool same_clock) {
  double global_origin = std::numeric_limits<double>::infinity();
  for (const auto& rank : spans) {
    for (const Span& s : rank) global_origin = std::min(global_origin, s.start);
  }
  using json = nlohmann::ordered_json;  // fields in Chrome's usual order
  // Microseconds, to the nanosecond.
  const auto microseconds = [](double seconds) { return std::round(seconds * 1e9) / 1e3; };
  std::string out = "{\"traceEvents\":[";
  const char* sep = "\n";
  for (size_t r = 0; r < spans.size(); ++r) {
    const int tid = static_cast<int>(r);
    out += sep + json({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", tid},
                       {"args", {{"name", "stage " + std::to_string(r)}}}})
                     .dump();
    sep = ",\n";
    double origin = global_origin;
    if (!same_clock) {
      origin = std::numeric_limits<double>::infinity();
      for (const Span& s : spans[r]) origin = std::min(origin, s.start);
    }
    for (const Span& s : spans[r]) {
      out += sep + json({{"name", span_name(s, show_chunk)}, {"cat", span_category(s)}, {"ph", "X"},
                         {"ts", microseconds(s.start - origin)}, {"dur", microseconds(s.end - s.start)},
                         {"pid", 0}, {"tid", tid}})
                       .dump();
    }
  }
  return out + "\n],\"displayTimeUnit\":\"ms\"}\n";
}

void record_spans(const std::vector<Span>& spans, bool show_chunk) {
  auto& recorder = dist::trace::TraceRecorder::global();
  for (const Span& s : spans) {
    std::string args;
    if (!s.reduction) args = "\"microbatch\":" + std::to_string(s.action.microbatch);
    recorder.span(span_name(s, show_chunk), span_category(s), s.start, s.end, args);
  }
}

}  // namespace pipeline
}  // namespace tessera
