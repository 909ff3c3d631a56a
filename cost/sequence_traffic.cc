#include "cost/sequence_traffic.h"

#include "tensor/check.h"

namespace tessera {
namespace cost {

std::vector<LayerTraffic> sequence_layer_traffic(int64_t b, int64_t s, int64_t h, int64_t p,
                                                 const SequenceLayout& l) {
  const int t = l.tensor_parallel, c = l.context_parallel;
  TS_CHECK(b >= 1 && s >= 1 && h >= 1 && p >= 1 && t >= 1 && c >= 1,
           "sequence_layer_traffic: batch ", b, ", seq_len ", s, ", width ", h, ", ", p,
           " bytes, T = ", t, ", C = ", c, " (each must be >= 1)");
  TS_CHECK(t > 1 || !l.sequence_parallel, "sequence_layer_traffic: sequence parallelism needs "
           "T > 1 (it splits tensor parallelism's region)");
  std::vector<LayerTraffic> rows;
  const double local_tokens = static_cast<double>(s) / c;  // this rank's, under C
  if (t > 1) {
    const double sbh_p = local_tokens * b * h * p, share = static_cast<double>(t - 1) / t;
    if (l.sequence_parallel) {
      rows.push_back({"sequence parallelism", 10 * share * sbh_p + 2 * share * 6 * h * 4,
                      "(8 + 2) (T-1)/T sbh p + 2 (T-1)/T 6 h 4"});
    } else {
      rows.push_back({"tensor parallelism", 8 * share * sbh_p, "8 (T-1)/T sbh p"});
    }
  }
  if (c > 1) {
    const double sbh_p = static_cast<double>(s) * b * (static_cast<double>(h) / t) * p;
    const double share = static_cast<double>(c - 1) / c;
    rows.push_back({"ring attention", 6 * share * sbh_p,
                    t > 1 ? "6 (C-1)/C sb(h/T) p" : "6 (C-1)/C sbh p"});
    rows.push_back({"ulysses", 8 * share / c * sbh_p,
                    t > 1 ? "8 (C-1)/C^2 sb(h/T) p" : "8 (C-1)/C^2 sbh p"});
  }
  return rows;
}

}  // namespace cost
}  // namespace tessera
