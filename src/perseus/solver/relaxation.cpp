#include "perseus/solver/relaxation.hpp"

#include <coin/Clp_C_Interface.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <utility>

#include "perseus/model/shared_library.hpp"
#include "perseus/solver/min_cost_flow.hpp"

namespace perseus {
namespace {

// CLP, loaded by the first warm-started relaxation (model/shared_library.hpp says why): the C
// interface's functions WarmLpRelaxation calls, with the header's types.
struct Clp {
  SharedLibrary library{"libClp.so.1", "coinor-libclp1"};
  PERSEUS_LIBRARY_FUNCTION(Clp_newModel);
  PERSEUS_LIBRARY_FUNCTION(Clp_deleteModel);
  PERSEUS_LIBRARY_FUNCTION(Clp_setLogLevel);
  PERSEUS_LIBRARY_FUNCTION(Clp_scaling);
  PERSEUS_LIBRARY_FUNCTION(Clp_loadProblem);
  PERSEUS_LIBRARY_FUNCTION(Clp_chgRowUpper);
  PERSEUS_LIBRARY_FUNCTION(Clp_setColSolution);
  PERSEUS_LIBRARY_FUNCTION(Clp_dual);
  PERSEUS_LIBRARY_FUNCTION(Clp_primal);
  PERSEUS_LIBRARY_FUNCTION(Clp_isProvenOptimal);
  PERSEUS_LIBRARY_FUNCTION(Clp_numberIterations);
  PERSEUS_LIBRARY_FUNCTION(Clp_primalColumnSolution);
  PERSEUS_LIBRARY_FUNCTION(Clp_dualRowSolution);
  PERSEUS_LIBRARY_FUNCTION(Clp_dualColumnSolution);
};

// The solution's durations rounded to options, within a nanosecond: the network simplex's
// tensions are read back from integer potentials, and CLP's primal tolerance is 1e-7 ms.
void round_into(const EnergyProblem& problem, RelaxedSolution& solution) {
  RoundedChoice rounded = round_to_options(problem, solution.duration_s, 1e-9);
  solution.rounded = std::move(rounded.down);
  solution.rounded_up = std::move(rounded.up);
}

// What CLP takes for "no bound" (its COIN_DBL_MAX, which the C interface's header leaves out).
constexpr double kClpInfinity = std::numeric_limits<double>::max();

// Loaded once (thread-safe); a failed load throws here and is tried again by the next call.
const Clp& clp() {
  static const Clp loaded;
  return loaded;
}

// The circulation is solved in integers (LEMON's network simplex takes integer data): times
// in units of 0.1 ns, flows in units of 1e-6 J/s. The bound itself is evaluated in doubles
// from the flow the solver returns (weak duality holds for any circulation), so the rounding
// can cost a little tightness, never validity.
constexpr double kTimeUnitsPerSecond = 1e10;
constexpr double kFlowUnitsPerJPerS = 1e6;

// The anchors' grid (MinCostCirculation::solve_near): deadlines of (1 + kAnchorStep)^k s. On
// the 16 published frontiers, each anchor's tree from its neighbour's, steps of 0.005, 0.01,
// 0.02, 0.03 and 0.05 took their LP solves 4.8, 4.9, 5.1, 5.2 and 5.6 s of CPU (8.6 s from
// scratch, 6.5 s with every anchor's tree from scratch at 0.05): finer, more trees kept
// (0.005: 108 MB peak against 102).
constexpr double kAnchorStep = 0.01;

// A deadline's anchor: the grid index k of the least (1 + kAnchorStep)^k s at least as long.
long long anchor_index(double deadline_s) {
  return static_cast<long long>(std::ceil(std::log(deadline_s) / std::log1p(kAnchorStep)));
}
// The return arc's cost at anchor k (as a deadline's, rounded down).
long long anchor_cost(long long k) {
  return static_cast<long long>(std::floor(std::exp(static_cast<double>(k) * std::log1p(kAnchorStep)) * kTimeUnitsPerSecond));
}

// h(y) = min over hull points of (effective + y * time): the operation's term of the dual at
// flow y (J/s), concave and piecewise linear; with the magnitude of its two parts, which bounds
// its rounding (LagrangianBound::line).
struct DualTerm {
  double value = std::numeric_limits<double>::infinity();
  double magnitude = 0.0;
};
DualTerm dual_term(const std::vector<HullPoint>& hull, double y) {
  DualTerm best;
  for (const HullPoint& p : hull) {
    const double value = p.effective_j + y * p.time_s;
    if (value < best.value) best = {value, std::abs(p.effective_j) + std::abs(y * p.time_s)};
  }
  return best;
}

// Prices the return arc at `deadline_s`; false (nothing changed) unless it is positive and finite.
// Rounded down: the event times then meet the deadline itself.
bool price_deadline(MinCostCirculation& c, int return_arc, double deadline_s) {
  if (!(deadline_s > 0.0) || !std::isfinite(deadline_s)) return false;
  c.set_cost(return_arc, static_cast<long long>(std::floor(deadline_s * kTimeUnitsPerSecond)));
  return true;
}

}  // namespace

// The relaxation is a project time-cost tradeoff with convex costs. In activity-on-arc form
// (every operation an arc start -> end, dependencies end -> start, an origin before every
// source, an end after every sink) it asks for event times T minimising
// sum_i c_i(T(end_i) - T(start_i)) with T(end) - T(origin) <= D, c_i the hull, infinite
// below the fastest option and flat beyond the slowest. Its Lagrangian dual (Fulkerson) is
// a maximum over circulations y >= 0 of sum_i h_i(y_i) - D * y(end -> origin); as a
// minimum-cost circulation, operation i is parallel arcs of costs -t (t its hull times,
// slowest first) and capacities the hull's successive slopes, the dependencies arcs of cost
// 0, and the return arc costs D. Its optimal potentials are the event times.
struct LpRelaxation::Model {
  MinCostCirculation circulation;
  std::vector<std::vector<HullPoint>> hulls;  // per problem operation
  std::vector<std::vector<int>> pieces;       // per DAG node: its parallel arcs
  std::vector<int> start, end;                // per DAG node
  int origin = 0, finish = 0;
  int return_arc = 0;
  // The anchors' grid index of the all-slowest critical path on the hull: every chain of
  // anchors starts there (MinCostCirculation::solve_near).
  long long base_index = 0;
  std::vector<long long> chain;  // solve()'s, kept to reuse its memory
};

LpRelaxation::LpRelaxation(const EnergyProblem& problem) : problem_(problem), model_(std::make_unique<Model>()) {
  Model& m = *model_;
  const Dag& dag = problem.dag;
  const std::size_t n = dag.num_nodes();
  for (const OperationOptions& operation : problem.operations) m.hulls.push_back(effective_energy_hull(operation, problem.p_blocking));
  const long long infinite = MinCostCirculation::kUnbounded;
  // Rounded down, as the deadline is: sums of rounded times then never exceed the rounded
  // sum, and a deadline at T_min stays feasible.
  const auto time_units = [](double seconds) { return static_cast<long long>(std::floor(seconds * kTimeUnitsPerSecond)); };
  MinCostCirculation& c = m.circulation;
  m.origin = c.add_node();
  m.finish = c.add_node();
  for (std::size_t i = 0; i < n; ++i) {
    m.start.push_back(c.add_node());
    m.end.push_back(c.add_node());
  }
  m.pieces.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<Dag::NodeId>(i);
    const std::vector<HullPoint>& hull = m.hulls[problem.node_operation[i]];
    // -h is convex: slope -t_slowest up to the flattest segment's slope, then -t of the next
    // faster point up to the next slope, ..., -t_fastest without limit.
    double previous_slope = 0.0;
    for (std::size_t j = hull.size(); j-- > 0;) {
      long long capacity = infinite;
      if (j > 0) {
        const double slope = (hull[j - 1].effective_j - hull[j].effective_j) / (hull[j].time_s - hull[j - 1].time_s);
        capacity = std::llround((slope - previous_slope) * kFlowUnitsPerJPerS);
        previous_slope = slope;
      }
      m.pieces[i].push_back(c.add_arc(m.start[i], m.end[i], -time_units(hull[j].time_s), capacity));
    }
    if (dag.predecessors(v).empty()) c.add_arc(m.origin, m.start[i], 0, infinite);
    if (dag.successors(v).empty()) c.add_arc(m.end[i], m.finish, 0, infinite);
    for (const Dag::NodeId w : dag.successors(v)) c.add_arc(m.end[i], m.start[w], 0, infinite);
  }
  m.return_arc = c.add_arc(m.finish, m.origin, 0, infinite);
  std::vector<double> finish_at(n, 0.0);
  double slowest = 0.0;
  for (const Dag::NodeId v : dag.topological_order()) {
    double start_at = 0.0;
    for (const Dag::NodeId p : dag.predecessors(v)) start_at = std::max(start_at, finish_at[p]);
    finish_at[v] = start_at + m.hulls[problem.node_operation[v]].back().time_s;
    slowest = std::max(slowest, finish_at[v]);
  }
  m.base_index = slowest > 0.0 ? anchor_index(slowest) : 0;
}

