#include "dist/local_sgd/periodic_model_averager.h"

namespace tessera {
namespace dist {

PeriodicModelAverager::PeriodicModelAverager(std::shared_ptr<ProcessGroup> group,
                                             const PeriodicModelAveragerOptions& options)
    : ModelAverager(std::move(group), options.period(), options.warmup_steps(),
                    options.measure_consensus_distance(), "PeriodicModelAverager", "period") {}

bool PeriodicModelAverager::average(const std::vector<Variable>& params,
                                    const std::vector<Variable>& buffers) {
  const bool now = communicates_now();
  if (now) {
    double xi2 = 0;
    average_parameters(params, buffers, group(), measures_consensus_distance() ? &xi2 : nullptr);
    if (measures_consensus_distance()) set_consensus_distance(xi2);
  }
  count_step();
  return now;
}

}  // namespace dist
}  // namespace tessera
