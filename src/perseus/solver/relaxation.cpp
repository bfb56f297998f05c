#include "perseus/solver/relaxation.hpp"

#include <coin/ClpSimplex.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace perseus {
namespace {

// Times enter the LP in milliseconds, so that CLP's absolute tolerances (1e-7) are far
// below the differences between options.
constexpr double kMsPerSecond = 1000.0;
// Deadlines within this share of the last one are solved from its basis by the dual simplex.
constexpr double kWarmStartReach = 0.02;
constexpr std::size_t kFreshSolveMinNodes = 1000;

struct HullSegment {
  double length_ms = 0.0;    // how much faster the operation gets along the segment
  double cost_per_ms = 0.0;  // effective energy added per millisecond of speed-up
};

// Lower convex hull of an operation's (time, effective energy) options, as the segments
// from the slowest option towards the fastest; convexity makes the LP use them in order.
struct OperationHull {
  double slowest_ms = 0.0;
  double slowest_effective_j = 0.0;
  std::vector<HullSegment> segments;
};

OperationHull hull_of(const OperationOptions& operation, double p_blocking) {
  struct Point {
    double time_ms, effective_j;
    std::int32_t option;
  };
  std::vector<Point> points;
  for (std::size_t k = 0; k < operation.options.size(); ++k) {
    const Measurement& m = operation.options[k].measurement;
    points.push_back({m.time_s * kMsPerSecond, m.energy_j - p_blocking * m.time_s, static_cast<std::int32_t>(k)});
  }
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    return a.time_ms != b.time_ms ? a.time_ms < b.time_ms : a.effective_j < b.effective_j;
  });
  std::vector<Point> hull;  // fastest first
  for (const Point& p : points) {
    if (!hull.empty() && hull.back().time_ms == p.time_ms) continue;  // the cheaper came first
    while (hull.size() >= 2) {
      const Point& a = hull[hull.size() - 2];
      const Point& b = hull.back();
      const double cross = (b.time_ms - a.time_ms) * (p.effective_j - a.effective_j) -
                           (b.effective_j - a.effective_j) * (p.time_ms - a.time_ms);
      if (cross > 0) break;  // b stays below the chord from a to p
      hull.pop_back();
    }
    hull.push_back(p);
  }
  OperationHull result{hull.back().time_ms, hull.back().effective_j, {}};
  for (std::size_t j = hull.size() - 1; j > 0; --j) {
    const double length = hull[j].time_ms - hull[j - 1].time_ms;
    result.segments.push_back({length, (hull[j - 1].effective_j - hull[j].effective_j) / length});
  }
  return result;
}

}  // namespace

struct LpRelaxation::Model {
  ClpSimplex simplex;
  std::vector<OperationHull> hulls;  // per problem operation
  std::vector<int> first_segment;    // per node: its first segment column; n + 1 offsets
  int start_column = 0;              // start time of node i: start_column + i
  std::vector<int> deadline_rows;    // one per sink node
  std::vector<double> deadline_offset_ms;  // per deadline row: the sink's slowest time
  double constant_j = 0.0;           // sum of the slowest options' effective energies
  bool solved_once = false;
  double last_deadline_ms = 0.0;
};

