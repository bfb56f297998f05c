// Compiled as C++17 (src/perseus/CMakeLists.txt): LEMON's CostScaling builds a StaticDigraph,
// whose maps call std::allocator::construct and destroy, gone in C++20.
#include "perseus/solver/min_cost_flow.hpp"

#include "perseus/solver/warm_network_simplex.h"

#include <lemon/cost_scaling.h>
#include <lemon/smart_graph.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

namespace perseus {

// solve_near's trees: the optimal ones with `arc` at each anchor cost (none where that had no
// optimum), valid while every other arc costs what `costs` says; shared by the circulations
// that share_anchors(), each tree computed once by whichever needs it first (the same tree
// whichever: it depends on the costs and its chain only).
struct MinCostCirculation::AnchorTrees {
  std::mutex mutex;
  int arc = -1;
  std::vector<long long> costs;
  std::map<long long, std::shared_ptr<const std::optional<warm::WarmNetworkSimplex<lemon::SmartDigraph, long long, long long>::Tree>>> trees;
  std::size_t bytes = 0;  // what the trees take
};

struct MinCostCirculation::Impl {
  using Graph = lemon::SmartDigraph;
  struct Arc {
    int from, to;
    long long cost, capacity;
  };
  int nodes = 0;
  std::vector<Arc> arcs;
  bool built = false;
  Graph graph;
  using Simplex = warm::WarmNetworkSimplex<Graph, long long, long long>;
  std::unique_ptr<Simplex> simplex;
  bool simplex_set_up = false;  // run() or set_up() has readied it for load_tree()
  bool simplex_optimal = false;  // the simplex's current tree is the last solve's optimal one
  std::shared_ptr<AnchorTrees> anchors = std::make_shared<AnchorTrees>();

  // Builds the graph on the first call; the costs as set.
  void prepare() {
    if (!built) build();
    for (std::size_t i = 0; i < arcs.size(); ++i) cost[graph.arcFromId(static_cast<int>(i))] = arcs[i].cost;
  }

  // The simplex, made on first use, given the costs of `arcs`.
  Simplex& simplex_for_costs() {
    prepare();
    if (!simplex) {
      simplex = std::make_unique<Simplex>(graph);
      simplex->upperMap(capacity);
    }
    simplex->costMap(cost);
    return *simplex;
  }

  // The simplex with `arc` costing `arc_cost` (the others as set), from the tree given, or from
  // scratch without one: the optimal tree it ends with, or none.
  std::shared_ptr<const std::optional<Simplex::Tree>> tree_at(std::size_t arc, long long arc_cost, const Simplex::Tree* from) {
    const long long kept = arcs[arc].cost;
    arcs[arc].cost = arc_cost;
    Simplex& s = simplex_for_costs();
    arcs[arc].cost = kept;
    Simplex::ProblemType status;
    if (from) {
      load_tree(*from);
      status = s.resume();
    } else {
      status = s.run();
      simplex_set_up = true;
    }
    auto tree = std::make_shared<std::optional<Simplex::Tree>>();
    if (status == Simplex::OPTIMAL) {
      tree->emplace();
      s.save_tree(**tree);
    }
    return tree;
  }

  // Makes `tree` the simplex's current one (simplex_for_costs() made it), setting the
  // network up first where no run() has.
  void load_tree(const Simplex::Tree& tree) {
    if (!simplex_set_up) simplex->set_up();
    simplex_set_up = true;
    simplex->load_tree(tree);
  }

  // The memory a kept tree takes.
  static std::size_t bytes_of(const Simplex::Tree& t) {
    std::size_t bytes = t.pred_dir.size() + t.state.size() + t.flow.size() * sizeof(long long);
    for (const auto* v : {&t.parent, &t.pred, &t.thread, &t.rev_thread, &t.succ_num, &t.last_succ}) bytes += v->size() * sizeof(int);
    return bytes;
  }

  // The simplex's answer, its potentials made canonical unless `canonical` is false.
  Status answer(Simplex::ProblemType status, int root, bool canonical = true) {
    simplex_optimal = status == Simplex::OPTIMAL;
    switch (status) {
      case Simplex::OPTIMAL:
        simplex->flowMap(flow);
        simplex->potentialMap(potential);
        if (canonical) canonicalise(root);
        return Status::kOptimal;
      case Simplex::UNBOUNDED:
        return Status::kUnbounded;
      default:
        return Status::kInfeasible;
    }
  }
  Graph::ArcMap<long long> cost{graph}, capacity{graph}, capped{graph}, flow{graph};
  Graph::NodeMap<long long> potential{graph};
  std::vector<Graph::Arc> capped_arcs;  // those of negative cost given a finite capacity
  // canonicalise()'s, kept to reuse their memory: the reversed residual graph in CSR form.
  std::vector<int> residual_begin, residual_to, residual_count;
  std::vector<long long> residual_cost, distance;
  std::vector<int> settled_at_d;  // nodes settled at the distance being expanded