LpRelaxation::LpRelaxation(const EnergyProblem& problem, const LpRelaxation& share_anchors_of) : LpRelaxation(problem) {
  model_->circulation.share_anchors(share_anchors_of.model_->circulation);
}

LpRelaxation::~LpRelaxation() = default;

std::optional<RelaxedSolution> LpRelaxation::solve(double deadline_s) {
  Model& m = *model_;
  MinCostCirculation& c = m.circulation;
  if (!price_deadline(c, m.return_arc, deadline_s)) return std::nullopt;
  // From the optimal tree at the anchor, the deadline rounded up to a geometric grid (up, so
  // that the anchor is feasible wherever the deadline is), reached from the all-slowest
  // critical path's anchor one grid step at a time: each anchor's tree found once, from its
  // neighbour's, and the same whatever was solved before.
  const long long target = anchor_index(deadline_s);
  m.chain.clear();
  for (long long k = m.base_index;; k += target >= m.base_index ? 1 : -1) {
    m.chain.push_back(anchor_cost(k));
    if (k == target) break;
  }
  if (c.solve_near(m.finish, m.return_arc, m.chain) != MinCostCirculation::Status::kOptimal) {
    return std::nullopt;  // unbounded: below T_min
  }
  return solution_at(deadline_s);
}

std::optional<RelaxedSolution> LpRelaxation::solve_next(double deadline_s) {
  Model& m = *model_;
  MinCostCirculation& c = m.circulation;
  if (!c.has_last_tree()) return solve(deadline_s);
  if (!price_deadline(c, m.return_arc, deadline_s)) return std::nullopt;
  if (c.solve_from_last(m.finish) != MinCostCirculation::Status::kOptimal) return std::nullopt;
  return solution_at(deadline_s);
}

