// Improving plans on the measured options with the iteration held to a deadline: what the
// crawl's quantised, fitted view leaves on the table (docs/solver.md, "Known weaknesses of the reference").
//
// At a deadline D a plan's energy is  sum_i (e_i - p_blocking * t_i) + p_blocking * S * D
// (docs/solver.md, "Iteration energy", with the GPUs blocking until D), so every method here
// minimises the plan's effective energy  sum_i (e_i - p_blocking * t_i)  subject to its
// measured critical path staying within D.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "perseus/solver/max_flow.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus {

// Not thread-safe: repair() reuses a flow network it owns (one refiner per thread).
class PlanRefiner {
 public:
  // How repair()'s minimum-cut network treats a capacity cut below its flow (an operation
  // that leaves the critical DAG with flow through it): absorbed through terminal arcs
  // (max_flow.hpp, set_terminal_arcs), or the flow restored. The same cuts either way.
  // kAuto absorbs on DAGs of kAbsorbCutsMinNodes and more: below, the terminal arcs' extra
  // scans cost more than the restores they save (a probe, 8 repairs over 0.8% of the span:
  // 192 nodes 0.30 -> 0.35 ms a repair, 384 nodes 1.52 -> 1.76 ms; 768 nodes 4.15 -> 2.38 ms,
  // 1,536 nodes 37.4 -> 24.3 ms).
  enum class RepairCuts { kAuto, kAbsorbed, kRestored };
  static constexpr std::size_t kAbsorbCutsMinNodes = 512;

  explicit PlanRefiner(const EnergyProblem& problem, RepairCuts cuts = RepairCuts::kAuto);

  // Moves every operation to its cheapest option that still fits between its predecessors'
  // finish and its successors' start. Alternates backward sweeps (later operations take the
  // slack in front of them) and forward sweeps until nothing improves, or `max_sweeps` of
  // each (the last often only confirms that nothing does). A plan slower than the deadline
  // is returned as it is.
  OptionChoice reclaim_slack(OptionChoice choice, double deadline_s, int max_sweeps = 8) const;
  // reclaim_slack(choice, measured_time(choice)), with one pass over the DAG fewer; the
  // reclaimed plan's measured time (its critical path) in `measured_time_s` if given.
  OptionChoice reclaim_slack_at_own_time(OptionChoice choice, double* measured_time_s = nullptr) const;

  // Makes a plan that is slower than the deadline meet it: speeds up, one option at a time,
  // the operations of a minimum cut of its measured critical DAG (the cut that adds the
  // least effective energy, a Phillips-Dessouky step on the measured options), then reclaims
  // slack. nullopt when some path is slower than the deadline even at its fastest options,
  // or when the speed-ups add more than `budget_j` of effective energy.
  std::optional<OptionChoice> repair(OptionChoice choice, double deadline_s,
                                     double budget_j = std::numeric_limits<double>::infinity()) const;

  // Which moves local_search tries.
  enum class Moves {
    kExchanges,  // speed-ups and exchanges only: about a tenth of the cost of a round of kAll
    kAll,        // also slow-and-repair (a minimum cut per move: most of a round's cost)
  };

  // Local search on top of reclaim_slack. Moves, each followed by reclaim_slack and kept if
  // the effective energy drops: run one operation one or two options faster (which frees
  // time for others); exchange time between two nearby operations of one stage (one faster,
  // the other slower), which moves slack along a stage where single moves cannot; and (kAll)
  // run one slower and repair the deadline elsewhere. A move is first screened by one
  // backward sweep of reclaim_slack (which later sweeps only improve on); only those the
  // sweep already makes cheaper are reclaimed in full. Costs a few hundred to a few thousand
  // screens per round on a small pipeline: meant for DAGs of up to a few hundred nodes.
  // With `prices` (per node, J/s: the LP relaxation's prices of time at this deadline,
  // RelaxedSolution::price_j_per_s), kAll tries a slow-and-repair move only where it pays at
  // those prices: what slowing the node saves exceeds what its extra time is worth to the
  // rest of the plan. That skips about nine in ten of them, and finds about as good plans on
  // the small pipelines of bench/optimality_bench (docs/solver.md, "Local search").
  OptionChoice local_search(OptionChoice choice, double deadline_s, int max_rounds = 8,
                            Moves moves = Moves::kAll, const std::vector<double>* prices = nullptr) const;

  // Sum over nodes of energy - p_blocking * time.
  double effective_energy(const OptionChoice& choice) const;

  // Work done so far, in passes over the DAG (one pass: every node and edge visited once):
  // a machine-independent measure of the refiner's cost, which bounds the search
  // (FrontierOptions::refine_work_limit) so that the same input always gives the same plans.
  double work() const { return work_; }
  // Counts work done outside the refiner (an LP solve) in the same unit.
  void add_work(double passes) const { work_ += passes; }
  // local_search stops early once work() reaches this (infinity: no limit).
  void set_work_limit(double passes) const { work_limit_ = passes; }
  bool out_of_work() const { return work_ >= work_limit_; }
  // The plan's critical path over measured times.
  double measured_time(const OptionChoice& choice) const;

