// The linear-programming relaxation of the energy-scheduling problem at a deadline, on the
// measured options: every operation may take any duration between its fastest and slowest
// option at the cost of the lower convex hull of its options' effective energies
// (e - p_blocking * t). Its optimum is a proven lower bound on the least energy of any plan
// of the problem's options that meets the deadline, and rounding its durations down to
// options gives a plan that is a good start for a local search (refine.hpp).
//
// Solved through its dual, a minimum-cost circulation (Fulkerson's time-cost duality; see
// relaxation.cpp), in integers (0.1 ns of time, 1e-6 J/s of flow) by LEMON's network simplex,
// resumed from the optimal tree at an anchor, the deadline rounded up to a 5% grid, solved
// once and kept (min_cost_flow.hpp, which says why; the durations are every event as late as
// the optimum allows, however found). The bound is the dual's value at the circulation found,
// evaluated in doubles, so rounding the data can cost a little tightness, never validity
// (weak duality holds for any circulation).
// On 1,536 nodes a solve took 87-225 ms on the simplex and 46-66 ms on cost scaling, against
// about 0.4 s for CLP on the primal LP from a fresh start (docs/solver.md).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "perseus/solver/problem.hpp"

namespace perseus {

struct RelaxedSolution {
  // Least energy at the deadline of any plan of the problem's options: the LP optimum
  // (effective energy) plus p_blocking * S * deadline.
  double lower_bound_j = 0.0;
  // The LP optimum in effective energy, v(deadline), and its slope in the deadline (J per
  // second, <= 0): the sum of the deadline rows' duals. v is convex in the deadline (the
  // deadline moves only right-hand sides), so v(deadline) + slope * (t - deadline) <= v(t)
  // at every t: one solve bounds every deadline (SupportingLines).
  double effective_j = 0.0;
  double slope_j_per_s = 0.0;
  std::vector<double> duration_s;  // per DAG node
  // Per DAG node, the dual's flow through it (J/s): the LP's price of a second of the node's
  // time, what a second saved on it is worth to the rest of the plan at this deadline.
  std::vector<double> price_j_per_s;
  // Per node, the slowest option no slower than its relaxed duration: meets the deadline.
  OptionChoice rounded;
  // Per node, the fastest option no faster than its relaxed duration: cheaper, and usually
  // too slow, a start for a repair (a different one: rounding all down often overshoots).
  OptionChoice rounded_up;
};

// The lower envelope the solves so far prove: at a time t, the greatest of their supporting
// lines, plus p_blocking * S * t. Each line is tangent to the LP optimum's curve where it was
// solved, so the bound equals the LP optimum there and lies below it elsewhere, never above
// the least energy of any plan (docs/solver.md, "Certified frontier").
// add: O(1); energy_at: O(log lines), after O(lines log lines) to rebuild the envelope when
// lines were added since the last call.
// effective(t) >= effective_j + slope_j_per_s * (t - at_s) for the LP optimum at every
// deadline t (effective energy: blocking excluded).
struct SupportingLine {
  double at_s = 0.0;
  double effective_j = 0.0;
  double slope_j_per_s = 0.0;
  double effective_at(double t) const { return effective_j + slope_j_per_s * (t - at_s); }
  // The line a solve at `deadline_s` gives.
  static SupportingLine of(double deadline_s, const RelaxedSolution& solution) {
    return {deadline_s, solution.effective_j, solution.slope_j_per_s};
  }
};

class SupportingLines {
 public:
  explicit SupportingLines(double blocking_w) : blocking_w_(blocking_w) {}  // p_blocking * S
  void add(double deadline_s, const RelaxedSolution& solution) { add(SupportingLine::of(deadline_s, solution)); }
  void add(const SupportingLine& line) { lines_.push_back(line); }
  bool empty() const { return lines_.empty(); }
  std::size_t size() const { return lines_.size(); }
  // The lines in the order added.
  const std::vector<SupportingLine>& lines() const { return lines_; }
  // nullopt when no line is known.
  std::optional<double> energy_at(double time_s) const;

 private:
  double blocking_w_;
  std::vector<SupportingLine> lines_;
  // The upper envelope of lines_ as (slope, intercept at t = 0), slopes increasing, and where
  // each next line takes over; rebuilt when lines_ has grown.
  mutable std::vector<std::pair<double, double>> envelope_;
  mutable std::vector<double> takes_over_at_;
  mutable std::size_t enveloped_ = 0;
};

// The Lagrangian bound of the relaxation from any prices (J/s; negative ones count as 0) on
// its constraints: a supporting line valid at every deadline, whether or not the prices form
// a circulation (docs/solver.md, "Certified frontier"). Prices: per DAG edge (u -> v: v
// starts after u ends; edges in the order of each node's successors, node by node), per node
// on its start (at or after the iteration's) and on its end (at or before the deadline). The
// line touches the LP optimum's curve where the prices are the optimal duals, less an
// allowance for floating-point rounding (micro-joules at prices in the thousands of J/s), so
// that the line holds as computed too: prices far above the energies' scale (1e12 J/s and up)
// give a valid line far below, not noise.
// line(): O(nodes + edges + the hulls' points).
class LagrangianBound {
 public:
  explicit LagrangianBound(const EnergyProblem& problem);
  ~LagrangianBound();
  SupportingLine line(std::span<const double> dependency_prices, std::span<const double> start_prices,
                      std::span<const double> end_prices) const;