LpRelaxation::LpRelaxation(const EnergyProblem& problem) : problem_(problem), model_(std::make_unique<Model>()) {
  Model& m = *model_;
  const Dag& dag = problem.dag;
  const int n = static_cast<int>(dag.num_nodes());
  for (const OperationOptions& operation : problem.operations) m.hulls.push_back(hull_of(operation, problem.p_blocking));
  m.first_segment.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    const OperationHull& hull = m.hulls[problem.node_operation[i]];
    m.first_segment[i + 1] = m.first_segment[i] + static_cast<int>(hull.segments.size());
    m.constant_j += hull.slowest_effective_j;
  }
  m.start_column = m.first_segment[n];
  const int columns = m.start_column + n;

  // Rows as (row, column, value) triplets, packed column-wise for CLP.
  struct Entry {
    int row, column;
    double value;
  };
  std::vector<Entry> entries;
  std::vector<double> row_lower, row_upper;
  const auto speed_up_terms = [&](int row, int node, double sign) {
    for (int c = m.first_segment[node]; c < m.first_segment[node + 1]; ++c) entries.push_back({row, c, sign});
  };
  for (int i = 0; i < n; ++i) {
    const double slowest = m.hulls[problem.node_operation[i]].slowest_ms;
    for (const Dag::NodeId j : dag.successors(i)) {
      // start_j - start_i - duration_i >= 0, duration_i = slowest_i - speed-ups of i
      const int row = static_cast<int>(row_lower.size());
      entries.push_back({row, m.start_column + j, 1.0});
      entries.push_back({row, m.start_column + i, -1.0});
      speed_up_terms(row, i, 1.0);
      row_lower.push_back(slowest);
      row_upper.push_back(COIN_DBL_MAX);
    }
    if (dag.successors(i).empty()) {
      // start_i + duration_i <= deadline
      const int row = static_cast<int>(row_lower.size());
      entries.push_back({row, m.start_column + i, 1.0});
      speed_up_terms(row, i, -1.0);
      row_lower.push_back(-COIN_DBL_MAX);
      row_upper.push_back(COIN_DBL_MAX);  // set by solve()
      m.deadline_rows.push_back(row);
      m.deadline_offset_ms.push_back(slowest);
    }
  }
  std::vector<int> column_start(columns + 1, 0);
  for (const Entry& e : entries) ++column_start[e.column + 1];
  for (int c = 0; c < columns; ++c) column_start[c + 1] += column_start[c];
  std::vector<int> row_index(entries.size());
  std::vector<double> values(entries.size());
  std::vector<int> fill(column_start.begin(), column_start.end() - 1);
  for (const Entry& e : entries) {
    row_index[fill[e.column]] = e.row;
    values[fill[e.column]++] = e.value;
  }
  std::vector<double> column_lower(columns, 0.0), column_upper(columns, COIN_DBL_MAX), objective(columns, 0.0);
  for (int i = 0; i < n; ++i) {
    const OperationHull& hull = m.hulls[problem.node_operation[i]];
    for (std::size_t s = 0; s < hull.segments.size(); ++s) {
      const int c = m.first_segment[i] + static_cast<int>(s);
      column_upper[c] = hull.segments[s].length_ms;
      objective[c] = hull.segments[s].cost_per_ms;
    }
  }
  m.simplex.setLogLevel(0);
  m.simplex.loadProblem(columns, static_cast<int>(row_lower.size()), column_start.data(), row_index.data(),
                        values.data(), column_lower.data(), column_upper.data(), objective.data(), row_lower.data(),
                        row_upper.data());
}

LpRelaxation::~LpRelaxation() = default;

bool LpRelaxation::solve_lp(double deadline_s) {
  Model& m = *model_;
  const double deadline_ms = deadline_s * kMsPerSecond;
  for (std::size_t r = 0; r < m.deadline_rows.size(); ++r) {
    m.simplex.setRowUpper(m.deadline_rows[r], deadline_ms - m.deadline_offset_ms[r]);
  }
  // The first solve: CLP's initialSolve (presolve, then the simplex it picks), 0.1 s instead
  // of the dual simplex's 0.27 s from the slack basis on 1,536 nodes. Later ones: the dual
  // simplex from the previous basis (CLP keeps it): a new deadline changes only right-hand
  // sides, so few pivots follow.
  // On large DAGs a deadline far from the last one is many dual pivots away: from scratch,
  // with presolve, is faster there (1,536 nodes, T_min to T*: 0.75 s warm, 0.3 s anew). On
  // small ones the warm start always wins.
  const bool near = m.solved_once && (problem_.dag.num_nodes() < kFreshSolveMinNodes ||
                                      std::abs(deadline_ms - m.last_deadline_ms) <= kWarmStartReach * m.last_deadline_ms);
  if (near) {
    m.simplex.dual();
  } else {
    if (m.solved_once) m.simplex.allSlackBasis(true);
    m.simplex.initialSolve();
    m.solved_once = true;
  }
  m.last_deadline_ms = deadline_ms;
  return m.simplex.isProvenOptimal();
}

