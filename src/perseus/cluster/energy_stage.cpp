#include "perseus/cluster/energy_stage.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "perseus/cluster/linear_program.hpp"

namespace perseus::cluster {
namespace {

// (steps/s, W) of the job type's fastest point on type j; W is 0 without energy figures.
std::pair<double, double> fastest_point(const ThroughputMatrix& t, int job_type, std::size_t j) {
  const double speed = t.at(job_type, static_cast<int>(j));
  if (!t.has_energy() || speed <= 0.0) return {speed, 0.0};
  const OperatingPoint& p = t.operating_points[static_cast<std::size_t>(job_type)][j].front();
  return {speed, p.steps_per_s * p.joules_per_step};
}

}  // namespace

EnergyStage fastest_points(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<std::vector<double>>& share) {
  const std::size_t J = static_cast<std::size_t>(t.num_gpu_types());
  EnergyStage out{share, std::vector<std::vector<double>>(jobs.size(), std::vector<double>(J, 0.0)),
                  std::vector<std::vector<double>>(jobs.size(), std::vector<double>(J, 0.0))};
  for (std::size_t m = 0; m < jobs.size(); ++m)
    for (std::size_t j = 0; j < J; ++j) std::tie(out.speed[m][j], out.power_w[m][j]) = fastest_point(t, jobs[m].type, j);
  return out;
}

EnergyStage minimize_energy(const std::vector<Job>& jobs, const std::vector<double>& copies_of, const ThroughputMatrix& t,
                            const std::vector<int>& workers, const std::vector<std::vector<double>>& share, double slack,
                            bool aware) {
  const std::size_t M = jobs.size(), J = static_cast<std::size_t>(t.num_gpu_types());
  const std::vector<double> copies = copies_of.empty() ? std::vector<double>(M, 1.0) : copies_of;
  // X* itself must stay feasible at slack 0, though the policy's LP met its rows only to CLP's
  // tolerance (1e-7): the floors give up a millionth.
  constexpr double kFloorTolerance = 1e-6;
  LinearProgram lp(LinearProgram::Sense::kMinimize);
  struct Column {
    std::size_t m, j;
    double speed, power;
    int variable;
  };
  std::vector<Column> columns;
  std::vector<std::vector<std::pair<int, double>>> capacity(J);
  for (std::size_t m = 0; m < M; ++m) {
    const int scale = t.job_types[static_cast<std::size_t>(jobs[m].type)].scale_factor;
    std::vector<std::pair<int, double>> total, work;
    const double floor = effective_throughput(t, jobs[m].type, share[m]);
    for (std::size_t j = 0; j < J; ++j) {
      if (t.at(jobs[m].type, static_cast<int>(j)) <= 0.0 || workers[j] < scale) continue;
      if (!aware && share[m][j] <= 0.0) continue;
      std::vector<std::pair<int, double>> on_type;
      for (const OperatingPoint& p : t.operating_points[static_cast<std::size_t>(jobs[m].type)][j]) {
        const double power = p.steps_per_s * p.joules_per_step;
        const int v = lp.add_variable(0.0, 1.0, copies[m] * power);
        columns.push_back({m, j, p.steps_per_s, power, v});
        total.emplace_back(v, 1.0);
        work.emplace_back(v, p.steps_per_s);
        on_type.emplace_back(v, 1.0);
        capacity[j].emplace_back(v, copies[m] * scale);
      }
      if (!aware) lp.add_row(on_type, -kInfinity, share[m][j]);
    }
    if (total.empty()) continue;
    lp.add_row(total, -kInfinity, 1.0);
    lp.add_row(work, (1.0 - slack) * floor * (1.0 - kFloorTolerance), kInfinity);
  }
  for (std::size_t j = 0; j < J; ++j)
    if (!capacity[j].empty()) lp.add_row(capacity[j], -kInfinity, workers[j]);
  const LinearProgram::Solution s = lp.solve();
  if (!s.optimal) throw SolveError("the energy stage's LP was not solved to optimality");

  EnergyStage out{std::vector<std::vector<double>>(M, std::vector<double>(J, 0.0)),
                  std::vector<std::vector<double>>(M, std::vector<double>(J, 0.0)),
                  std::vector<std::vector<double>>(M, std::vector<double>(J, 0.0))};
  for (const Column& c : columns) {
    const double y = std::max(0.0, s.values[static_cast<std::size_t>(c.variable)]);
    out.share[c.m][c.j] += y;
    out.speed[c.m][c.j] += y * c.speed;
    out.power_w[c.m][c.j] += y * c.power;
  }
  // Per type, the mix's averages; where the job no longer runs, its fastest point (a lease the
  // mechanism still gives it runs at full speed).
  for (std::size_t m = 0; m < M; ++m)
    for (std::size_t j = 0; j < J; ++j) {
      if (out.share[m][j] > 1e-12) {
        out.speed[m][j] /= out.share[m][j];
        out.power_w[m][j] /= out.share[m][j];
      } else {
        out.share[m][j] = 0.0;
        std::tie(out.speed[m][j], out.power_w[m][j]) = fastest_point(t, jobs[m].type, j);
      }
      // Within CLP's feasibility tolerance of its bounds: clamp onto them.
      out.share[m][j] = std::min(out.share[m][j], aware ? 1.0 : share[m][j]);
    }
  return out;
}

}  // namespace perseus::cluster