 private:
  const EnergyProblem& problem_;
  struct Hulls;
  std::unique_ptr<Hulls> hulls_;
  mutable std::vector<double> into_, out_of_;  // line()'s, kept to reuse their memory
};

class LpRelaxation {
 public:
  explicit LpRelaxation(const EnergyProblem& problem);
  // One that shares `share_anchors_of`'s anchors' trees (same problem): each is found once for
  // both (MinCostCirculation::share_anchors); the two may solve on different threads.
  LpRelaxation(const EnergyProblem& problem, const LpRelaxation& share_anchors_of);
  ~LpRelaxation();
  LpRelaxation(const LpRelaxation&) = delete;
  LpRelaxation& operator=(const LpRelaxation&) = delete;

  // nullopt when no plan meets the deadline (it is below the all-fastest critical path).
  // The same answer whatever was solved before, so solves may come in any order: the anchors'
  // trees kept change only the time. Not thread-safe (one relaxation per thread).
  std::optional<RelaxedSolution> solve(double deadline_s);
  // The same optimum, found from the optimal tree the last solve on this relaxation ended
  // with (MinCostCirculation::solve_from_last; solve() when there is none): fewer pivots for
  // a deadline near the last one, and no canonical potentials. Where the optimum is
  // degenerate the durations and prices depend on the sequence of solves made on it, the
  // same for the same sequence: a sweep of nearby deadlines in a fixed order. Measured on
  // bloom-176b A100 8 x 96 (1,536 nodes), a solve at every fourth of 2,000 points: 0.62 ms a
  // solve against 1.3 ms from the anchors' trees.
  std::optional<RelaxedSolution> solve_next(double deadline_s);

 private:
  struct Model;
  const EnergyProblem& problem_;
  std::unique_ptr<Model> model_;
  std::optional<RelaxedSolution> solution_at(double deadline_s);
};

// The same relaxation in its primal form on CLP's dual simplex, warm-started: each solve
// starts from the previous one's optimal basis, so a sweep of nearby deadlines takes a few
// pivots each (a new deadline moves only right-hand sides; the basis stays dual feasible).
// Measured on bloom-176b A100 8 x 12 (192 nodes): a first solve about 10 ms, then 0.3-0.5 ms
// a deadline when they come a frontier point apart, against 4-5 ms for LpRelaxation; on
// 1,536 nodes 0.4 s, then about 6 ms (docs/solver.md, "Certified frontier"). So it pays where
// deadlines come in order and many, and not for a few spread ones (use LpRelaxation there).
// Each solve's bound is LagrangianBound's line at the solve's duals, valid whatever CLP's
// tolerances left in them, and equal to the LP optimum up to those tolerances. CLP (its C
// interface) is loaded by the first one made (model/shared_library.hpp): InputError naming
// the library and its Debian package when it cannot be.
class WarmLpRelaxation {
 public:
  explicit WarmLpRelaxation(const EnergyProblem& problem);
  ~WarmLpRelaxation();
  WarmLpRelaxation(const WarmLpRelaxation&) = delete;
  WarmLpRelaxation& operator=(const WarmLpRelaxation&) = delete;

  // As LpRelaxation::solve (price_j_per_s left empty), and line: the solve's supporting line.
  // nullopt when no plan meets the deadline or CLP does not prove optimality.
  std::optional<RelaxedSolution> solve(double deadline_s, SupportingLine* line = nullptr);
  // Starts from a known optimum of the relaxation at `deadline_s` (its durations, e.g. an
  // LpRelaxation's): CLP's primal simplex from those values finds a basis for it in a
  // quarter of a first solve's time (bloom-176b A100 8 x 48: 27 ms against 139 ms; 8 x 96:
  // 63 ms against 281 ms). False if it does not reach an optimum (the next solve then starts
  // from whatever basis CLP is left with, correct but slower).
  bool start_from(double deadline_s, std::span<const double> durations_s);
  // The simplex pivots the last solve (or start_from) took: what it cost, machine-independently.
  int last_iterations() const { return last_iterations_; }

 private:
  void set_deadline(double deadline_s);
  struct Model;
  const EnergyProblem& problem_;
  std::unique_ptr<Model> model_;
  LagrangianBound lagrangian_;
  int last_iterations_ = 0;
};

}  // namespace perseus