// The solution of the circulation's last (optimal) solve at `deadline_s`.
std::optional<RelaxedSolution> LpRelaxation::solution_at(double deadline_s) {
  Model& m = *model_;
  MinCostCirculation& c = m.circulation;
  const Dag& dag = problem_.dag;
  const std::size_t n = dag.num_nodes();
  RelaxedSolution solution;
  // The dual's value at the flow found, in doubles: a valid bound whatever the rounding.
  const double y_return = static_cast<double>(c.flow(m.return_arc)) / kFlowUnitsPerJPerS;
  double effective = -deadline_s * y_return;
  solution.duration_s.resize(n);
  solution.price_j_per_s.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::vector<HullPoint>& hull = m.hulls[problem_.node_operation[i]];
    long long flow = 0;
    for (const int arc : m.pieces[i]) flow += c.flow(arc);
    solution.price_j_per_s[i] = static_cast<double>(flow) / kFlowUnitsPerJPerS;
    effective += dual_term(hull, solution.price_j_per_s[i]).value;
    // Event times are minus the potentials (a dependency of cost 0 keeps the potential from
    // rising along it); the duration is the tension, within the fastest and slowest option.
    const double tension = static_cast<double>(c.potential(m.start[i]) - c.potential(m.end[i])) /
                           kTimeUnitsPerSecond;
    const double duration = std::clamp(tension, hull.front().time_s, hull.back().time_s);
    solution.duration_s[i] = duration;
  }
  round_into(problem_, solution);
  solution.effective_j = effective;
  solution.slope_j_per_s = -y_return;
  solution.lower_bound_j = effective + problem_.p_blocking * problem_.num_gpus() * deadline_s;
  return solution;
}

