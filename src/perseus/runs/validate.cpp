#include "perseus/runs/validate.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus::runs {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

constexpr int kFeatures = 5;  // forward a, b; backward a, b; blocked
using Row = std::array<double, kFeatures>;
constexpr double kKindTie = 1e-3;  // relative to the normal matrix's trace

// Least squares on the first `n` features by the normal equations (at most 5 unknowns):
// Gaussian elimination with partial pivoting; a tiny ridge keeps a kind measured at a single
// clock solvable.
std::array<double, kFeatures> least_squares(const std::vector<Row>& x, const std::vector<double>& y, int n) {
  std::array<std::array<double, kFeatures + 1>, kFeatures> a{};
  for (std::size_t r = 0; r < x.size(); ++r)
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) a[i][j] += x[r][i] * x[r][j];
      a[i][n] += x[r][i] * y[r];
    }
  double trace = 0.0;
  for (int i = 0; i < n; ++i) trace += a[i][i];
  for (int i = 0; i < n; ++i) a[i][i] += 1e-12 * trace;
  // Forward and backward times move together (both with the clock), so their separate powers
  // are barely identified: a penalty on their difference keeps them physical (one power line
  // unless the data says otherwise) without changing the iteration energy much.
  if (n >= 4) {
    const double lambda = kKindTie * trace;
    for (int k = 0; k < 2; ++k) {
      a[k][k] += lambda, a[k + 2][k + 2] += lambda;
      a[k][k + 2] -= lambda, a[k + 2][k] -= lambda;
    }
  }
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    std::swap(a[c], a[pivot]);
    if (a[c][c] == 0.0) throw InputError("energy fit: too few runs to fit the energy model");
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (int k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
    }
  }
  std::array<double, kFeatures> out{};
  for (int i = 0; i < n; ++i) out[i] = a[i][n] / a[i][i];
  return out;
}

// The model's features for one rank: durations in one_f_one_b order at their clocks.
Row features(const std::vector<Step>& order, const std::vector<double>& durations, const std::vector<int>& clocks,
             double iteration_s) {
  Row row{};
  double busy = 0.0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const double t = durations[k];
    const double f = clocks[k] / 1000.0;
    const int base = order[k].forward ? 0 : 2;
    row[base] += t;
    row[base + 1] += t * f;
    busy += t;
  }
  row[4] = std::max(0.0, iteration_s - busy);
  return row;
}

std::vector<double> measured_durations(const RankRun& rr, const std::vector<Step>& order) {
  std::vector<double> d;
  d.reserve(order.size());
  for (const Step& s : order) d.push_back((s.forward ? rr.forward_s : rr.backward_s)[static_cast<std::size_t>(s.microbatch)]);
  return d;
}

// Time at `clock` from the profile of (stage, kind): exact, else linear between the nearest
// measured clocks below and above, else the nearest one.
double lookup(const std::map<int, double>& by_clock, int clock, int stage, bool forward) {
  if (by_clock.empty())
    throw InputError(fmt::format("stage {}: no {} measured in the other runs", stage, forward ? "forward" : "backward"));
  const auto hi = by_clock.lower_bound(clock);
  if (hi != by_clock.end() && hi->first == clock) return hi->second;
  if (hi == by_clock.begin()) return hi->second;
  if (hi == by_clock.end()) return std::prev(hi)->second;
  const auto lo = std::prev(hi);
  const double w = static_cast<double>(clock - lo->first) / (hi->first - lo->first);
  return lo->second + w * (hi->second - lo->second);
}

}  // namespace

double critical_path(const std::vector<std::vector<double>>& durations, int microbatches,
                     const std::vector<double>& before_forward) {
  const int stages = static_cast<int>(durations.size());
  std::vector<std::vector<Step>> orders;
  for (int s = 0; s < stages; ++s) orders.push_back(one_f_one_b(s, stages, microbatches));
  // End time of forward / backward (stage, microbatch); negative while not yet run.
  std::vector<std::vector<double>> fwd_end(stages, std::vector<double>(microbatches, -1.0));
  std::vector<std::vector<double>> bwd_end = fwd_end;
  std::vector<std::size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0.0);
  std::size_t remaining = 0;
  for (const auto& o : orders) remaining += o.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < stages; ++s) {
      while (next[s] < orders[s].size()) {
        const Step& step = orders[s][next[s]];
        const int m = step.microbatch;
        double ready = free_at[s];
        if (step.forward && s > 0) {
          if (fwd_end[s - 1][m] < 0) break;
          ready = std::max(ready, fwd_end[s - 1][m]);
        }
        if (!step.forward && s + 1 < stages) {
          if (bwd_end[s + 1][m] < 0) break;
          ready = std::max(ready, bwd_end[s + 1][m]);
        }
        double d = durations[s][next[s]];
        if (step.forward) d += before_forward[s];
        free_at[s] = ready + d;
        (step.forward ? fwd_end : bwd_end)[s][m] = free_at[s];
        ++next[s];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) throw SolveError("critical_path: the 1F1B orders deadlock");
  }
  return *std::max_element(free_at.begin(), free_at.end());
}

