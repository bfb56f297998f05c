#include "perseus/kareus/launch_timing.hpp"

#include <map>

#include <fmt/format.h>

namespace perseus::kareus {
namespace {

constexpr double kSame = 1e-12;  // relative

// The segment as a partition of its own: its kernels beside its collectives (fused), all of
// the kernels in the window when both are there.
Measurement evaluate_segment(const Partition& p, std::span<const Collective> collectives, const Segment& s, int clock,
                             int sms, Evaluator& evaluator) {
  Partition part{p.name, p.forward, {}, {"", 0.0}, 1};
  if (s.first_kernel >= 0) {
    part.compute.assign(p.compute.begin() + s.first_kernel, p.compute.begin() + s.last_kernel + 1);
  }
  if (s.first_collective >= 0) {
    for (int c = s.first_collective; c <= s.last_collective; ++c) {
      part.comm.name += (part.comm.name.empty() ? "" : "+") + collectives[static_cast<std::size_t>(c)].name;
      part.comm.bus_bytes += collectives[static_cast<std::size_t>(c)].bus_bytes;
    }
  }
  const bool overlap = s.first_kernel >= 0 && s.first_collective >= 0;
  return evaluator.evaluate(part, overlap ? Config{clock, sms, 0, s.last_kernel - s.first_kernel} : Config{clock, sms, -1, -1});
}

// The segments that can start at (i, j), and where each leaves the two sequences.
template <typename Visit>
void for_each_step(int i, int j, int n, int m, Visit&& visit) {
  if (i < n) visit(Segment{i, i, -1, -1}, i + 1, j);
  if (j < m) visit(Segment{-1, -1, j, j}, i, j + 1);
  if (i < n && j < m) {
    for (int k = i; k < n; ++k) visit(Segment{i, k, j, j}, k + 1, j + 1);
    for (int k = j + 1; k < m; ++k) visit(Segment{i, i, j, k}, i + 1, k + 1);
  }
}

}  // namespace

std::vector<TimingSchedule> launch_timing_front(const Partition& partition, std::span<const Collective> collectives,
                                                int clock_mhz, int comm_sms, Evaluator& evaluator) {
  if (collectives.empty()) throw InputError("kareus launch timing: no collective to place");
  const int n = static_cast<int>(partition.compute.size()), m = static_cast<int>(collectives.size());
  // front[i][j]: schedules of what is left from (i, j), filled from the end.
  std::vector<std::vector<std::vector<TimingSchedule>>> front(
      static_cast<std::size_t>(n + 1), std::vector<std::vector<TimingSchedule>>(static_cast<std::size_t>(m + 1)));
  front[n][m] = {TimingSchedule{}};
  std::map<std::tuple<int, int, int, int>, Measurement> cost;  // each segment evaluated once
  for (int i = n; i >= 0; --i) {
    for (int j = m; j >= 0; --j) {
      if (i == n && j == m) continue;
      std::vector<TimingSchedule> candidates;
      for_each_step(i, j, n, m, [&](const Segment& s, int next_i, int next_j) {
        const auto key = std::make_tuple(s.first_kernel, s.last_kernel, s.first_collective, s.last_collective);
        auto it = cost.find(key);
        if (it == cost.end()) {
          it = cost.emplace(key, evaluate_segment(partition, collectives, s, clock_mhz, comm_sms, evaluator)).first;
        }
        for (const TimingSchedule& rest : front[static_cast<std::size_t>(next_i)][static_cast<std::size_t>(next_j)]) {
          TimingSchedule t{it->second.time_s + rest.time_s, it->second.total_j() + rest.energy_j, {s}};
          t.segments.insert(t.segments.end(), rest.segments.begin(), rest.segments.end());
          candidates.push_back(std::move(t));
        }
      });
      std::vector<TradeoffPoint> points;
      for (std::size_t c = 0; c < candidates.size(); ++c) points.push_back({candidates[c].time_s, candidates[c].energy_j, c});
      std::vector<TimingSchedule>& here = front[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
      for (const TradeoffPoint& p : pareto_front(std::move(points))) {
        // Sums of the same segments in another order differ in the last bits: one stands for both.
        if (!here.empty() && p.time_s - here.back().time_s <= kSame * p.time_s) {
          if (p.energy_j < here.back().energy_j) here.back() = std::move(candidates[p.id]);
          continue;
        }
        here.push_back(std::move(candidates[p.id]));
      }
    }
  }
  return front[0][0];
}

std::vector<std::vector<Segment>> launch_timing_patterns(int kernels, int collectives) {
  if (kernels < 0 || collectives < 0 || kernels + collectives > 16) {
    throw InputError(fmt::format("kareus launch timing: {} kernels and {} collectives are too many to enumerate",
                                 kernels, collectives));
  }
  std::vector<std::vector<Segment>> out;
  std::vector<Segment> path;
  const auto walk = [&](auto&& self, int i, int j) -> void {
    if (i == kernels && j == collectives) {
      out.push_back(path);
      return;
    }
    for_each_step(i, j, kernels, collectives, [&](const Segment& s, int next_i, int next_j) {
      path.push_back(s);
      self(self, next_i, next_j);
      path.pop_back();
    });
  };
  walk(walk, 0, 0);
  return out;
}

}  // namespace perseus::kareus
