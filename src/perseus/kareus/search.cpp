#include "perseus/kareus/search.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace perseus::kareus {

PartitionFrontier frontier_of(std::vector<Sample> samples) {
  PartitionFrontier out;
  std::vector<TradeoffPoint> total, dynamic;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const Measurement& m = samples[i].measurement;
    total.push_back({m.time_s, m.total_j(), i});
    dynamic.push_back({m.time_s, m.dynamic_j, i});
    out.reference_time_s = std::max(out.reference_time_s, m.time_s);
    out.reference_energy_j = std::max(out.reference_energy_j, m.total_j());
  }
  out.reference_time_s *= 1.01;
  out.reference_energy_j *= 1.01;
  out.total = pareto_front(std::move(total));
  out.dynamic = pareto_front(std::move(dynamic));
  out.hypervolume_total = hypervolume(out.total, out.reference_time_s, out.reference_energy_j);
  out.samples = std::move(samples);
  return out;
}

PartitionFrontier exhaustive_search(const Partition& partition, const KnobSpace& space, Evaluator& evaluator,
                                    const std::function<void(std::size_t, std::size_t)>& progress) {
  std::vector<Sample> samples;
  samples.reserve(space.size());
  for (std::size_t i = 0; i < space.size(); ++i) {
    const Config c = space.at(i);
    samples.push_back({i, c, evaluator.evaluate(partition, c)});
    if (progress && ((i + 1) % 1024 == 0 || i + 1 == space.size())) progress(i + 1, space.size());
  }
  return frontier_of(std::move(samples));
}

PartitionFrontier exhaustive_search(const Partition& partition, const KnobSpace& space, Evaluator& evaluator,
                                    ResumableSearch search) {
  std::vector<char> done(space.size(), 0);
  std::vector<Sample> samples;
  for (Sample& s : search.known) {
    if (s.index >= space.size() || !(space.at(s.index) == s.config)) {
      throw InputError(fmt::format("kareus: a known sample of {} ({}) is not configuration {} of this space",
                                   partition.name, describe(s.config, partition), s.index));
    }
    if (done[s.index]) continue;
    done[s.index] = 1;
    samples.push_back(std::move(s));
  }
  std::size_t count = samples.size();
  for (std::size_t i = 0; i < space.size(); ++i) {
    if (done[i]) continue;
    const Config c = space.at(i);
    samples.push_back({i, c, evaluator.evaluate(partition, c)});
    if (search.on_sample) search.on_sample(samples.back());
    ++count;
    if (search.progress && (count % 1024 == 0 || count == space.size())) search.progress(count, space.size());
  }
  return frontier_of(std::move(samples));
}

}  // namespace perseus::kareus
