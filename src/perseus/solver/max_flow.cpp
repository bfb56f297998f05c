#include "perseus/solver/max_flow.hpp"

#include <algorithm>
#include <limits>

namespace perseus {

void DinicMaxFlow::reset(int num_nodes) {
  num_nodes_ = num_nodes;
  from_.clear();
  to_.clear();
  capacity_.clear();
  residual_.clear();
}

int DinicMaxFlow::add_arc(int from, int to, double capacity, double initial_flow) {
  const int arc = static_cast<int>(from_.size() / 2);
  const double flow = std::clamp(initial_flow, 0.0, capacity);
  from_.push_back(from);
  to_.push_back(to);
  capacity_.push_back(capacity);
  residual_.push_back(capacity - flow);
  from_.push_back(to);  // reverse half-arc
  to_.push_back(from);
  capacity_.push_back(0.0);
  residual_.push_back(flow);
  return arc;
}

void DinicMaxFlow::restore_conservation(int s, int t) {
  constexpr double kTolerance = 1e-12;
  imbalance_.assign(num_nodes_, 0.0);
  bool any = false;
  for (int h = 0; h < static_cast<int>(from_.size()); h += 2) {
    const double f = arc_flow(h);
    if (f == 0.0) continue;
    imbalance_[to_[h]] += f;
    imbalance_[from_[h]] -= f;
    any = true;
  }
  if (!any) return;
  // The flow is acyclic (the graph is a DAG), so a walk along positive flow from a node
  // with a deficit ends at t or at a node with a surplus; cancelling along it fixes the
  // deficit without unbalancing the nodes in between. Surpluses then walk back to s.
  auto cancel = [&](int v, bool forward) {
    double& own = imbalance_[v];
    int guard = 4 * num_nodes_ + 16;
    while ((forward ? -own : own) > kTolerance && guard-- > 0) {
      path_.clear();
      int u = v;
      double amount = forward ? -own : own;
      while (u != (forward ? t : s)) {
        if (u != v && (forward ? imbalance_[u] : -imbalance_[u]) > kTolerance) break;  // ends at its opposite
        int step = -1;
        for (int i = first_[u]; i < first_[u + 1]; ++i) {
          const int h = order_[i];
          // Forward walks follow arcs out of u (even half-arcs), backward walks arcs into u.
          if ((h & 1) != (forward ? 0 : 1)) continue;
          if (arc_flow(h & ~1) > kTolerance) {
            step = h;
            break;
          }
        }
        if (step < 0) break;
        path_.push_back(step & ~1);
        amount = std::min(amount, arc_flow(step & ~1));
        u = to_[step];
      }
      if (path_.empty()) {
        own = 0.0;  // nothing left to cancel; drop the float residue
        break;
      }
      if (u != (forward ? t : s)) amount = std::min(amount, forward ? imbalance_[u] : -imbalance_[u]);
      for (int h : path_) {
        residual_[h] += amount;
        residual_[h + 1] -= amount;
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

void DinicMaxFlow::finalize_csr() {
  first_.assign(num_nodes_ + 1, 0);
  for (int v : from_) ++first_[v + 1];
  for (int v = 0; v < num_nodes_; ++v) first_[v + 1] += first_[v];
  order_.resize(from_.size());
  next_.assign(first_.begin(), first_.end() - 1);
  for (int h = 0; h < static_cast<int>(from_.size()); ++h) order_[next_[from_[h]]++] = h;
}

bool DinicMaxFlow::build_levels(int s, int t, double epsilon) {
  level_.assign(num_nodes_, -1);
  queue_.clear();
  queue_.push_back(s);
  level_[s] = 0;
  for (std::size_t head = 0; head < queue_.size(); ++head) {
    const int v = queue_[head];
    for (int i = first_[v]; i < first_[v + 1]; ++i) {
      const int h = order_[i];
      const int w = to_[h];
      if (level_[w] < 0 && residual_[h] > epsilon) {
        level_[w] = level_[v] + 1;
        queue_.push_back(w);
      }
    }
  }
  return level_[t] >= 0;
}

// Pushes up to `limit` from v towards t along the level graph, splitting over several
// arcs (one DFS serves many paths, instead of one restart from s per path).
double DinicMaxFlow::push(int v, int t, double limit, double epsilon) {
  if (v == t) return limit;
  double total = 0.0;
  for (int& i = next_[v]; i < first_[v + 1]; ++i) {
    const int h = order_[i];
    const int w = to_[h];
    if (level_[w] != level_[v] + 1 || residual_[h] <= epsilon) continue;
    const double pushed = push(w, t, std::min(limit - total, residual_[h]), epsilon);
    if (pushed > 0.0) {
      residual_[h] -= pushed;
      residual_[h ^ 1] += pushed;
      total += pushed;
      if (limit - total <= epsilon) return total;  // keep the cursor: this arc may have room left
    }
  }
  return total;
}

double DinicMaxFlow::run(int s, int t, double epsilon) {
  finalize_csr();
  restore_conservation(s, t);
  double total = 0.0;
  while (build_levels(s, t, epsilon)) {
    next_.assign(first_.begin(), first_.end() - 1);
    total += push(s, t, std::numeric_limits<double>::infinity(), epsilon);
  }
  // The last BFS reached exactly the nodes reachable from s in the residual graph.
  reached_.assign(num_nodes_, 0);
  for (int v = 0; v < num_nodes_; ++v) reached_[v] = level_[v] >= 0;
  return total;
}

}  // namespace perseus
