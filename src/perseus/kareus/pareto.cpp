#include "perseus/kareus/pareto.hpp"

#include <algorithm>

namespace perseus::kareus {

std::vector<TradeoffPoint> pareto_front(std::vector<TradeoffPoint> points) {
  std::sort(points.begin(), points.end(), [](const TradeoffPoint& a, const TradeoffPoint& b) {
    if (a.time_s != b.time_s) return a.time_s < b.time_s;
    if (a.energy_j != b.energy_j) return a.energy_j < b.energy_j;
    return a.id < b.id;
  });
  std::vector<TradeoffPoint> front;
  for (const TradeoffPoint& p : points) {
    // Sorted by time: p is dominated exactly when some earlier point has energy <= p's.
    if (front.empty() || p.energy_j < front.back().energy_j) front.push_back(p);
  }
  return front;
}

double hypervolume(std::span<const TradeoffPoint> points, double ref_time, double ref_energy) {
  std::vector<TradeoffPoint> inside;
  for (const TradeoffPoint& p : points) {
    if (p.time_s < ref_time && p.energy_j < ref_energy) inside.push_back(p);
  }
  const std::vector<TradeoffPoint> front = pareto_front(std::move(inside));
  // Slabs between consecutive front times: each is as high as the energy below the reference.
  double area = 0.0;
  for (std::size_t i = 0; i < front.size(); ++i) {
    const double right = i + 1 < front.size() ? front[i + 1].time_s : ref_time;
    area += (right - front[i].time_s) * (ref_energy - front[i].energy_j);
  }
  return area;
}

}  // namespace perseus::kareus
