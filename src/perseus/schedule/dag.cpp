#include "perseus/schedule/dag.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "perseus/model/errors.hpp"

namespace perseus {
namespace {

constexpr Dag::NodeId kAbsent = -1;

// Kinds that take part in pipeline dependencies; communication instructions only get
// program-order edges.
constexpr int kIndexedKinds = 4;  // forward, backward, recompute, load
static_assert(static_cast<int>(InstructionKind::kForward) < kIndexedKinds);
static_assert(static_cast<int>(InstructionKind::kBackward) < kIndexedKinds);
static_assert(static_cast<int>(InstructionKind::kRecompute) < kIndexedKinds);
static_assert(static_cast<int>(InstructionKind::kLoad) < kIndexedKinds);

std::string describe(const Instruction& ins) {
  return "stage " + std::to_string(ins.stage) + " " + label(ins);
}

// Flat index of nodes by (kind, virtual stage, microbatch): lookups in O(1), no pair scans.
class NodeIndex {
 public:
  NodeIndex(int virtual_stages, int microbatches)
      : virtual_stages_(virtual_stages),
        microbatches_(microbatches),
        slots_(static_cast<std::size_t>(kIndexedKinds) * virtual_stages * microbatches, kAbsent) {}

  static bool indexed(InstructionKind kind) { return static_cast<int>(kind) < kIndexedKinds; }

  Dag::NodeId& at(InstructionKind kind, int vstage, int microbatch) {
    return slots_[(static_cast<std::size_t>(kind) * virtual_stages_ + vstage) * microbatches_ + microbatch];
  }

 private:
  int virtual_stages_;
  int microbatches_;
  std::vector<Dag::NodeId> slots_;
};

// Builds CSR offsets/targets from an edge list, dropping parallel edges. Degrees are small
// (at most a handful per node), so sorting each node's range keeps the whole pass linear.
void build_csr(std::size_t num_nodes, const std::vector<std::pair<Dag::NodeId, Dag::NodeId>>& edges,
               bool by_source, std::vector<std::size_t>& begin, std::vector<Dag::NodeId>& targets) {
  begin.assign(num_nodes + 1, 0);
  for (const auto& [from, to] : edges) ++begin[(by_source ? from : to) + 1];
  for (std::size_t n = 0; n < num_nodes; ++n) begin[n + 1] += begin[n];
  targets.assign(edges.size(), 0);
  std::vector<std::size_t> fill(begin.begin(), begin.end() - 1);
  for (const auto& [from, to] : edges) {
    const Dag::NodeId key = by_source ? from : to;
    targets[fill[key]++] = by_source ? to : from;
  }
  // Compact each range after sorting it and removing duplicates.
  std::size_t write = 0;
  std::size_t read_begin = 0;
  for (std::size_t n = 0; n < num_nodes; ++n) {
    const std::size_t read_end = begin[n + 1];
    auto first = targets.begin() + static_cast<std::ptrdiff_t>(read_begin);
    auto last = targets.begin() + static_cast<std::ptrdiff_t>(read_end);
    std::sort(first, last);
    last = std::unique(first, last);
    begin[n] = write;
    for (auto it = first; it != last; ++it) targets[write++] = *it;
    read_begin = read_end;
  }
  begin[num_nodes] = write;
  targets.resize(write);
}

}  // namespace

Dag::Dag(const Schedule& schedule, bool partial_chains) {
  const ScheduleSpec& spec = schedule.spec;
  const int S = static_cast<int>(schedule.per_stage.size());
  const int M = spec.microbatches;
  chunks_ = spec.chunks;
  if (S < 1 || S != spec.stages) {
    throw InputError("dag: the schedule lists " + std::to_string(S) + " stages but its spec says " +
                     std::to_string(spec.stages));
  }
  if (M < 1 || chunks_ < 1) {
    throw InputError("dag: the schedule needs at least 1 microbatch and 1 chunk, got " + std::to_string(M) +
                     " and " + std::to_string(chunks_));
  }
  const int V = S * chunks_;

  // Nodes, numbered stage by stage in execution order.
  nodes_.reserve(schedule.num_instructions());
  stage_begin_.reserve(S + 1);
  NodeIndex index(V, M);
  for (int s = 0; s < S; ++s) {
    stage_begin_.push_back(nodes_.size());
    for (const Instruction& ins : schedule.per_stage[s]) {
      if (ins.stage != s || ins.microbatch < 0 || ins.microbatch >= M || ins.chunk < 0 || ins.chunk >= chunks_) {
        throw InputError("dag: instruction " + describe(ins) + " listed on stage " + std::to_string(s) +
                         " is outside the schedule (" + std::to_string(S) + " stages, " + std::to_string(M) +
                         " microbatches, " + std::to_string(chunks_) + " chunks)");
      }
      const auto id = static_cast<NodeId>(nodes_.size());
      if (NodeIndex::indexed(ins.kind)) {
        NodeId& slot = index.at(ins.kind, ins.chunk * S + s, ins.microbatch);
        if (slot != kAbsent) throw InputError("dag: instruction " + describe(ins) + " appears twice");
        slot = id;
      }
      nodes_.push_back(ins);
    }
  }
  stage_begin_.push_back(nodes_.size());
  stage_order_.resize(nodes_.size());
  for (std::size_t n = 0; n < nodes_.size(); ++n) stage_order_[n] = static_cast<NodeId>(n);

  std::vector<std::pair<NodeId, NodeId>> edges;
  edges.reserve(3 * nodes_.size());
  for (int s = 0; s < S; ++s) {
    for (std::size_t n = stage_begin_[s] + 1; n < stage_begin_[s + 1]; ++n) {
      edges.emplace_back(static_cast<NodeId>(n - 1), static_cast<NodeId>(n));
    }
  }
  if (partial_chains) {
    // A window: link the consecutive instructions of each microbatch's chain that are present.
    for (int m = 0; m < M; ++m) {
      std::vector<NodeId> chain;  // F(0..V-1), B(V-1..0), kAbsent where outside the window
      chain.reserve(2 * static_cast<std::size_t>(V));
      for (int vs = 0; vs < V; ++vs) chain.push_back(index.at(InstructionKind::kForward, vs, m));
      for (int vs = V - 1; vs >= 0; --vs) chain.push_back(index.at(InstructionKind::kBackward, vs, m));
      const auto first = std::find_if(chain.begin(), chain.end(), [](NodeId n) { return n != kAbsent; });
      if (first == chain.end()) continue;  // a label the window does not use
      const auto last = std::find_if(chain.rbegin(), chain.rend(), [](NodeId n) { return n != kAbsent; }).base();
      if (std::find(first, last, kAbsent) != last) {
        throw InputError("dag: microbatch " + std::to_string(m) +
                         " has instructions in the window that are not a contiguous part of its chain");
      }
      for (auto it = first; it + 1 < last; ++it) edges.emplace_back(*it, *(it + 1));
      for (int vs = 0; vs < V; ++vs) {
        const NodeId recompute = index.at(InstructionKind::kRecompute, vs, m);
        const NodeId backward = index.at(InstructionKind::kBackward, vs, m);
        if (recompute != kAbsent && backward != kAbsent) edges.emplace_back(recompute, backward);
        const NodeId load = index.at(InstructionKind::kLoad, vs, m);
        const NodeId forward = index.at(InstructionKind::kForward, vs, m);
        if (load != kAbsent && forward != kAbsent) edges.emplace_back(load, forward);
      }
    }
  }
  for (int vs = 0; vs < V && !partial_chains; ++vs) {
    for (int m = 0; m < M; ++m) {
      const NodeId forward = index.at(InstructionKind::kForward, vs, m);
      const NodeId backward = index.at(InstructionKind::kBackward, vs, m);
      if (forward == kAbsent || backward == kAbsent) {
        const Instruction missing{forward == kAbsent ? InstructionKind::kForward : InstructionKind::kBackward,
                                  vs % S, m, vs / S};
        throw InputError("dag: the schedule has no " + describe(missing));
      }
      if (vs + 1 < V) {
        edges.emplace_back(forward, index.at(InstructionKind::kForward, vs + 1, m));
        edges.emplace_back(index.at(InstructionKind::kBackward, vs + 1, m), backward);
      } else {
        edges.emplace_back(forward, backward);
      }
      if (const NodeId recompute = index.at(InstructionKind::kRecompute, vs, m); recompute != kAbsent) {
        edges.emplace_back(recompute, backward);
      }
      if (const NodeId load = index.at(InstructionKind::kLoad, vs, m); load != kAbsent) {
        edges.emplace_back(load, forward);
      }
    }
  }

  build_csr(nodes_.size(), edges, /*by_source=*/true, succ_begin_, succ_);
  num_edges_ = succ_.size();
  edges.clear();
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    for (NodeId to : successors(static_cast<NodeId>(n))) edges.emplace_back(static_cast<NodeId>(n), to);
  }
  build_csr(nodes_.size(), edges, /*by_source=*/false, pred_begin_, pred_);