struct LagrangianBound::Hulls {
  std::vector<std::vector<HullPoint>> of;  // per problem operation
};

LagrangianBound::LagrangianBound(const EnergyProblem& problem) : problem_(problem), hulls_(std::make_unique<Hulls>()) {
  for (const OperationOptions& operation : problem.operations) hulls_->of.push_back(effective_energy_hull(operation, problem.p_blocking));
}

LagrangianBound::~LagrangianBound() = default;

// Start times s_i >= 0 and durations d_i of any plan meeting the deadline D satisfy
// s_i + d_i <= s_j (dependency i -> j, price y_ij), s_i + d_i <= D (price z_i) and s_i >= 0
// (price a_i). Priced in, the effective energy is at least
//   sum_i [c_i(d_i) + out_i * d_i + (out_i - in_i) * s_i] - D * sum_i z_i,
// out_i = z_i + sum_j y_ij and in_i = a_i + sum_h y_hi. Each term is least at s_i = 0 when
// out_i >= in_i, else at s_i = D - d_i, where it is c_i(d_i) + in_i * d_i + (out_i - in_i) * D:
// so the bound is sum_i h_i(max(in_i, out_i)) - D * (sum_i z_i + sum_i max(0, in_i - out_i)),
// h_i the hull's dual term. With a circulation in = out and this is Fulkerson's dual.
SupportingLine LagrangianBound::line(std::span<const double> dependency_prices, std::span<const double> start_prices,
                                     std::span<const double> end_prices) const {
  const Dag& dag = problem_.dag;
  const std::size_t n = dag.num_nodes();
  into_.assign(n, 0.0);
  out_of_.assign(n, 0.0);
  double slope = 0.0;
  std::size_t edge = 0;
  for (std::size_t i = 0; i < n; ++i) {
    into_[i] += std::max(0.0, start_prices[i]);
    const double end = std::max(0.0, end_prices[i]);
    out_of_[i] += end;
    slope -= end;
    for (const Dag::NodeId j : dag.successors(static_cast<Dag::NodeId>(i))) {
      const double y = std::max(0.0, dependency_prices[edge++]);
      out_of_[i] += y;
      into_[j] += y;
    }
  }
  // The line in floating point: every rounding in the sums below and in evaluating the line
  // later (intercept + slope * D, D the deadline) is at most a unit roundoff of the magnitudes
  // summed, times the number of operations. So the line is lowered by gamma times those
  // magnitudes: the terms' for the intercept, the prices' (in + out, whose rounding moves each
  // h_i by at most its duration, <= D, times the error) for the slope. For prices in the
  // thousands of J/s this is micro-joules; for prices of 1e16 J/s, whose terms cancel to noise,
  // it leaves a valid line far below.
  const double gamma = 8.0 * static_cast<double>(n + edge + 4) * std::numeric_limits<double>::epsilon();
  double intercept = 0.0, magnitude = 0.0, prices = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const DualTerm term = dual_term(hulls_->of[problem_.node_operation[i]], std::max(into_[i], out_of_[i]));
    intercept += term.value;
    magnitude += term.magnitude;
    prices += into_[i] + out_of_[i];
    slope -= std::max(0.0, into_[i] - out_of_[i]);
  }
  return {0.0, intercept - gamma * magnitude, slope - gamma * prices};
}