std::optional<RelaxedSolution> LpRelaxation::solve(double deadline_s) {
  Model& m = *model_;
  if (!solve_lp(deadline_s)) return std::nullopt;
  const Dag& dag = problem_.dag;
  const std::size_t n = dag.num_nodes();
  const double* x = m.simplex.primalColumnSolution();
  RelaxedSolution solution;
  solution.effective_j = m.constant_j + m.simplex.objectiveValue();
  solution.lower_bound_j = solution.effective_j + problem_.p_blocking * problem_.num_gpus() * deadline_s;
  // d(objective)/d(deadline): every deadline row's right-hand side moves with the deadline
  // (in ms here), so the slope is the sum of their duals. Non-positive for a minimisation
  // with <= rows; a positive sum is rounding noise.
  const double* duals = m.simplex.dualRowSolution();
  double slope_per_ms = 0.0;
  for (const int row : m.deadline_rows) slope_per_ms += duals[row];
  solution.slope_j_per_s = std::min(0.0, slope_per_ms * kMsPerSecond);
  solution.duration_s.resize(n);
  solution.rounded.resize(n);
  solution.rounded_up.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    double duration_ms = m.hulls[problem_.node_operation[i]].slowest_ms;
    for (int c = m.first_segment[i]; c < m.first_segment[i + 1]; ++c) duration_ms -= x[c];
    solution.duration_s[i] = duration_ms / kMsPerSecond;
    // The slowest option that fits (the fastest when none does, a rounding artefact).
    const auto& options = problem_.options_of(static_cast<Dag::NodeId>(i)).options;
    std::int32_t pick = -1;
    for (std::size_t k = 0; k < options.size(); ++k) {
      const double t_ms = options[k].measurement.time_s * kMsPerSecond;
      if (t_ms <= duration_ms + 1e-6 && (pick < 0 || t_ms > options[pick].measurement.time_s * kMsPerSecond)) {
        pick = static_cast<std::int32_t>(k);
      }
    }
    if (pick < 0) {
      pick = 0;
      for (std::size_t k = 1; k < options.size(); ++k) {
        if (options[k].measurement.time_s < options[pick].measurement.time_s) pick = static_cast<std::int32_t>(k);
      }
    }
    solution.rounded[i] = pick;
    std::int32_t up = -1;  // the fastest option at least as slow (the slowest when none is)
    for (std::size_t k = 0; k < options.size(); ++k) {
      const double t_ms = options[k].measurement.time_s * kMsPerSecond;
      if (t_ms >= duration_ms - 1e-6 && (up < 0 || t_ms < options[up].measurement.time_s * kMsPerSecond)) {
        up = static_cast<std::int32_t>(k);
      }
    }
    if (up < 0) {
      up = 0;
      for (std::size_t k = 1; k < options.size(); ++k) {
        if (options[k].measurement.time_s > options[up].measurement.time_s) up = static_cast<std::int32_t>(k);
      }
    }
    solution.rounded_up[i] = up;
  }
  return solution;
}

void SupportingLines::add(double deadline_s, const RelaxedSolution& solution) {
  lines_.push_back({deadline_s, solution.effective_j, solution.slope_j_per_s});
}

std::optional<double> SupportingLines::energy_at(double time_s) const {
  if (lines_.empty()) return std::nullopt;
  double best = -std::numeric_limits<double>::infinity();
  for (const Line& line : lines_) best = std::max(best, line.effective_j + line.slope_j_per_s * (time_s - line.at_s));
  return best + blocking_w_ * time_s;
}

}  // namespace perseus