  // Kahn's algorithm; what is left over lies on or behind a cycle.
  std::vector<std::size_t> waiting(nodes_.size());
  topo_.reserve(nodes_.size());
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    waiting[n] = pred_begin_[n + 1] - pred_begin_[n];
    if (waiting[n] == 0) topo_.push_back(static_cast<NodeId>(n));
  }
  for (std::size_t head = 0; head < topo_.size(); ++head) {
    for (NodeId next : successors(topo_[head])) {
      if (--waiting[next] == 0) topo_.push_back(next);
    }
  }
  if (topo_.size() != nodes_.size()) {
    // Walk back through unfinished predecessors until a node repeats: that is a cycle.
    NodeId at = 0;
    while (waiting[at] == 0) ++at;
    std::vector<int> seen_at(nodes_.size(), -1);
    std::vector<NodeId> walk;
    while (seen_at[at] < 0) {
      seen_at[at] = static_cast<int>(walk.size());
      walk.push_back(at);
      for (NodeId p : predecessors(at)) {
        if (waiting[p] != 0) {
          at = p;
          break;
        }
      }
    }
    std::string cycle;
    for (auto it = walk.rbegin(); it != walk.rend(); ++it) {
      cycle += describe(nodes_[*it]) + " -> ";
      if (*it == at) break;
    }
    cycle += describe(nodes_[walk.back()]);
    throw SolveError("dag: the schedule deadlocks; dependency cycle " + cycle);
  }
}

std::span<const Dag::NodeId> Dag::stage_nodes(int stage) const {
  if (stage < 0 || stage >= num_stages()) {
    throw std::out_of_range("Dag::stage_nodes: stage " + std::to_string(stage) + " of " +
                            std::to_string(num_stages()));
  }
  return {stage_order_.data() + stage_begin_[stage], stage_order_.data() + stage_begin_[stage + 1]};
}

int Dag::virtual_stage(NodeId n) const {
  const Instruction& ins = nodes_[n];
  return ins.chunk * num_stages() + ins.stage;
}

}  // namespace perseus