std::optional<double> SupportingLines::energy_at(double time_s) const {
  if (lines_.empty()) return std::nullopt;
  if (enveloped_ != lines_.size()) {
    // Upper envelope of lines by slope (the convex hull trick): a line is dropped when the
    // one after it takes over no later than it took over from the one before.
    std::vector<std::pair<double, double>> sorted;
    sorted.reserve(lines_.size());
    for (const SupportingLine& line : lines_) {
      sorted.emplace_back(line.slope_j_per_s, line.effective_j - line.slope_j_per_s * line.at_s);
    }
    std::sort(sorted.begin(), sorted.end());
    const auto crossing = [](const std::pair<double, double>& a, const std::pair<double, double>& b) {
      return (a.second - b.second) / (b.first - a.first);  // where b (steeper) overtakes a
    };
    envelope_.clear();
    for (const auto& line : sorted) {
      if (!envelope_.empty() && envelope_.back().first == line.first) envelope_.pop_back();  // same slope: higher wins (sorted)
      while (envelope_.size() >= 2 &&
             crossing(envelope_[envelope_.size() - 2], line) <= crossing(envelope_[envelope_.size() - 2], envelope_.back())) {
        envelope_.pop_back();
      }
      envelope_.push_back(line);
    }
    takes_over_at_.clear();
    for (std::size_t i = 1; i < envelope_.size(); ++i) takes_over_at_.push_back(crossing(envelope_[i - 1], envelope_[i]));
    enveloped_ = lines_.size();
  }
  // The line in charge at time_s: the last whose takeover lies at or before it.
  const auto i = static_cast<std::size_t>(std::upper_bound(takes_over_at_.begin(), takes_over_at_.end(), time_s) -
                                          takes_over_at_.begin());
  // Neighbours too: the takeover points are rounded, the maximum is not.
  double best = -std::numeric_limits<double>::infinity();
  for (std::size_t j = i > 0 ? i - 1 : 0; j <= std::min(i + 1, envelope_.size() - 1); ++j) {
    best = std::max(best, envelope_[j].second + envelope_[j].first * time_s);
  }
  return best + blocking_w_ * time_s;
}

// The primal LP: per node a start time S_i >= 0 and speed-ups x_ik along its hull's segments
// from the slowest corner (0 <= x_ik <= the segment's length, at the segment's cost per unit;
// convexity makes the LP take them cheapest first), so duration_i = slowest_i - sum_k x_ik;
// a row per dependency i -> j, S_j - S_i + sum_k x_ik >= slowest_i, and per sink
// S_i - sum_k x_ik <= D - slowest_i. Times in milliseconds, so that CLP's absolute
// tolerances (1e-7) lie far below the differences between options.
struct WarmLpRelaxation::Model {
  static constexpr double kMsPerSecond = 1000.0;
  struct Deleter {
    void operator()(Clp_Simplex* model) const { clp().Clp_deleteModel(model); }
  };
  std::unique_ptr<Clp_Simplex, Deleter> simplex{clp().Clp_newModel()};
  std::vector<double> row_upper, column_upper;
  std::vector<double> slowest_ms;         // per node
  std::vector<int> first_segment;         // per node: its first speed-up column; n + 1 offsets
  int start_column = 0;                   // S_i is column start_column + i
  std::vector<int> dependency_row;        // per DAG edge, in LagrangianBound's order
  std::vector<int> deadline_row;          // per node: its row if a sink, else -1
  double slowest_effective_j = 0.0;       // sum over nodes of the slowest corner's effective energy
};

