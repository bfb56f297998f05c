#include "perseus/solver/max_flow.hpp"

#include <algorithm>
#include <limits>

namespace perseus {

void FlowNetwork::reset(int num_nodes) {
  num_nodes_ = num_nodes;
  built_ = false;
  tail_.clear();
  head_.clear();
  capacity_.clear();
  raise_.clear();
  terminal_from_source_.clear();
  terminal_to_sink_.clear();
}

int FlowNetwork::add_arc(int from, int to) {
  tail_.push_back(from);
  head_.push_back(to);
  capacity_.push_back(0.0);
  raise_.push_back(0.0);
  built_ = false;
  return static_cast<int>(capacity_.size()) - 1;
}

void FlowNetwork::build() {
  const int arcs = num_arcs();
  first_.assign(num_nodes_ + 1, 0);
  for (int a = 0; a < arcs; ++a) {
    ++first_[tail_[a] + 1];
    ++first_[head_[a] + 1];
  }
  for (int v = 0; v < num_nodes_; ++v) first_[v + 1] += first_[v];
  half_.assign(2 * arcs, HalfArc{0, 0, 0.0});
  is_forward_.assign(2 * arcs, 0);
  level_.assign(num_nodes_, -1);
  forward_.assign(arcs, 0);
  backward_.assign(arcs, 0);
  imbalance_.assign(num_nodes_, 0.0);
  unbalanced_nodes_.clear();
  std::vector<int> fill(first_.begin(), first_.end() - 1);
  raise_.assign(arcs, 0.0);
  for (int a = 0; a < arcs; ++a) {
    const int f = fill[tail_[a]]++;
    const int b = fill[head_[a]]++;
    half_[f] = {head_[a], b, capacity_[a]};
    half_[b] = {tail_[a], f, 0.0};
    is_forward_[f] = 1;
    forward_[a] = f;
    backward_[a] = b;
  }
  built_ = true;
  source_arcs_.node = -1;
  sink_arcs_.node = -1;
}

void FlowNetwork::change_capacity(int arc, double capacity) {
  capacity_[arc] = capacity;
  if (!built_) return;  // build() starts every arc empty
  const int f = forward_[arc];
  const int b = backward_[arc];
  if (half_[b].residual > capacity + raise_[arc]) {
    // The cut flow leaves the head short of inflow and the tail with a surplus.
    const double cut = half_[b].residual - (capacity + raise_[arc]);
    half_[b].residual = capacity + raise_[arc];
    if (!absorb(head_[arc], -cut)) note_imbalance(head_[arc], -cut);
    if (!absorb(tail_[arc], cut)) note_imbalance(tail_[arc], cut);
  }
  // After the raises: the arc may be one of its own ends' terminal arcs.
  half_[f].residual = capacity + raise_[arc] - half_[b].residual;
  source_arcs_.note(f);
  sink_arcs_.note(b);
}

void FlowNetwork::set_terminal_arcs(int v, int from_source, int to_sink) {
  if (terminal_from_source_.empty()) {
    terminal_from_source_.assign(num_nodes_, -1);
    terminal_to_sink_.assign(num_nodes_, -1);
  }
  terminal_from_source_[v] = from_source;
  terminal_to_sink_[v] = to_sink;
}

bool FlowNetwork::absorb(int v, double amount) {
  if (terminal_from_source_.empty() || terminal_from_source_[v] < 0) return false;
  // The arc that carries the imbalance away gets the flow; the other only the capacity.
  raise_arc(terminal_to_sink_[v], std::abs(amount), amount > 0.0);
  raise_arc(terminal_from_source_[v], std::abs(amount), amount < 0.0);
  return true;
}

void FlowNetwork::raise_arc(int arc, double amount, bool with_flow) {
  raise_[arc] += amount;
  // The residual of one direction grows: open it in the lists at s and t.
  if (with_flow) half_[backward_[arc]].residual += amount;
  else half_[forward_[arc]].residual += amount;
  source_arcs_.note(forward_[arc]);
  sink_arcs_.note(backward_[arc]);
}

void FlowNetwork::note_imbalance(int v, double amount) {
  // s and t need no balance (and summing theirs would read every arc of the crawl's s and t).
  if (v == source_ || v == sink_) return;
  if (imbalance_[v] == 0.0) unbalanced_nodes_.push_back(v);
  imbalance_[v] += amount;
}

void FlowNetwork::clear_flow() {
  if (!built_) return;
  for (int a = 0; a < num_arcs(); ++a) {
    raise_[a] = 0.0;
    half_[forward_[a]].residual = capacity_[a];
    half_[backward_[a]].residual = 0.0;
  }
  for (int v : unbalanced_nodes_) imbalance_[v] = 0.0;
  unbalanced_nodes_.clear();
  source_arcs_.node = -1;
  sink_arcs_.node = -1;
}

bool FlowNetwork::restore_conservation(int s, int t) {
  constexpr double kTolerance = 1e-12;
  // Cancelling walks along flow paths of its own; when the flow is spread thinly over many long
  // paths each walk cancels little and they run to ~10^9 steps (a 2BW window of 32 stages x 384
  // microbatches: minutes in one call). Past a budget of a few passes over the network, starting
  // from the zero flow is cheaper: the minimal minimum cut does not depend on the flow.
  std::int64_t budget = restore_passes_ * static_cast<std::int64_t>(half_.size()) + (restore_passes_ > 0 ? 1024 : -1);
  // The nodes set_capacity noted, their imbalances recomputed from the flows: the walks
  // below rely on exact signs, which sums of cut amounts only approximate.
  for (int v : unbalanced_nodes_) {
    double balance = 0.0;
    for (int p = first_[v]; p < first_[v + 1]; ++p) balance += is_forward_[p] ? -half_[half_[p].partner].residual : half_[p].residual;
    imbalance_[v] = balance;
  }
  // The networks here are acyclic, so a walk along positive flow from a node with a deficit
  // ends at t or at a node with a surplus; cancelling along it fixes the deficit without
  // unbalancing the nodes in between. Surpluses then walk back to s.
  auto cancel = [&](int v, bool forward) {
    double& own = imbalance_[v];
    int guard = 4 * num_nodes_ + 16;
    while ((forward ? -own : own) > kTolerance && guard-- > 0) {
      path_.clear();
      int u = v;
      double amount = forward ? -own : own;
      while (u != (forward ? t : s)) {
        if (u != v && (forward ? imbalance_[u] : -imbalance_[u]) > kTolerance) break;  // ends at its opposite
        int step = -1;  // the forward half-arc to cancel along
        budget -= first_[u + 1] - first_[u];
        for (int p = first_[u]; p < first_[u + 1]; ++p) {
          // Forward walks follow arcs out of u, backward walks arcs into u.
          if (is_forward_[p] != (forward ? 1 : 0)) continue;
          const int f = forward ? p : half_[p].partner;
          if (half_[half_[f].partner].residual > kTolerance) {
            step = f;
            break;
          }
        }
        if (step < 0) break;
        path_.push_back(step);
        amount = std::min(amount, half_[half_[step].partner].residual);
        u = forward ? half_[step].to : half_[half_[step].partner].to;
      }
      if (path_.empty()) {
        own = 0.0;  // nothing left to cancel; drop the float residue
        break;
      }
      if (budget < 0) return;
      if (u != (forward ? t : s)) amount = std::min(amount, forward ? imbalance_[u] : -imbalance_[u]);
      for (int f : path_) {
        half_[f].residual += amount;
        half_[half_[f].partner].residual -= amount;
        source_arcs_.note(f);
        sink_arcs_.note(half_[f].partner);
      }
      own += forward ? amount : -amount;
      if (u != (forward ? t : s)) imbalance_[u] += forward ? -amount : amount;
    }
  };
  // Only nodes whose flow set_capacity cut can be unbalanced (and cancelling moves an
  // imbalance only onto such nodes, s or t): no pass over the whole network.
  for (const bool forward : {true, false}) {  // deficits first, then surpluses
    for (int v : unbalanced_nodes_) {
      if (budget < 0) break;
      if (v != s && v != t && (forward ? imbalance_[v] < -kTolerance : imbalance_[v] > kTolerance)) cancel(v, forward);
    }
  }
  if (budget < 0) {
    clear_flow();  // also forgets the imbalances
    return false;
  }
  for (int v : unbalanced_nodes_) imbalance_[v] = 0.0;
  unbalanced_nodes_.clear();
  return true;
}

bool FlowNetwork::build_distances_to_sink(int s, int t, double epsilon) {
  level_.assign(num_nodes_, -1);
  queue_.clear();
  queue_.push_back(t);
  level_[t] = 0;
  // The hot loop, on raw pointers: the compiler cannot tell that writing levels leaves the
  // vectors' own pointers alone. A node u is one step further from t than v when the arc
  // u -> v (the partner of v's half-arc to u) has residual capacity.
  queue_.resize(num_nodes_);
  int* const queue = queue_.data();
  int* const level = level_.data();
  const HalfArc* const arcs = half_.data();
  const int* const first = first_.data();
  std::size_t tail = 1;
  // t's open arcs (run() keeps the list for this t): the nodes one step from t, in the order
  // a scan of all its arcs would queue them.
  bool reached_source = false;
  sink_arcs_.prune([&](int p) { return arcs[arcs[p].partner].residual > epsilon; },
                   [&](int p) {
                     const int u = arcs[p].to;
                     if (level[u] < 0 && !reached_source) {
                       level[u] = 1;
                       queue[tail++] = u;
                       reached_source = u == s;
                     }
                   });
  if (reached_source) {
    queue_.resize(tail);
    return true;
  }
  for (std::size_t head = 1; head < tail; ++head) {
    const int v = queue[head];
    const int next_level = level[v] + 1;
    for (int p = first[v]; p < first[v + 1]; ++p) {
      const int u = arcs[p].to;
      if (level[u] < 0 && arcs[arcs[p].partner].residual > epsilon) {
        level[u] = next_level;
        queue[tail++] = u;
        // Every node nearer t than s has its distance once s has: the phase needs no more.
        if (u == s) {
          queue_.resize(tail);
          return true;
        }
      }
    }
  }
  queue_.resize(tail);
  return false;
}

void FlowNetwork::search_from_source(int s, double epsilon) {
  level_.assign(num_nodes_, -1);
  queue_.clear();
  queue_.push_back(s);
  level_[s] = 0;
  // s's open arcs, from its list.
  source_arcs_.prune([&](int p) { return half_[p].residual > epsilon; },
                     [&](int p) {
                       const int w = half_[p].to;
                       if (level_[w] < 0) {
                         level_[w] = 1;
                         queue_.push_back(w);
                       }
                     });
  const std::size_t seeded = queue_.size();
  queue_.resize(num_nodes_);
  int* const queue = queue_.data();
  int* const level = level_.data();
  const HalfArc* const arcs = half_.data();
  const int* const first = first_.data();
  std::size_t tail = seeded;
  for (std::size_t head = 1; head < tail; ++head) {
    const int v = queue[head];
    const int next_level = level[v] + 1;
    for (int p = first[v]; p < first[v + 1]; ++p) {
      if (arcs[p].residual > epsilon && level[arcs[p].to] < 0) {
        level[arcs[p].to] = next_level;
        queue[tail++] = arcs[p].to;
      }
    }
  }
  queue_.resize(tail);
}

// Blocking flow of one phase: depth-first from s along arcs whose head is one step nearer t,
// one augmenting path at a time, with per-node arc cursors (next_) so that every arc is
// skipped at most once per phase. Iterative: the path, as deep as the level graph, lives in
// path_, not on the stack.
void FlowNetwork::augment_phase(int s, int t, double epsilon) {
  next_.assign(first_.begin(), first_.end() - 1);
  const std::vector<int>& source_open = source_arcs_.positions;
  std::size_t source_next = 0;  // s's cursor, into its open arcs
  path_.clear();
  int v = s;
  while (true) {
    if (v == t) {
      double amount = std::numeric_limits<double>::infinity();
      for (int p : path_) amount = std::min(amount, half_[p].residual);
      for (int p : path_) {
        half_[p].residual -= amount;
        half_[half_[p].partner].residual += amount;
      }
      // Resume from the tail of the first arc the path saturated.
      std::size_t keep = 0;
      while (keep < path_.size() && half_[path_[keep]].residual > epsilon) ++keep;
      path_.resize(keep);
      v = keep ? half_[path_.back()].to : s;
      continue;
    }
    if (v == s) {
      const int first_level = level_[s] - 1;
      while (source_next < source_open.size() &&
             (level_[half_[source_open[source_next]].to] != first_level ||
              half_[source_open[source_next]].residual <= epsilon)) {
        ++source_next;
      }
      if (source_next == source_open.size()) return;
      path_.push_back(source_open[source_next]);
      v = half_[source_open[source_next]].to;
      continue;
    }
    int& p = next_[v];
    const int next_level = level_[v] - 1;
    while (p < first_[v + 1] && (half_[p].residual <= epsilon || level_[half_[p].to] != next_level)) ++p;
    if (p < first_[v + 1]) {
      path_.push_back(p);
      v = half_[p].to;
      continue;
    }
    // Dead end: no path to t from v in this phase.
    level_[v] = -1;
    const int back = path_.back();
    path_.pop_back();
    v = half_[half_[back].partner].to;
    if (v == s) ++source_next;
    else ++next_[v];
  }
}

void FlowNetwork::run(int s, int t, double epsilon) {
  if (!built_) build();
  source_ = s;
  sink_ = t;
  if (!source_arcs_.lists(s, epsilon) || !sink_arcs_.lists(t, epsilon)) list_open_arcs(s, t, epsilon);
  if (!unbalanced_nodes_.empty() && !restore_conservation(s, t)) {
    list_open_arcs(s, t, epsilon);  // the zero flow leaves every arc at s and t open
    ++cold_starts_;
  }
  while (build_distances_to_sink(s, t, epsilon)) augment_phase(s, t, epsilon);
  // The nodes reachable from s in the residual graph: the minimal minimum cut.
  search_from_source(s, epsilon);
}

double FlowNetwork::flow_value() const {
  double value = 0.0;
  if (source_ < 0) return value;
  for (int p = first_[source_]; p < first_[source_ + 1]; ++p) {
    if (is_forward_[p]) value += half_[half_[p].partner].residual;
    else value -= half_[p].residual;
  }
  return value;
}

std::vector<char> FlowNetwork::source_side() const {
  std::vector<char> side(num_nodes_, 0);
  for (int v = 0; v < num_nodes_; ++v) side[v] = on_source_side(v);
  return side;
}

}  // namespace perseus
