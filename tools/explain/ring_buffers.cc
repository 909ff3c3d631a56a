#include "tools/explain/ring_buffers.h"

#include <sstream>

#include "dist/ring_schedule.h"
#include "tools/explain/svg_grid.h"

namespace tessera {
namespace explain {

namespace {

constexpr double kChunk = 46, kChunkHeight = 24, kCellGap = 36, kRow = 64, kLeft = 80, kTop = 60;

std::string holds_text(const std::set<int>& holds, int ranks, const char* joint) {
  if (static_cast<int>(holds.size()) == ranks && ranks > 2) return "all";
  std::string out;
  for (int r : holds) out += (out.empty() ? "" : joint) + std::to_string(r);
  return out;
}

// Light (its own contribution only) to dark blue (every rank's).
std::string shade(size_t held, int ranks) {
  const double f = ranks > 1 ? static_cast<double>(held - 1) / (ranks - 1) : 1.0;
  const int r = static_cast<int>(222 - f * (222 - 33)), g = static_cast<int>(235 - f * (235 - 102)),
            b = static_cast<int>(247 - f * (247 - 172));
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

}  // namespace

std::vector<std::vector<std::vector<std::set<int>>>> ring_buffer_states(int n) {
  std::vector<std::vector<std::set<int>>> now(n, std::vector<std::set<int>>(n));
  for (int r = 0; r < n; ++r) {
    for (int k = 0; k < n; ++k) now[r][k] = {r};
  }
  std::vector<std::vector<std::vector<std::set<int>>>> states = {now};
  for (int s = 0; s < 2 * (n - 1); ++s) {
    const bool scatter = s < n - 1;
    auto next = now;  // every rank sends what it held before the step
    for (int r = 0; r < n; ++r) {
      const dist::RingStep step = scatter ? dist::reduce_scatter_step(r, n, s) : dist::all_gather_step(r, n, s - (n - 1));
      const int to = (r + 1) % n;
      // The receiver's receive_chunk at this step is the sender's send_chunk (ring_schedule.h).
      std::set<int>& target = next[to][step.send_chunk];
      if (scatter) {
        target.insert(now[r][step.send_chunk].begin(), now[r][step.send_chunk].end());
      } else {
        target = now[r][step.send_chunk];
      }
    }
    now = next;
    states.push_back(now);
  }
  return states;
}

std::string ring_buffers_svg(int n, const std::string& title) {
  const auto states = ring_buffer_states(n);
  const double cell = n * kChunk;
  const auto chunk_x = [&](int rank, int chunk) { return kLeft + rank * (cell + kCellGap) + chunk * kChunk; };
  const auto row_y = [&](size_t state) { return kTop + state * kRow; };
  const double width = kLeft + n * (cell + kCellGap) + 20, height = kTop + states.size() * kRow + 30;
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
     << "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
        "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" "
        "fill=\"#c0392b\"/></marker></defs>\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << kLeft << "\" y=\"20\" font-size=\"13\">" << xml_escaped(title) << "</text>\n";
  for (int r = 0; r < n; ++r) {
    os << "<text x=\"" << chunk_x(r, 0) + cell / 2 << "\" y=\"" << kTop - 14
       << "\" text-anchor=\"middle\" font-size=\"12\">rank " << r << "</text>\n";
  }
  for (size_t s = 0; s < states.size(); ++s) {
    const std::string label = s == 0 ? "start"
                              : static_cast<int>(s) <= n - 1 ? "RS step " + std::to_string(s - 1)
                                                             : "AG step " + std::to_string(s - n);
    os << "<text x=\"8\" y=\"" << row_y(s) + kChunkHeight / 2 + 4 << "\">" << label << "</text>\n";
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k < n; ++k) {
        const std::set<int>& holds = states[s][r][k];
        const double x = chunk_x(r, k), y = row_y(s);
        const bool dark = holds.size() * 2 > static_cast<size_t>(n);
        os << "<rect x=\"" << x + 1 << "\" y=\"" << y << "\" width=\"" << kChunk - 2 << "\" height=\""
           << kChunkHeight << "\" fill=\"" << shade(holds.size(), n) << "\" stroke=\"#4e79a7\" "
           << "data-state=\"" << s << "\" data-rank=\"" << r << "\" data-chunk=\"" << k
           << "\" data-holds=\"" << holds_text(holds, n + 1, ",") << "\"/>\n"
           << "<text x=\"" << x + kChunk / 2 << "\" y=\"" << y + kChunkHeight / 2 + 4
           << "\" text-anchor=\"middle\" font-size=\"" << (holds.size() > 3 && n <= 4 ? 9 : 10)
           << "\" fill=\"" << (dark ? "white" : "black") << "\">" << holds_text(holds, n, "+")
           << "</text>\n";
        if (s == 0) {
          os << "<text x=\"" << x + kChunk / 2 << "\" y=\"" << y - 2
             << "\" text-anchor=\"middle\" font-size=\"9\" fill=\"#777\">c" << k << "</text>\n";
        }
      }
    }
    if (s == 0) continue;
    // The arrows of the step that led here: sender's chunk above to the receiver's chunk here.
    const int step = static_cast<int>(s) - 1;
    const bool scatter = step < n - 1;
    for (int r = 0; r < n; ++r) {
      const dist::RingStep st = scatter ? dist::reduce_scatter_step(r, n, step) : dist::all_gather_step(r, n, step - (n - 1));
      const int to = (r + 1) % n;
      const double x1 = chunk_x(r, st.send_chunk) + kChunk / 2, y1 = row_y(s - 1) + kChunkHeight;
      const double x2 = chunk_x(to, st.send_chunk) + kChunk / 2, y2 = row_y(s) - 2;
      os << "<line x1=\"" << x1 << "\" y1=\"" << y1 << "\" x2=\"" << x2 << "\" y2=\"" << y2
         << "\" stroke=\"#c0392b\" stroke-width=\"1.4\"" << (to == 0 ? " stroke-dasharray=\"4 3\"" : "")
         << " marker-end=\"url(#arrow)\" data-step=\"" << step << "\" data-from=\"" << r
         << "\" data-to=\"" << to << "\" data-chunk=\"" << st.send_chunk << "\"/>\n";
    }
  }
  os << "<text x=\"" << kLeft << "\" y=\"" << height - 10 << "\" font-size=\"10\" fill=\"#555\">"
     << "RS: reduce-scatter (what arrives is added), AG: all-gather (what arrives is copied); "
        "a box names the ranks whose contributions it holds</text>\n</svg>\n";
  return os.str();
}

}  // namespace explain
}  // namespace tessera
