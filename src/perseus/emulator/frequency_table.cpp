#include "perseus/emulator/frequency_table.hpp"

#include <algorithm>
#include <string>

#include "perseus/model/errors.hpp"

namespace perseus {
namespace {

ClockFigures interpolate_between(const FrequencyTable::Point& low, const FrequencyTable::Point& high,
                                 int frequency_mhz) {
  const double w = static_cast<double>(frequency_mhz - low.frequency_mhz) /
                   static_cast<double>(high.frequency_mhz - low.frequency_mhz);
  return {low.time_s + w * (high.time_s - low.time_s), low.energy_j + w * (high.energy_j - low.energy_j)};
}

}  // namespace

void FrequencyTable::add_operation(std::vector<Point> points) {
  if (begin_.empty()) begin_.push_back(0);
  // Ascending clock; among equal clocks the fastest first, then keep only that one.
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    return a.frequency_mhz != b.frequency_mhz ? a.frequency_mhz < b.frequency_mhz : a.time_s < b.time_s;
  });
  points.erase(std::unique(points.begin(), points.end(),
                           [](const Point& a, const Point& b) { return a.frequency_mhz == b.frequency_mhz; }),
               points.end());
  points_.insert(points_.end(), points.begin(), points.end());
  begin_.push_back(points_.size());
}

FrequencyTable FrequencyTable::from_problem(const EnergyProblem& problem) {
  FrequencyTable table;
  for (const OperationOptions& operation : problem.operations) {
    if (operation.options.empty()) {
      throw InputError("operation '" + std::string(to_string(operation.kind)) + "' of stage " +
                       std::to_string(operation.stage) + " has no options");
    }
    std::vector<Point> points;
    points.reserve(operation.options.size());
    for (const Option& option : operation.options) {
      const Measurement& m = option.measurement;
      points.push_back({m.frequency_mhz, m.time_s, m.energy_j});
    }
    table.add_operation(std::move(points));
  }
  return table;
}

FrequencyTable FrequencyTable::from_profile(const EnergyProblem& problem, const Profile& profile) {
  const int stages = problem.dag.num_stages();
  const int chunks = problem.dag.chunks();
  const bool per_virtual_stage = chunks > 1 && profile.num_stages() == stages * chunks;
  const double share = (chunks > 1 && !per_virtual_stage) ? 1.0 / chunks : 1.0;
  FrequencyTable table;
  for (const OperationOptions& operation : problem.operations) {
    const int profile_stage = per_virtual_stage ? operation.stage : operation.stage % stages;
    const OperationProfile* rows = profile.find(profile_stage, operation.kind);
    if (!rows && operation.kind == InstructionKind::kRecompute) {
      rows = profile.find(profile_stage, InstructionKind::kForward);
    }
    if (!rows || rows->measurements.empty()) {
      throw InputError(profile.source() + ": no '" + std::string(to_string(operation.kind)) +
                       "' rows for stage " + std::to_string(profile_stage) + ", which the schedule runs");
    }
    std::vector<Point> points;
    points.reserve(rows->measurements.size());
    for (const Measurement& m : rows->measurements) {
      points.push_back({m.frequency_mhz, m.time_s * share, m.energy_j * share});
    }
    table.add_operation(std::move(points));
  }
  return table;
}

std::optional<ClockFigures> FrequencyTable::at(std::size_t operation, int frequency_mhz, bool interpolate) const {
  const std::span<const Point> p = points(operation);
  if (p.size() == 1) return ClockFigures{p[0].time_s, p[0].energy_j};
  auto it = std::lower_bound(p.begin(), p.end(), frequency_mhz,
                             [](const Point& point, int f) { return point.frequency_mhz < f; });
  if (it != p.end() && it->frequency_mhz == frequency_mhz) return ClockFigures{it->time_s, it->energy_j};
  if (!interpolate || it == p.begin() || it == p.end()) return std::nullopt;
  return interpolate_between(*(it - 1), *it, frequency_mhz);
}

ClockFigures FrequencyTable::while_clocked_at(std::size_t operation, int frequency_mhz) const {
  const std::span<const Point> p = points(operation);
  if (frequency_mhz <= p.front().frequency_mhz) return {p.front().time_s, p.front().energy_j};
  if (frequency_mhz >= p.back().frequency_mhz) return {p.back().time_s, p.back().energy_j};
  return *at(operation, frequency_mhz, true);
}

}  // namespace perseus