EnergyFit fit_energy(const RunTable& table, int exclude, double blocked_w) {
  EnergyFit fit;
  double sq = 0.0;
  int rows = 0;
  for (int s = 0; s < table.stages; ++s) {
    const auto order = one_f_one_b(s, table.stages, table.microbatches);
    std::vector<Row> x;
    std::vector<double> y;
    for (const Run& run : table.runs) {
      if (run.id == exclude) continue;
      const RankRun& rr = run.ranks[static_cast<std::size_t>(s)];
      x.push_back(features(order, measured_durations(rr, order), rr.clocks, rr.iter_time_s));
      y.push_back(rr.iter_energy_j);
    }
    // A given blocked power is taken out of the energy first: fitted, it trades off against the
    // compute powers (the iteration time barely varies between runs) and the fit extrapolates badly.
    std::vector<double> y_fit = y;
    if (blocked_w >= 0.0)
      for (std::size_t r = 0; r < x.size(); ++r) y_fit[r] -= blocked_w * x[r][4];
    auto c = least_squares(x, y_fit, blocked_w >= 0.0 ? 4 : 5);
    if (blocked_w >= 0.0) c[4] = blocked_w;
    fit.stages.push_back({c[0], c[1], c[2], c[3], c[4]});
    for (std::size_t r = 0; r < x.size(); ++r) {
      double e = 0.0;
      for (int i = 0; i < kFeatures; ++i) e += c[i] * x[r][i];
      sq += std::pow(e / y[r] - 1.0, 2);
      ++rows;
    }
  }
  fit.rms_residual = rows ? std::sqrt(sq / rows) : 0.0;
  return fit;
}

std::vector<ProfileEntry> profile_with_energy(const RunTable& table, int exclude, double blocked_w) {
  const EnergyFit fit = fit_energy(table, exclude, blocked_w);
  auto entries = time_profile(table, exclude);
  for (auto& e : entries) {
    const StagePower& w = fit.stages[static_cast<std::size_t>(e.stage)];
    e.energy_j = (e.forward ? w.forward_w(e.clock) : w.backward_w(e.clock)) * e.time_s;
  }
  return entries;
}

Validation validate(const RunTable& table, const ValidateOptions& options, const std::function<void(int, int)>& progress) {
  if (table.runs.size() < 3) throw InputError(fmt::format("{}: leave-one-out needs at least 3 runs, found {}",
                                                          table.dir.string(), table.runs.size()));
  const int S = table.stages, M = table.microbatches;
  std::vector<std::vector<Step>> orders;
  for (int s = 0; s < S; ++s) orders.push_back(one_f_one_b(s, S, M));
  const auto load_per_forward = [&](const RankRun& rr) { return rr.load_s / M; };

  // Each run's remainder: measured iteration time minus the critical path of its measured
  // instruction and load times.
  std::vector<double> remainder(table.runs.size());
  for (std::size_t i = 0; i < table.runs.size(); ++i) {
    const Run& run = table.runs[i];
    std::vector<std::vector<double>> d;
    std::vector<double> loads;
    for (int s = 0; s < S; ++s) {
      d.push_back(measured_durations(run.ranks[s], orders[s]));
      // Without the loading term the remainder holds the loading too.
      loads.push_back(options.data_loading ? load_per_forward(run.ranks[s]) : 0.0);
    }
    remainder[i] = run.iter_time_s() - critical_path(d, M, loads);
  }

  Validation v;
  v.options = options;
  std::vector<double> residuals;
  for (std::size_t i = 0; i < table.runs.size(); ++i) {
    const Run& run = table.runs[i];
    // The profile from the other runs.
    std::map<std::tuple<int, bool>, std::map<int, double>> profile;
    for (const auto& e : time_profile(table, run.id)) profile[{e.stage, e.forward}][e.clock] = e.time_s;
    std::vector<double> loads(S, 0.0), others_remainder;
    for (int s = 0; s < S; ++s) {
      std::vector<double> l;
      for (const Run& other : table.runs)
        if (other.id != run.id) l.push_back(load_per_forward(other.ranks[s]));
      if (options.data_loading) loads[s] = median(l);
    }
    for (std::size_t j = 0; j < table.runs.size(); ++j)
      if (j != i) others_remainder.push_back(remainder[j]);

    std::vector<std::vector<double>> d(S);
    for (int s = 0; s < S; ++s)
      for (std::size_t k = 0; k < orders[s].size(); ++k) {
        const bool fwd = orders[s][k].forward;
        d[s].push_back(lookup(profile[{s, fwd}], run.ranks[s].clocks[k], s, fwd));
      }
    RunPrediction p;
    p.id = run.id;
    p.uniform_clock = run.uniform_clock();
    p.critical_path_s = critical_path(d, M, loads);
    p.remainder_s = options.remainder ? median(others_remainder) : 0.0;
    p.predicted_time_s = p.critical_path_s + p.remainder_s;
    p.measured_time_s = run.iter_time_s();
    p.measured_energy_j = run.iter_energy_j();

    const EnergyFit fit = fit_energy(table, run.id, options.blocked_power_w);
    residuals.push_back(fit.rms_residual);
    for (int s = 0; s < S; ++s) {
      const Row x = features(orders[s], d[s], run.ranks[s].clocks, p.predicted_time_s);
      const StagePower& w = fit.stages[s];
      const std::array<double, kFeatures> c{w.forward_a, w.forward_b, w.backward_a, w.backward_b, w.blocked_w};
      for (int f = 0; f < kFeatures; ++f) p.predicted_energy_j += c[f] * x[f];
    }
    v.runs.push_back(p);
    if (progress) progress(static_cast<int>(i + 1), static_cast<int>(table.runs.size()));
  }
  std::vector<double> te, ee;
  for (const auto& p : v.runs) {
    te.push_back(std::abs(p.time_error()));
    ee.push_back(std::abs(p.energy_error()));
  }
  v.median_time_error = median(te);
  v.worst_time_error = *std::max_element(te.begin(), te.end());
  v.median_energy_error = median(ee);
  v.worst_energy_error = *std::max_element(ee.begin(), ee.end());
  v.median_fit_residual = median(residuals);
  return v;
}

}  // namespace perseus::runs
