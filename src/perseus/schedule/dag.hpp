// The dependency DAG of one iteration: one node per instruction, edges for program order
// on a device and for pipeline dependencies between stages. Built in time linear in its size.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus {

class Dag {
 public:
  using NodeId = std::int32_t;

  explicit Dag(const Schedule& schedule) : Dag(schedule, false) {}
  // A window cut from the steady state of a schedule without flush (planner/schedules.hpp):
  // a microbatch's instructions may lie partly in the previous or the next window. Those
  // present must be a contiguous stretch of its chain F(0..V-1), B(V-1..0) and are linked as
  // usual; dependencies on instructions outside the window are taken as met. InputError otherwise.
  static Dag steady_state_window(const Schedule& schedule) { return Dag(schedule, true); }

  std::size_t num_nodes() const { return nodes_.size(); }
  std::size_t num_edges() const { return num_edges_; }
  const Instruction& instruction(NodeId n) const { return nodes_[n]; }
  const std::vector<Instruction>& instructions() const { return nodes_; }
  // Node ids of stage s in its execution order.
  std::span<const NodeId> stage_nodes(int stage) const;
  int num_stages() const { return static_cast<int>(stage_begin_.size()) - 1; }
  std::span<const NodeId> successors(NodeId n) const {
    return {succ_.data() + succ_begin_[n], succ_.data() + succ_begin_[n + 1]};
  }
  std::span<const NodeId> predecessors(NodeId n) const {
    return {pred_.data() + pred_begin_[n], pred_.data() + pred_begin_[n + 1]};
  }
  // A topological order of all nodes (sources first).
  const std::vector<NodeId>& topological_order() const { return topo_; }
  // Virtual stage of a node: chunk * S + stage; the profile row it takes its options from.
  int virtual_stage(NodeId n) const;
  int chunks() const { return chunks_; }

 private:
  Dag(const Schedule& schedule, bool partial_chains);

  std::vector<Instruction> nodes_;
  std::vector<NodeId> stage_order_;        // nodes grouped by stage, in execution order
  std::vector<std::size_t> stage_begin_;   // S + 1 offsets into stage_order_
  std::vector<std::size_t> succ_begin_, pred_begin_;
  std::vector<NodeId> succ_, pred_;
  std::vector<NodeId> topo_;
  std::size_t num_edges_ = 0;
  int chunks_ = 1;
};

// Longest path length with the given per-node durations (any unit), and the earliest start
// of every node. `durations` is indexed by node id.
template <typename T>
T critical_path_length(const Dag& dag, std::span<const T> durations, std::vector<T>* earliest_start = nullptr);

}  // namespace perseus

#include "perseus/schedule/dag_inl.hpp"