 private:
  struct OperationIndex {
    std::vector<double> time, effective;  // per option index
    std::vector<std::int32_t> by_time;    // option indices, fastest first
    std::vector<double> sorted_time;      // time of by_time[j]
    std::vector<std::int32_t> best;       // best[j]: least effective energy among by_time[0..j]
    std::vector<std::int32_t> rank;       // rank[k]: position of option k in by_time
    // cheaper_from[k]: the least time of an option strictly cheaper than k (infinity: none),
    // so that a window shorter than it keeps k without a search.
    std::vector<double> cheaper_from;
  };
  const OperationIndex& index_of(Dag::NodeId n) const { return index_[problem_.node_operation[n]]; }
  double time_of(Dag::NodeId n, std::int32_t option) const { return index_of(n).time[option]; }
  double effective_of(Dag::NodeId n, std::int32_t option) const { return index_of(n).effective[option]; }
  static std::int32_t cheapest_within(const OperationIndex& index, std::int32_t current, double window);
  // reclaim_slack's sweeps; no deadline: the plan's own measured time.
  OptionChoice reclaim(OptionChoice choice, std::optional<double> deadline_s, int max_sweeps,
                       double* measured_time_s = nullptr) const;
  // The option `steps` positions faster (steps > 0) or slower (< 0) than `option` in time
  // order; nullopt past the fastest or slowest.
  std::optional<std::int32_t> shifted(Dag::NodeId n, std::int32_t option, int steps) const;
  // Per node, how much longer it could take without the plan missing the deadline; the
  // plan's earliest finish times in `finish` if given.
  std::vector<double> slack(const OptionChoice& choice, double deadline_s, std::vector<double>* finish = nullptr) const;
  // One local-search move evaluated: reclaims `trial` at the deadline and keeps it if it is
  // feasible and cheaper than `*cost`.
  // `finish`, if given, holds the earliest finish times of a plan that differs from `trial`
  // only at topological positions `from` and later (screen() starts there).
  bool try_move(OptionChoice trial, double deadline_s, OptionChoice* choice, double* cost,
                const std::vector<double>* finish = nullptr, std::size_t from = 0) const;
  // The effective energy of `trial` after one backward sweep of reclaim_slack (an upper
  // bound on what the whole reclaim reaches, which later sweeps only lower); infinity if it
  // misses the deadline. `finish` and `from` as in try_move.
  double screen(OptionChoice& trial, double deadline_s, const std::vector<double>* finish, std::size_t from) const;
  // Earliest finish times of `choice` in `finish`, by topological position, computed from
  // position `from` on (those before it are kept); returns the latest of those computed (with
  // from = 0, the plan's critical path).
  double earliest_finish(const OptionChoice& choice, std::vector<double>& finish, std::size_t from = 0) const;
  // The same for a plan by position (`options[k]`: the option of the node at position k).
  double earliest_finish_by_position(const std::vector<std::int32_t>& options, std::vector<double>& finish,
                                     std::size_t from = 0) const;
  // A plan by node as a plan by position, and back.
  void to_positions(const OptionChoice& choice, std::vector<std::int32_t>& options) const;
  void to_nodes(const std::vector<std::int32_t>& options, OptionChoice& choice) const;
  // reclaim_slack's backward sweep on a plan by position: the last operation first, each
  // moves to its cheapest option between its earliest start (from `finish`) and its
  // successors' latest start (written to `latest_start`), so later operations take the slack
  // first. Both arrays by topological position.
  struct Sweep {
    bool changed = false;
    double effective_energy = 0.0;  // of the plan after the sweep
  };
  Sweep backward_sweep(std::vector<std::int32_t>& options, double deadline_s, const std::vector<double>& finish,
                       std::vector<double>& latest_start) const;

  const EnergyProblem& problem_;
  std::vector<OperationIndex> index_;  // per problem operation
  std::vector<std::size_t> position_;  // per DAG node: its place in the topological order
  // The sweeps walk the DAG in topological order over arrays kept in that order (positions):
  // each position's node, its predecessors' and successors' positions, and its options, so
  // that a pass reads memory in order. Reclaims run 1.9-2.5x faster on 12,288-24,576 nodes,
  // with the same plans (docs/solver.md, "Reclaim slack").
  const std::vector<Dag::NodeId>& node_at_;  // the DAG's topological order
  std::vector<std::int32_t> pred_begin_, pred_, succ_begin_, succ_;  // CSR, by position
  std::vector<const OperationIndex*> index_at_;                      // per position
  // repair()'s minimum-cut network, kept between calls (only capacities change).
  struct RepairArcs {
    std::vector<int> op, source, sink;  // per DAG node (-1: none)
    std::vector<int> dependency;        // per DAG edge, grouped by tail node
    std::vector<std::size_t> dependency_begin;
  };
  mutable FlowNetwork repair_network_;
  mutable std::vector<double> earliest_finish_, latest_start_;  // screen()'s, kept between calls
  mutable std::vector<std::int32_t> by_position_;                 // earliest_finish()'s and screen()'s
  mutable double work_ = 0.0;
  mutable double work_limit_ = std::numeric_limits<double>::infinity();
  RepairArcs repair_arcs_;
};

// Convenience: PlanRefiner(problem).reclaim_slack(choice, deadline_s).
OptionChoice reclaim_slack(const EnergyProblem& problem, OptionChoice choice, double deadline_s);

}  // namespace perseus