WarmLpRelaxation::WarmLpRelaxation(const EnergyProblem& problem)
    : problem_(problem), model_(std::make_unique<Model>()), lagrangian_(problem) {
  Model& m = *model_;
  const Dag& dag = problem.dag;
  const int n = static_cast<int>(dag.num_nodes());
  std::vector<std::vector<HullPoint>> hulls;
  for (const OperationOptions& operation : problem.operations) hulls.push_back(effective_energy_hull(operation, problem.p_blocking));
  std::vector<double> length, cost;  // per speed-up column
  m.first_segment.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    const std::vector<HullPoint>& hull = hulls[problem.node_operation[i]];  // fastest first
    m.slowest_ms.push_back(hull.back().time_s * Model::kMsPerSecond);
    m.slowest_effective_j += hull.back().effective_j;
    for (std::size_t j = hull.size() - 1; j > 0; --j) {
      const double ms = (hull[j].time_s - hull[j - 1].time_s) * Model::kMsPerSecond;
      length.push_back(ms);
      cost.push_back((hull[j - 1].effective_j - hull[j].effective_j) / ms);
    }
    m.first_segment[i + 1] = static_cast<int>(length.size());
  }
  m.start_column = m.first_segment[n];
  const int columns = m.start_column + n;
  struct Entry {
    int row, column;
    double value;
  };
  std::vector<Entry> entries;
  std::vector<double> row_lower, row_upper;
  const auto speed_ups = [&](int row, int node, double sign) {
    for (int c = m.first_segment[node]; c < m.first_segment[node + 1]; ++c) entries.push_back({row, c, sign});
  };
  m.deadline_row.assign(n, -1);
  for (int i = 0; i < n; ++i) {
    for (const Dag::NodeId j : dag.successors(static_cast<Dag::NodeId>(i))) {
      const int row = static_cast<int>(row_lower.size());
      entries.push_back({row, m.start_column + static_cast<int>(j), 1.0});
      entries.push_back({row, m.start_column + i, -1.0});
      speed_ups(row, i, 1.0);
      row_lower.push_back(m.slowest_ms[i]);
      row_upper.push_back(kClpInfinity);
      m.dependency_row.push_back(row);
    }
    if (dag.successors(static_cast<Dag::NodeId>(i)).empty()) {
      const int row = static_cast<int>(row_lower.size());
      entries.push_back({row, m.start_column + i, 1.0});
      speed_ups(row, i, -1.0);
      row_lower.push_back(-kClpInfinity);
      row_upper.push_back(kClpInfinity);  // set by solve()
      m.deadline_row[i] = row;
    }
  }
  // Column-wise, as CLP takes it.
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
  std::vector<double> column_lower(columns, 0.0), column_upper(columns, kClpInfinity), objective(columns, 0.0);
  for (int c = 0; c < m.start_column; ++c) {
    column_upper[c] = length[c];
    objective[c] = cost[c];
  }
  clp().Clp_setLogLevel(m.simplex.get(), 0);
  clp().Clp_scaling(m.simplex.get(), 0);  // the data are in one range (milliseconds, joules per millisecond)
  clp().Clp_loadProblem(m.simplex.get(), columns, static_cast<int>(row_lower.size()), column_start.data(),
                        row_index.data(), values.data(), column_lower.data(), column_upper.data(), objective.data(),
                        row_lower.data(), row_upper.data());
  m.row_upper = std::move(row_upper);
  m.column_upper = std::move(column_upper);
}

WarmLpRelaxation::~WarmLpRelaxation() = default;

void WarmLpRelaxation::set_deadline(double deadline_s) {
  Model& m = *model_;
  const double deadline_ms = deadline_s * Model::kMsPerSecond;
  for (std::size_t i = 0; i < m.deadline_row.size(); ++i) {
    if (m.deadline_row[i] >= 0) m.row_upper[m.deadline_row[i]] = deadline_ms - m.slowest_ms[i];
  }
  clp().Clp_chgRowUpper(m.simplex.get(), m.row_upper.data());
}

