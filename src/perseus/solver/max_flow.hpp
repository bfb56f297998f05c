// Maximum flow for the solver's minimum cuts.
//
// Why our own: the crawl solves one max flow per step, tens of thousands of times, on
// networks that differ from step to step only in a few capacities. LEMON's Preflow
// (push-relabel) must be rebuilt every step and spends most of its time returning the huge
// excess that the unbounded dependency arcs admit; this network keeps its arcs and its flow
// from run to run (only capacities change), so a run starts from the previous maximum flow
// and few augmenting phases remain. bench/solver_bench measures both on the crawl
// (BM_*_Crawl vs BM_*_CrawlLemon; the README quotes the ratio), and the tests check that
// both give the same crawl.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace perseus {

// Dinic's algorithm on a network with fixed arcs, changeable capacities and a flow that
// persists between runs. O(V^2 E) per run in the worst case; a warm start after a few
// capacity changes usually needs a few phases. Each phase's level graph is the distance to t,
// found by a breadth-first search backwards from t that stops once s has its distance: from s,
// the search meets a large part of the network at once through s's arcs to half of it (the
// crawl's lower-bound arcs) and the depth-first search then dead-ends in most of what it
// reached; from t it meets less, and a depth-first search along falling distances from s only
// dead-ends where the phase's own augmentations saturated arcs. Augmenting along the same
// shortest paths in the same arc order, it finds the same flows as levels searched from s
// (crawls stay the same), in 0.68 of the time on a 32-stage pipeline and 0.84-0.93 on 8
// stages (bench/solver_bench: BM_Gpt3A100_CrawlLongPipeline, BM_*_Crawl). One search from s
// at the end finds the cut. No recursion: an augmenting path lives in a vector, so a level
// graph as deep as a long pipeline (2 stages x 20,000 microbatches) cannot overflow the
// stack. Arcs are stored in CSR order, so that a breadth-first or depth-first pass walks
// memory in order.
class FlowNetwork {
 public:
  // Clears the network: `num_nodes` nodes, no arcs, no flow.
  void reset(int num_nodes);
  // Adds an arc of capacity 0; returns its index. Arcs can be added until the first run().
  int add_arc(int from, int to);
  // Sets an arc's capacity (>= 0; use kUnbounded for "infinite"). A flow above the new
  // capacity is cut to it; run() then restores flow conservation before augmenting. Setting
  // the capacity an arc has costs a comparison (the crawl sets most arcs as they were).
  void set_capacity(int arc, double capacity) {
    if (capacity_[arc] != capacity) change_capacity(arc, capacity);
  }
  double capacity(int arc) const { return capacity_[arc]; }
  // Names an arc s -> v and an arc v -> t of node v (arcs already added, each named for one
  // node; set_capacity still sets the capacity the caller means). A capacity cut below an
  // arc's flow then unbalances neither end: an end left with a surplus of d sends it on
  // through its arc to t and one short of d takes it through its arc from s, and both arcs
  // of that node are raised by d. A raise of both arcs of one node raises every s-t cut's
  // capacity by exactly d (a cut parts the node from s or from t, never both), so the
  // minimum cuts stay those of the capacities set, and the flow needs no restoring before the
  // next run. Restoring cancels flow along whole paths that the run must then find again, a
  // phase per path length: restoring and the runs after it took 10.4 s of a 14.4 s crawl of a
  // 32 x 384 pipeline; with these arcs the whole crawl takes 5.5 s (docs/solver.md, "Cuts
  // below the flow absorbed, not restored"). The flow through them, and flow_value(), then
  // include the raises (raise()); clear_flow() drops them. A node without such arcs is
  // balanced by restoring, as before.
  void set_terminal_arcs(int v, int from_source, int to_sink);
  // Empties every arc (capacities stay, raises go): the next run starts from the zero flow.
  void clear_flow();
  double flow(int arc) const { return half_[backward_[arc]].residual; }
  // What cuts below the flow added to an arc named by set_terminal_arcs (0 for the others):
  // the flow may use capacity(arc) + raise(arc).
  double raise(int arc) const { return raise_[arc]; }
  int num_nodes() const { return num_nodes_; }
  int num_arcs() const { return static_cast<int>(capacity_.size()); }
  // Runs that started from the zero flow because restoring the previous one cost more.
  std::int64_t cold_starts() const { return cold_starts_; }
  // How many passes over the arcs restoring conservation may take before a run starts from
  // the zero flow instead (default 256, the fastest of 8, 64, 256 and 1,024 on the 2BW window of docs/solver.md; 0: always start from zero, as tests compare).
  void set_restore_passes(int passes) { restore_passes_ = passes; }

  // Augments the current flow to a maximum flow from s to t. Residual capacities at or below
  // `epsilon` count as saturated.
  void run(int s, int t, double epsilon);
  // After run(): the value of the flow (the net flow out of s). O(degree of s).
  double flow_value() const;
  // After run(): whether v is reachable from s through residual capacity above epsilon (on
  // the source side of the minimal minimum cut). O(1).
  bool on_source_side(int v) const { return level_[v] >= 0; }
  // The same for every node, as a vector (O(nodes)).
  std::vector<char> source_side() const;
  // After run(): the nodes on the source side, s first (the last search's queue).
  std::span<const int> source_side_nodes() const { return queue_; }

