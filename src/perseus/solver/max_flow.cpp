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
}

int FlowNetwork::add_arc(int from, int to) {
  tail_.push_back(from);
  head_.push_back(to);
  capacity_.push_back(0.0);
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
  to_.assign(2 * arcs, 0);
  partner_.assign(2 * arcs, 0);
  is_forward_.assign(2 * arcs, 0);
  residual_.assign(2 * arcs, 0.0);
  forward_.assign(arcs, 0);
  backward_.assign(arcs, 0);
  imbalance_.assign(num_nodes_, 0.0);
  unbalanced_nodes_.clear();
  std::vector<int> fill(first_.begin(), first_.end() - 1);
  for (int a = 0; a < arcs; ++a) {
    const int f = fill[tail_[a]]++;
    const int b = fill[head_[a]]++;
    to_[f] = head_[a];
    to_[b] = tail_[a];
    partner_[f] = b;
    partner_[b] = f;
    is_forward_[f] = 1;
    residual_[f] = capacity_[a];
    forward_[a] = f;
    backward_[a] = b;
  }
  built_ = true;
}

void FlowNetwork::set_capacity(int arc, double capacity) {
  // The crawl sets every arc's capacity every step and most stay as they were: skip those
  // before touching the arc's scattered residual entries.
  if (capacity_[arc] == capacity) return;
  capacity_[arc] = capacity;
  if (!built_) return;  // build() starts every arc empty
  const int f = forward_[arc];
  const int b = backward_[arc];
  if (residual_[b] > capacity) {
    // The cut flow leaves the head short of inflow and the tail with a surplus.
    const double cut = residual_[b] - capacity;
    residual_[b] = capacity;
    note_imbalance(head_[arc], -cut);
    note_imbalance(tail_[arc], cut);
  }
  residual_[f] = capacity - residual_[b];
}

void FlowNetwork::note_imbalance(int v, double amount) {
  if (imbalance_[v] == 0.0) unbalanced_nodes_.push_back(v);
  imbalance_[v] += amount;
}

void FlowNetwork::clear_flow() {
  if (!built_) return;
  for (int a = 0; a < num_arcs(); ++a) {
    residual_[forward_[a]] = capacity_[a];
    residual_[backward_[a]] = 0.0;
  }
  for (int v : unbalanced_nodes_) imbalance_[v] = 0.0;
  unbalanced_nodes_.clear();
}

void FlowNetwork::restore_conservation(int s, int t) {
  constexpr double kTolerance = 1e-12;
  // The nodes set_capacity noted, their imbalances recomputed from the flows: the walks
  // below rely on exact signs, which sums of cut amounts only approximate.
  for (int v : unbalanced_nodes_) {
    double balance = 0.0;
    for (int p = first_[v]; p < first_[v + 1]; ++p) balance += is_forward_[p] ? -residual_[partner_[p]] : residual_[p];
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
        for (int p = first_[u]; p < first_[u + 1]; ++p) {
          // Forward walks follow arcs out of u, backward walks arcs into u.
          if (is_forward_[p] != (forward ? 1 : 0)) continue;
          const int f = forward ? p : partner_[p];
          if (residual_[partner_[f]] > kTolerance) {
            step = f;
            break;
          }
        }
        if (step < 0) break;
        path_.push_back(step);
        amount = std::min(amount, residual_[partner_[step]]);
        u = forward ? to_[step] : to_[partner_[step]];
      }
      if (path_.empty()) {
        own = 0.0;  // nothing left to cancel; drop the float residue
        break;
      }
      if (u != (forward ? t : s)) amount = std::min(amount, forward ? imbalance_[u] : -imbalance_[u]);
      for (int f : path_) {
        residual_[f] += amount;
        residual_[partner_[f]] -= amount;
      }
      own += forward ? amount : -amount;
      if (u != (forward ? t : s)) imbalance_[u] += forward ? -amount : amount;
    }
  };
  // Only nodes whose flow set_capacity cut can be unbalanced (and cancelling moves an
  // imbalance only onto such nodes, s or t): no pass over the whole network.
  for (int v : unbalanced_nodes_) {
    if (v != s && v != t && imbalance_[v] < -kTolerance) cancel(v, true);
  }
  for (int v : unbalanced_nodes_) {
    if (v != s && v != t && imbalance_[v] > kTolerance) cancel(v, false);
  }
  for (int v : unbalanced_nodes_) imbalance_[v] = 0.0;
  unbalanced_nodes_.clear();
}

bool FlowNetwork::build_levels(int s, int t, double epsilon) {
  level_.assign(num_nodes_, -1);
  queue_.clear();
  queue_.push_back(s);
  level_[s] = 0;
  for (std::size_t head = 0; head < queue_.size(); ++head) {
    const int v = queue_[head];
    // Nodes as far from s as t lead nowhere in the level graph: stop once t has a level.
    // (The BFS that cannot reach t visits everything reachable, which run() relies on.)
    if (level_[t] >= 0 && level_[v] >= level_[t]) break;
    for (int p = first_[v]; p < first_[v + 1]; ++p) {
      const int w = to_[p];
      if (level_[w] < 0 && residual_[p] > epsilon) {
        level_[w] = level_[v] + 1;
        queue_.push_back(w);
      }
    }
  }
  return level_[t] >= 0;
}

// Blocking flow of one phase: depth-first along the level graph, one augmenting path at a
// time, with per-node arc cursors (next_) so that every arc is skipped at most once per
// phase. Iterative: the path, as deep as the level graph, lives in path_, not on the stack.
void FlowNetwork::augment_phase(int s, int t, double epsilon) {
  next_.assign(first_.begin(), first_.end() - 1);
  path_.clear();
  int v = s;
  while (true) {
    if (v == t) {
      double amount = std::numeric_limits<double>::infinity();
      for (int p : path_) amount = std::min(amount, residual_[p]);
      for (int p : path_) {
        residual_[p] -= amount;
        residual_[partner_[p]] += amount;
      }
      // Resume from the tail of the first arc the path saturated.
      std::size_t keep = 0;
      while (keep < path_.size() && residual_[path_[keep]] > epsilon) ++keep;
      path_.resize(keep);
      v = keep ? to_[path_.back()] : s;
      continue;
    }
    int& p = next_[v];
    while (p < first_[v + 1] && (level_[to_[p]] != level_[v] + 1 || residual_[p] <= epsilon)) ++p;
    if (p < first_[v + 1]) {
      path_.push_back(p);
      v = to_[p];
      continue;
    }
    // Dead end: no path to t from v in this phase.
    if (v == s) return;
    level_[v] = -1;
    const int back = path_.back();
    path_.pop_back();
    v = to_[partner_[back]];
    ++next_[v];
  }
}

double FlowNetwork::run(int s, int t, double epsilon) {
  if (!built_) build();
  if (!unbalanced_nodes_.empty()) restore_conservation(s, t);
  while (build_levels(s, t, epsilon)) augment_phase(s, t, epsilon);
  // The last BFS reached exactly the nodes reachable from s in the residual graph.
  reached_.assign(num_nodes_, 0);
  for (int v = 0; v < num_nodes_; ++v) reached_[v] = level_[v] >= 0;
  double value = 0.0;
  for (int p = first_[s]; p < first_[s + 1]; ++p) {
    if (is_forward_[p]) value += residual_[partner_[p]];
    else value -= residual_[p];
  }
  return value;
}

}  // namespace perseus