bool WarmLpRelaxation::start_from(double deadline_s, std::span<const double> durations_s) {
  Model& m = *model_;
  const Dag& dag = problem_.dag;
  const std::size_t n = dag.num_nodes();
  last_iterations_ = 0;
  if (durations_s.size() != n || !(deadline_s > 0.0) || !std::isfinite(deadline_s)) return false;
  // The values: each node's speed-up taken along its segments in order (the cheapest first,
  // as the LP takes them) and its earliest start.
  std::vector<double> values(m.column_upper.size(), 0.0);
  std::vector<double> start_ms(n, 0.0);
  for (const Dag::NodeId v : dag.topological_order()) {
    for (const Dag::NodeId w : dag.successors(v)) {
      start_ms[w] = std::max(start_ms[w], start_ms[v] + durations_s[v] * Model::kMsPerSecond);
    }
  }
  const std::vector<double>& upper = m.column_upper;
  for (std::size_t i = 0; i < n; ++i) {
    values[m.start_column + i] = start_ms[i];
    double speed_up = m.slowest_ms[i] - durations_s[i] * Model::kMsPerSecond;
    for (int c = m.first_segment[i]; c < m.first_segment[i + 1]; ++c) {
      const double taken = std::clamp(speed_up, 0.0, upper[c]);
      values[c] = taken;
      speed_up -= taken;
    }
  }
  set_deadline(deadline_s);
  clp().Clp_setColSolution(m.simplex.get(), values.data());
  clp().Clp_primal(m.simplex.get(), 1);  // a values pass: a basis from the values given, then primal pivots
  last_iterations_ = clp().Clp_numberIterations(m.simplex.get());
  return clp().Clp_isProvenOptimal(m.simplex.get()) != 0;
}

std::optional<RelaxedSolution> WarmLpRelaxation::solve(double deadline_s, SupportingLine* line) {
  Model& m = *model_;
  last_iterations_ = 0;
  if (!(deadline_s > 0.0) || !std::isfinite(deadline_s)) return std::nullopt;
  const Dag& dag = problem_.dag;
  const std::size_t n = dag.num_nodes();
  set_deadline(deadline_s);
  clp().Clp_dual(m.simplex.get(), 0);  // from the previous basis (CLP keeps it between solves)
  last_iterations_ = clp().Clp_numberIterations(m.simplex.get());
  if (!clp().Clp_isProvenOptimal(m.simplex.get())) return std::nullopt;

  // The bound from the duals as prices (J/ms -> J/s): valid whatever their tolerances.
  const double* row_dual = clp().Clp_dualRowSolution(m.simplex.get());
  const double* reduced_cost = clp().Clp_dualColumnSolution(m.simplex.get());
  std::vector<double> dependency_prices(m.dependency_row.size()), start_prices(n), end_prices(n, 0.0);
  for (std::size_t e = 0; e < m.dependency_row.size(); ++e) dependency_prices[e] = row_dual[m.dependency_row[e]] * Model::kMsPerSecond;
  for (std::size_t i = 0; i < n; ++i) {
    start_prices[i] = reduced_cost[m.start_column + static_cast<int>(i)] * Model::kMsPerSecond;
    if (m.deadline_row[i] >= 0) end_prices[i] = -row_dual[m.deadline_row[i]] * Model::kMsPerSecond;
  }
  const SupportingLine dual_line = lagrangian_.line(dependency_prices, start_prices, end_prices);
  if (line) *line = dual_line;

  RelaxedSolution solution;
  solution.effective_j = dual_line.effective_at(deadline_s);
  solution.slope_j_per_s = dual_line.slope_j_per_s;
  solution.lower_bound_j = solution.effective_j + problem_.p_blocking * problem_.num_gpus() * deadline_s;
  const double* x = clp().Clp_primalColumnSolution(m.simplex.get());
  solution.duration_s.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    double ms = m.slowest_ms[i];
    for (int c = m.first_segment[i]; c < m.first_segment[i + 1]; ++c) ms -= x[c];
    solution.duration_s[i] = ms / Model::kMsPerSecond;
  }
  round_into(problem_, solution);
  return solution;
}

}  // namespace perseus