  // Large enough to be uncuttable next to any finite capacity the solver uses, small
  // enough that capacity - flow keeps the flow's precision.
  static constexpr double kUnbounded = 1e12;

 private:
  void build();  // CSR layout of the arcs added so far
  void change_capacity(int arc, double capacity);
  // level_ := the residual distance to t, for t and the nodes nearer it than s (and s);
  // false when s cannot reach t.
  bool build_distances_to_sink(int s, int t, double epsilon);
  // level_ := the distance from s, for every node it reaches (on_source_side), and queue_
  // those nodes; drops the saturated arcs from s's list.
  void search_from_source(int s, double epsilon);
  void augment_phase(int s, int t, double epsilon);
  // Cancels flow along paths until every node but s and t is balanced again, in at most a few
  // passes' worth of arc scans; false (and the zero flow) when that budget runs out.
  bool restore_conservation(int s, int t);
  void note_imbalance(int v, double amount);
  // Balances a cut of `amount` at v through its terminal arcs (set_terminal_arcs): a surplus
  // (amount > 0) on to t, a deficit from s. False when v has none.
  bool absorb(int v, double amount);
  void raise_arc(int arc, double amount, bool with_flow);

  int num_nodes_ = 0;
  bool built_ = false;
  std::vector<int> tail_, head_;       // per arc, while adding
  std::vector<double> capacity_;       // per arc, as set
  std::vector<double> raise_;          // per arc: added by cuts absorbed at its node
  std::vector<int> terminal_from_source_, terminal_to_sink_;  // per node, or empty
  std::vector<int> forward_, backward_;  // per arc: its two half-arc positions in CSR order
  // Per half-arc position (grouped by tail node): head node, paired position, residual, side
  // by side (a search reads all three).
  struct HalfArc {
    int to;
    int partner;
    double residual;
  };
  std::vector<int> first_;  // num_nodes + 1 offsets
  std::vector<HalfArc> half_;
  std::vector<char> is_forward_;
  int source_ = -1, sink_ = -1;  // s and t of the last run
  std::int64_t cold_starts_ = 0;
  int restore_passes_ = 256;
  // The half-arcs at a node with an arc to or from half the network, of which only a few are
  // open at a time, that may be open: the searches start from this list, not from all of
  // them. For s (the crawl's lower-bound arcs out of s, a handful of 1,480 open) an arc is open
  // when its own residual is above `epsilon`; for t (the lower-bound arcs into t, some 18 of
  // 24,576 on a 32 x 384 pipeline, 3 of 1,536 on 8 x 96) when its partner's is, the arc into
  // t. The list holds every open one (and some that no longer are): capacity changes and
  // restored flow add to it (augmenting paths end at t and start at s, so they only close
  // arcs there), the searches prune it. In arc order, as a scan of all the node's arcs would
  // meet them: the searches' queues, and so every level, augmenting path and cut, stay the
  // same as with a full scan (the order decides between cuts of equal cost).
  struct OpenArcs {
    int node = -1;  // -1: rebuilt by the next run
    double epsilon = 0.0;
    int begin = 0, end = 0;    // the node's half-arc positions
    std::vector<int> positions;  // increasing
    std::vector<char> listed;  // per half-arc at the node (position - begin)
    bool lists(int v, double eps) const { return node == v && epsilon == eps; }
    // Every half-arc at v (first_[v] .. first_[v + 1]): the searches drop the closed.
    void list(int v, double eps, int first, int last) {
      node = v;
      epsilon = eps;
      begin = first;
      end = last;
      positions.clear();
      listed.assign(end - begin, 0);
      for (int p = begin; p < end; ++p) note(p);
    }
    void note(int p) {
      if (node >= 0 && p >= begin && p < end && !listed[p - begin]) {
        listed[p - begin] = 1;
        positions.insert(std::upper_bound(positions.begin(), positions.end(), p), p);
      }
    }
    // Drops the positions `is_open` rejects and calls `visit` on the others, in order.
    template <class IsOpen, class Visit>
    void prune(IsOpen is_open, Visit visit) {
      std::size_t kept = 0;
      for (const int p : positions) {
        if (!is_open(p)) {
          listed[p - begin] = 0;
          continue;
        }
        positions[kept++] = p;
        visit(p);
      }
      positions.resize(kept);
    }
  };
  OpenArcs source_arcs_, sink_arcs_;
  void list_open_arcs(int s, int t, double epsilon) {
    source_arcs_.list(s, epsilon, first_[s], first_[s + 1]);
    sink_arcs_.list(t, epsilon, first_[t], first_[t + 1]);
  }
  std::vector<int> level_, next_, queue_, path_;
  std::vector<double> imbalance_;      // inflow - outflow per node, where set_capacity cut flow
  std::vector<int> unbalanced_nodes_;  // the nodes with a nonzero imbalance_ entry
};

}  // namespace perseus