  void build() {
    graph.reserveNode(nodes);
    graph.reserveArc(static_cast<int>(arcs.size()));
    for (int i = 0; i < nodes; ++i) graph.addNode();
    const auto negative_unbounded = std::count_if(arcs.begin(), arcs.end(), [](const Arc& a) {
      return a.cost < 0 && a.capacity == kUnbounded;
    });
    // CostScaling sums the negative arcs' capacities: keep that sum within range.
    const long long large = std::min(kLargeCapacity, kUnbounded / (4 * std::max<long long>(1, negative_unbounded)));
    for (const Arc& a : arcs) {
      const Graph::Arc arc = graph.addArc(graph.nodeFromId(a.from), graph.nodeFromId(a.to));
      capacity[arc] = a.capacity;
      const bool cap = a.cost < 0 && a.capacity == kUnbounded;
      capped[arc] = cap ? large : a.capacity;
      if (cap) capped_arcs.push_back(arc);
    }
    built = true;
  }

  // Lowers every potential by the node's residual distance to `root` on reduced costs (all
  // >= 0 at an optimum): the least optimal potentials with root's fixed. Dijkstra from the
  // root over the residual arcs reversed. O(m log n).
  void canonicalise(int root) {
    const auto n = static_cast<std::size_t>(nodes);
    residual_count.assign(n + 1, 0);
    const auto for_each_residual = [&](auto&& visit) {  // visit(from, to, reduced cost)
      for (std::size_t i = 0; i < arcs.size(); ++i) {
        const Arc& a = arcs[i];
        const Graph::Arc arc = graph.arcFromId(static_cast<int>(i));
        const long long f = flow[arc];
        const long long reduced = a.cost + potential[graph.nodeFromId(a.from)] - potential[graph.nodeFromId(a.to)];
        if (f < capacity[arc]) visit(a.from, a.to, reduced);
        if (f > 0) visit(a.to, a.from, -reduced);
      }
    };
    // Reversed: a residual arc u -> v is listed at v.
    for_each_residual([&](int, int to, long long) { ++residual_count[static_cast<std::size_t>(to) + 1]; });
    residual_begin.assign(n + 1, 0);
    for (std::size_t v = 0; v < n; ++v) residual_begin[v + 1] = residual_begin[v] + residual_count[v + 1];
    residual_to.resize(static_cast<std::size_t>(residual_begin[n]));
    residual_cost.resize(residual_to.size());
    std::copy(residual_begin.begin(), residual_begin.end() - 1, residual_count.begin());
    for_each_residual([&](int from, int to, long long reduced) {
      const auto slot = static_cast<std::size_t>(residual_count[static_cast<std::size_t>(to)]++);
      residual_to[slot] = from;
      residual_cost[slot] = std::max(0LL, reduced);  // exact at an optimum: never below 0
    });
    const long long unreached = std::numeric_limits<long long>::max();
    distance.assign(n, unreached);
    using Entry = std::pair<long long, int>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
    distance[static_cast<std::size_t>(root)] = 0;
    queue.push({0, root});
    // Arcs of reduced cost 0 (the spanning tree's, at least) are followed at once, without
    // the heap: a node reached through one from a node settled at d is settled at d too, d
    // being the least distance left. The same distances as plain Dijkstra, with a heap
    // operation only for arcs of positive reduced cost.
    while (!queue.empty()) {
      const auto [d, top] = queue.top();
      queue.pop();
      if (d > distance[static_cast<std::size_t>(top)]) continue;
      settled_at_d.assign(1, top);
      while (!settled_at_d.empty()) {
        const auto v = static_cast<std::size_t>(settled_at_d.back());
        settled_at_d.pop_back();
        for (int k = residual_begin[v]; k < residual_begin[v + 1]; ++k) {
          const auto u = static_cast<std::size_t>(residual_to[static_cast<std::size_t>(k)]);
          const long long through = d + residual_cost[static_cast<std::size_t>(k)];
          if (through < distance[u]) {
            distance[u] = through;
            if (through == d) {
              settled_at_d.push_back(static_cast<int>(u));
            } else {
              queue.push({through, static_cast<int>(u)});
            }
          }
        }
      }
    }
    // A node that cannot reach the root has no least potential; it is lowered as far as the
    // furthest that can (any residual arc from it leads to nodes that cannot either, and one
    // into it is kept non-negative). On the relaxation's networks every node reaches the
    // finish through unbounded arcs.
    long long furthest = 0;
    for (const long long d : distance) {
      if (d != unreached) furthest = std::max(furthest, d);
    }
    for (std::size_t v = 0; v < n; ++v) {
      potential[graph.nodeFromId(static_cast<int>(v))] -= distance[v] != unreached ? distance[v] : furthest;
    }
  }
};

MinCostCirculation::MinCostCirculation(Algorithm algorithm) : impl_(std::make_unique<Impl>()), algorithm_(algorithm) {}
MinCostCirculation::~MinCostCirculation() = default;

int MinCostCirculation::add_node() { return impl_->nodes++; }

int MinCostCirculation::add_arc(int from, int to, long long cost, long long capacity) {
  impl_->arcs.push_back({from, to, cost, capacity});
  return static_cast<int>(impl_->arcs.size()) - 1;
}

void MinCostCirculation::set_cost(int arc, long long cost) { impl_->arcs[static_cast<std::size_t>(arc)].cost = cost; }

MinCostCirculation::Status MinCostCirculation::solve(int root) {
  Impl& m = *impl_;
  m.prepare();
  resumed_ = false;
  m.simplex_optimal = false;
  scaled_ = algorithm_ == Algorithm::kCostScaling ||
            (algorithm_ == Algorithm::kAuto && m.nodes >= kCostScalingMinNodes && m.nodes <= kCostScalingMaxNodes);
  fell_back_ = false;
  if (scaled_) {
    using Scaling = lemon::CostScaling<Impl::Graph, long long, long long>;
    Scaling scaling(m.graph);
    scaling.costMap(m.cost).upperMap(m.capped);
    if (scaling.run() == Scaling::OPTIMAL) {
      scaling.flowMap(m.flow);
      const bool saturated = std::any_of(m.capped_arcs.begin(), m.capped_arcs.end(),
                                         [&](Impl::Graph::Arc a) { return m.flow[a] >= m.capped[a]; });
      if (!saturated) {
        scaling.potentialMap(m.potential);
        m.canonicalise(root);
        return Status::kOptimal;
      }
    }
    fell_back_ = true;
  }
  Impl::Simplex& simplex = m.simplex_for_costs();
  m.simplex_set_up = true;
  return m.answer(simplex.run(), root);
}

void MinCostCirculation::share_anchors(const MinCostCirculation& other) { impl_->anchors = other.impl_->anchors; }

MinCostCirculation::Status MinCostCirculation::solve_near(int root, int arc, const std::vector<long long>& chain) {
  Impl& m = *impl_;
  m.prepare();
  if (chain.empty() || m.nodes > kAnchorMaxNodes) return solve(root);
  AnchorTrees& store = *m.anchors;
  const auto a = static_cast<std::size_t>(arc);
  using Tree = std::shared_ptr<const std::optional<Impl::Simplex::Tree>>;
  // The deepest anchor of the chain with a tree kept, if the trees hold for these costs.
  Tree tree;
  std::size_t next = 0;
  {
    std::lock_guard lock(store.mutex);
    bool same = store.arc == arc && store.costs.size() == m.arcs.size();
    for (std::size_t i = 0; same && i < m.arcs.size(); ++i) same = i == a || store.costs[i] == m.arcs[i].cost;
    if (!same) {
      store.trees.clear();
      store.arc = arc;
      store.costs.resize(m.arcs.size());
      for (std::size_t i = 0; i < m.arcs.size(); ++i) store.costs[i] = m.arcs[i].cost;
    }
    for (std::size_t i = chain.size(); i-- > 0;) {
      if (const auto found = store.trees.find(chain[i]); found != store.trees.end()) {
        tree = found->second;
        next = i + 1;
        break;
      }
    }
  }
  // The rest of the chain, each anchor's tree from the one before (the first from scratch).
  for (; next < chain.size(); ++next) {
    if (tree && !*tree) break;
    {
      std::lock_guard lock(store.mutex);
      if (store.bytes >= kMaxAnchorBytes) break;
    }
    Tree made = m.tree_at(a, chain[next], tree ? &**tree : nullptr);
    const std::size_t bytes = *made ? Impl::bytes_of(**made) : 0;
    std::lock_guard lock(store.mutex);
    const auto [at, added] = store.trees.emplace(chain[next], std::move(made));  // another thread's, if first: the same
    if (added) store.bytes += bytes;
    tree = at->second;
  }
  if (next < chain.size() || !*tree) return solve(root);  // no optimum on the way, or no room
  Impl::Simplex& simplex = m.simplex_for_costs();
  m.load_tree(**tree);
  scaled_ = false;
  fell_back_ = false;
  resumed_ = true;
  return m.answer(simplex.resume(), root);
}

MinCostCirculation::Status MinCostCirculation::solve_from_last(int root) {
  Impl& m = *impl_;
  if (!m.simplex_optimal) return solve(root);
  Impl::Simplex& simplex = m.simplex_for_costs();
  scaled_ = false;
  fell_back_ = false;
  resumed_ = true;
  return m.answer(simplex.resume(), root, /*canonical=*/false);
}

bool MinCostCirculation::has_last_tree() const { return impl_->simplex_optimal; }

long long MinCostCirculation::flow(int arc) const { return impl_->flow[impl_->graph.arcFromId(arc)]; }
long long MinCostCirculation::potential(int node) const { return impl_->potential[impl_->graph.nodeFromId(node)]; }

}  // namespace perseus
