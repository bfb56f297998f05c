#include "perseus/solver/max_flow.hpp"

#include <algorithm>
#include <limits>

namespace perseus {

void FlowNetwork::reset(int num_nodes) {
  num_nodes_ = num_nodes;
  built_ = false;
  unbalanced_ = false;
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
  capacity_[arc] = capacity;
  if (!built_) return;  // build() starts every arc empty
  const int f = forward_[arc];
  const int b = backward_[arc];
  if (residual_[b] > capacity) {
    residual_[b] = capacity;
    unbalanced_ = true;
  }
  residual_[f] = capacity - residual_[b];
}

void FlowNetwork::clear_flow() {
  if (!built_) return;
  for (int a = 0; a < num_arcs(); ++a) {
    residual_[forward_[a]] = capacity_[a];
    residual_[backward_[a]] = 0.0;
  }
  unbalanced_ = false;
}

void FlowNetwork::restore_conservation(int s, int t) {
  constexpr double kTolerance = 1e-12;
  imbalance_.assign(num_nodes_, 0.0);
  for (int a = 0; a < num_arcs(); ++a) {
    const double f = flow(a);
    imbalance_[head_[a]] += f;
    imbalance_[tail_[a]] -= f;
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
  for (int v = 0; v < num_nodes_; ++v) {
    if (v != s && v != t && imbalance_[v] < -kTolerance) cancel(v, true);
  }
  for (int v = 0; v < num_nodes_; ++v) {
    if (v != s && v != t && imbalance_[v] > kTolerance) cancel(v, false);
  }
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

// Pushes up to `limit` from v towards t along the level graph, splitting over several
// arcs (one DFS serves many paths, instead of one restart from s per path).
double FlowNetwork::push(int v, int t, double limit, double epsilon) {
  if (v == t) return limit;
  double total = 0.0;
  for (int& p = next_[v]; p < first_[v + 1]; ++p) {
    const int w = to_[p];
    if (level_[w] != level_[v] + 1 || residual_[p] <= epsilon) continue;
    const double pushed = push(w, t, std::min(limit - total, residual_[p]), epsilon);
    if (pushed > 0.0) {
      residual_[p] -= pushed;
      residual_[partner_[p]] += pushed;
      total += pushed;
      if (limit - total <= epsilon) return total;  // keep the cursor: this arc may have room left
    }
  }
  return total;
}

double FlowNetwork::run(int s, int t, double epsilon) {
  if (!built_) build();
  if (unbalanced_) restore_conservation(s, t);
  unbalanced_ = false;
  while (build_levels(s, t, epsilon)) {
    next_.assign(first_.begin(), first_.end() - 1);
    push(s, t, std::numeric_limits<double>::infinity(), epsilon);
  }
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
