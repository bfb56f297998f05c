#include "perseus/planner/partition.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "perseus/model/errors.hpp"

namespace perseus::planner {
namespace {

void validate(std::span<const double> weights, int stages) {
  if (stages < 1) throw InputError("partition: the number of stages must be at least 1");
  if (weights.empty()) throw InputError("partition: no layers to partition");
  if (static_cast<std::size_t>(stages) > weights.size()) {
    throw InputError("partition: " + std::to_string(stages) + " stages need at least as many layers, got " +
                     std::to_string(weights.size()));
  }
  double total = 0.0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0.0) {
      throw InputError("partition: layer " + std::to_string(i) + " has weight " + std::to_string(weights[i]) +
                       "; weights must be finite and not negative");
    }
    total += weights[i];
  }
  if (!(total > 0.0)) throw InputError("partition: every layer has zero weight");
}

// Decides whether layers split into exactly `stages` contiguous, non-empty stages with every
// stage sum in [lo, hi], and recovers such a split. reach[i] is the set of stage counts that
// can end exactly at prefix i (a bitset of stages + 1 bits); reach[i] is the OR of reach[j] << 1
// over the window of j with lo <= P[i] - P[j] <= hi, which slides monotonically with i, so a
// two-stack sliding-window OR keeps each step O(words).
class FeasibilityOracle {
 public:
  FeasibilityOracle(std::span<const double> weights, int stages)
      : n_(static_cast<int>(weights.size())), stages_(stages), words_((stages + 64) / 64) {
    prefix_.assign(n_ + 1, 0.0);
    for (int i = 0; i < n_; ++i) prefix_[i + 1] = prefix_[i] + weights[i];
    reach_.assign(static_cast<std::size_t>(n_ + 1) * words_, 0);
    suffix_.assign(static_cast<std::size_t>(n_ + 1) * words_, 0);
    back_.assign(words_, 0);
  }

  double segment(int j, int i) const { return prefix_[i] - prefix_[j]; }

  bool feasible(double lo, double hi) {
    ++checks_;
    std::fill(reach_.begin(), reach_.end(), 0);
    set_bit(0, 0);
    int window_lo = 0;   // first j with P[i] - P[j] <= hi
    int window_hi = -1;  // last j with P[i] - P[j] >= lo (and j < i)
    int mid = 0;         // front part [window_lo, mid) has suffix ORs; back part [mid, window_hi] in back_
    std::fill(back_.begin(), back_.end(), 0);
    for (int i = 1; i <= n_; ++i) {
      while (window_hi + 1 < i && segment(window_hi + 1, i) >= lo) {
        ++window_hi;
        if (window_hi >= mid) or_into(back_.data(), row(reach_, window_hi));
      }
      while (window_lo <= window_hi && segment(window_lo, i) > hi) ++window_lo;
      if (window_lo > window_hi) continue;
      if (window_lo >= mid) {
        // Rebuild: everything in the window moves to the front with suffix ORs.
        mid = window_hi + 1;
        std::uint64_t* acc = row(suffix_, window_hi);
        copy(acc, row(reach_, window_hi));
        for (int j = window_hi - 1; j >= window_lo; --j) {
          std::uint64_t* r = row(suffix_, j);
          copy(r, row(reach_, j));
          or_into(r, row(suffix_, j + 1));
        }
        std::fill(back_.begin(), back_.end(), 0);
      }
      std::uint64_t* target = row(reach_, i);
      const std::uint64_t* front = row(suffix_, window_lo);
      shift_or(target, front);
      shift_or(target, back_.data());
      // Bits above `stages` are meaningless; clear them so they never spread.
      trim(target);
    }
    return test_bit(n_, stages_);
  }

  // Boundaries of a split found by the last successful feasible(lo, hi) call.
  std::vector<int> recover(double lo, double hi) const {
    std::vector<int> boundaries{n_};
    int i = n_;
    for (int k = stages_; k > 0; --k) {
      // Latest cut j < i with the stage [j, i) in range and k - 1 stages before it.
      int found = -1;
      for (int j = i - 1; j >= 0; --j) {
        const double sum = segment(j, i);
        if (sum > hi) break;
        if (sum >= lo && test_bit(j, k - 1)) {
          found = j;
          break;
        }
      }
      if (found < 0) throw std::logic_error("partition: feasible split could not be recovered");
      boundaries.push_back(found);
      i = found;
    }
    std::reverse(boundaries.begin(), boundaries.end());
    return boundaries;
  }

  std::size_t checks() const { return checks_; }
  double total() const { return prefix_.back(); }

 private:
  std::uint64_t* row(std::vector<std::uint64_t>& v, int i) { return v.data() + static_cast<std::size_t>(i) * words_; }
  const std::uint64_t* row(const std::vector<std::uint64_t>& v, int i) const {
    return v.data() + static_cast<std::size_t>(i) * words_;
  }
  void set_bit(int i, int bit) { row(reach_, i)[bit / 64] |= std::uint64_t{1} << (bit % 64); }
  bool test_bit(int i, int bit) const { return (row(reach_, i)[bit / 64] >> (bit % 64)) & 1u; }
  void or_into(std::uint64_t* dst, const std::uint64_t* src) const {
    for (int w = 0; w < words_; ++w) dst[w] |= src[w];
  }
  void copy(std::uint64_t* dst, const std::uint64_t* src) const { std::copy(src, src + words_, dst); }
  void shift_or(std::uint64_t* dst, const std::uint64_t* src) const {
    std::uint64_t carry = 0;
    for (int w = 0; w < words_; ++w) {
      dst[w] |= (src[w] << 1) | carry;
      carry = src[w] >> 63;
    }
  }
  void trim(std::uint64_t* bits) const {
    const int used = stages_ + 1;
    const int last = (used - 1) / 64;
    const int keep = used - last * 64;
    if (keep < 64) bits[last] &= (std::uint64_t{1} << keep) - 1;
  }

  int n_, stages_, words_;
  std::vector<double> prefix_;
  std::vector<std::uint64_t> reach_, suffix_, back_;
  std::size_t checks_ = 0;
};

// Distinct contiguous-segment sums, ascending (computed as the oracle computes them).
std::vector<double> segment_sums(const FeasibilityOracle& oracle, int n) {
  std::vector<double> sums;
  sums.reserve(static_cast<std::size_t>(n) * (n + 1) / 2);
  for (int j = 0; j < n; ++j) {
    for (int i = j + 1; i <= n; ++i) sums.push_back(oracle.segment(j, i));
  }
  std::sort(sums.begin(), sums.end());
  sums.erase(std::unique(sums.begin(), sums.end()), sums.end());
  return sums;
}

// The smallest i in [first, last] with a split whose stages all lie within [lo, sums[i]]; last
// if none before it does. Precondition: sums ascending (feasibility only grows with the upper
// limit). O(log(last - first)) feasibility checks.
std::size_t smallest_feasible_upper(FeasibilityOracle& oracle, const std::vector<double>& sums, double lo, std::size_t first,
                                    std::size_t last) {
  while (first < last) {
    const std::size_t mid = (first + last) / 2;
    if (oracle.feasible(lo, sums[mid])) {
      last = mid;
    } else {
      first = mid + 1;
    }
  }
  return first;
}

}  // namespace

Partition evaluate_partition(std::span<const double> weights, std::vector<int> boundaries) {
  const int n = static_cast<int>(weights.size());
  if (boundaries.size() < 2 || boundaries.front() != 0 || boundaries.back() != n) {
    throw InputError("partition: boundaries must start at 0 and end at the " + std::to_string(n) + " layers");
  }
  Partition p;
  for (std::size_t s = 0; s + 1 < boundaries.size(); ++s) {
    if (boundaries[s + 1] <= boundaries[s]) {
      throw InputError("partition: stage " + std::to_string(s) + " is empty (boundaries must increase)");
    }
    double sum = 0.0;
    for (int l = boundaries[s]; l < boundaries[s + 1]; ++l) sum += weights[l];
    p.stage_weights.push_back(sum);
  }
  p.boundaries = std::move(boundaries);
  const auto [lo, hi] = std::minmax_element(p.stage_weights.begin(), p.stage_weights.end());
  p.min_weight = *lo;
  p.max_weight = *hi;
  p.imbalance_ratio = p.min_weight > 0.0 ? p.max_weight / p.min_weight : std::numeric_limits<double>::infinity();
  return p;
}

Partition min_max_partition(std::span<const double> weights, int stages) {
  validate(weights, stages);
  const int n = static_cast<int>(weights.size());
  FeasibilityOracle oracle(weights, stages);
  const std::vector<double> sums = segment_sums(oracle, n);
  // The smallest sum U with a split whose stages all stay within [0, U].
  const std::size_t u = smallest_feasible_upper(oracle, sums, 0.0, 0, sums.size() - 1);
  oracle.feasible(0.0, sums[u]);
  Partition p = evaluate_partition(weights, oracle.recover(0.0, sums[u]));
  p.feasibility_checks = oracle.checks();
  return p;
}

Partition min_imbalance_partition(std::span<const double> weights, int stages) {
  validate(weights, stages);
  const int n = static_cast<int>(weights.size());
  if (stages == 1) return evaluate_partition(weights, {0, n});
  FeasibilityOracle oracle(weights, stages);
  const std::vector<double> sums = segment_sums(oracle, n);
  const double average = oracle.total() / stages;

  // The longest stage is at least the min-max optimum U0 and the shortest at most the average.
  const std::size_t u0 = smallest_feasible_upper(oracle, sums, 0.0, 0, sums.size() - 1);
  double best_ratio = std::numeric_limits<double>::infinity();
  double best_lo = 0.0, best_hi = sums[u0];
  std::size_t u_cap = sums.size() - 1;  // U(L) only shrinks as L decreases
  // Shortest-stage candidates from the largest (<= average) down.
  std::size_t l_index = std::upper_bound(sums.begin(), sums.end(), average) - sums.begin();
  while (l_index-- > 0) {
    const double lo = sums[l_index];
    if (lo <= 0.0) break;                   // a stage of zero weight: an infinite ratio
    if (sums[u0] / lo > best_ratio) break;  // every smaller L is worse still
    // Only a longest stage strictly better than the best ratio (or equal with a smaller max) helps.
    std::size_t limit = u_cap;
    while (limit > u0 && sums[limit] / lo > best_ratio) --limit;
    if (limit < u0 || sums[limit] / lo > best_ratio) continue;
    if (!oracle.feasible(lo, sums[limit])) continue;
    // Smallest feasible U in [u0, limit].
    const std::size_t a = smallest_feasible_upper(oracle, sums, lo, u0, limit);
    u_cap = a;
    const double ratio = sums[a] / lo;
    if (ratio < best_ratio || (ratio == best_ratio && sums[a] < best_hi)) {
      best_ratio = ratio;
      best_lo = lo;
      best_hi = sums[a];
    }
  }
  if (!std::isfinite(best_ratio)) {
    // Zero-weight layers leave some stage empty of work whatever the split: balance the maximum.
    Partition p = min_max_partition(weights, stages);
    p.feasibility_checks += oracle.checks();
    return p;
  }
  if (!oracle.feasible(best_lo, best_hi)) throw std::logic_error("partition: best split is not feasible");
  Partition p = evaluate_partition(weights, oracle.recover(best_lo, best_hi));
  p.feasibility_checks = oracle.checks();
  return p;
}

Partition uniform_partition(std::span<const double> weights, int stages) {
  validate(weights, stages);
  const int n = static_cast<int>(weights.size());
  std::vector<int> boundaries{0};
  const int base = n / stages;
  const int extra = n % stages;
  for (int s = 0; s < stages; ++s) boundaries.push_back(boundaries.back() + base + (s < extra ? 1 : 0));
  return evaluate_partition(weights, std::move(boundaries));
}

// ---- PipeDream ----

namespace {

struct Choice {
  int split = -1;     // last layer of the sub-pipeline before the final stage; -1: one stage
  int last_workers = 0;
};

// A_k(i, j, m) for one level, with choices to flatten the optimum afterwards.
struct LevelTable {
  int n = 0;
  int workers = 0;  // components of the level below available at this level
  bool all_starts = true;
  std::vector<double> value;
  std::vector<Choice> choice;
  std::size_t index(int i, int j, int m) const {
    return (static_cast<std::size_t>(i) * n + j) * (workers + 1) + m;
  }
};

}  // namespace

PipeDreamPlan pipedream_partition(std::span<const PipeDreamLayer> layers, std::span<const TopologyLevel> topology) {
  const int n = static_cast<int>(layers.size());
  if (n == 0) throw InputError("pipedream: no layers");
  if (topology.empty()) throw InputError("pipedream: the topology needs at least one level");
  for (const TopologyLevel& level : topology) {
    if (level.count < 1 || !(level.bandwidth > 0.0)) {
      throw InputError("pipedream: topology level '" + level.name + "' needs count >= 1 and a positive bandwidth");
    }
  }
  std::vector<double> compute_prefix(n + 1, 0.0), param_prefix(n + 1, 0.0);
  for (int l = 0; l < n; ++l) {
    compute_prefix[l + 1] = compute_prefix[l] + layers[l].compute_s;
    param_prefix[l + 1] = param_prefix[l] + layers[l].parameter_bytes;
  }
  // below(i, j): the best time of layers [i, j] on one whole component of the level below.
  std::vector<double> below(static_cast<std::size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    for (int j = i; j < n; ++j) below[static_cast<std::size_t>(i) * n + j] = compute_prefix[j + 1] - compute_prefix[i];
  }
  std::vector<LevelTable> tables;
  const int levels = static_cast<int>(topology.size());
  for (int k = 0; k < levels; ++k) {
    const TopologyLevel& level = topology[k];
    LevelTable t;
    t.n = n;
    t.workers = level.count;
    t.all_starts = k + 1 < levels;  // the top level only needs pipelines starting at layer 0
    t.value.assign(static_cast<std::size_t>(n) * n * (level.count + 1), std::numeric_limits<double>::infinity());
    t.choice.assign(t.value.size(), Choice{});
    const double bw = level.bandwidth;
    auto single_stage = [&](int i, int j, int m) {
      const double sync = 2.0 * (m - 1) * (param_prefix[j + 1] - param_prefix[i]) / bw;
      return std::max(below[static_cast<std::size_t>(i) * n + j], sync) / m;
    };
    const int first_start_max = t.all_starts ? n - 1 : 0;
    for (int i = 0; i <= first_start_max; ++i) {
      for (int j = i; j < n; ++j) {
        for (int m = 1; m <= level.count; ++m) {
          double best = single_stage(i, j, m);
          Choice choice;
          for (int s = i; s < j; ++s) {
            const double transfer = 2.0 * layers[s].activation_bytes / bw;
            if (transfer >= best) continue;
            for (int last = 1; last < m; ++last) {
              const double head = t.value[t.index(i, s, m - last)];
              if (head >= best) continue;
              const double candidate = std::max({head, transfer, single_stage(s + 1, j, last)});
              if (candidate < best) {
                best = candidate;
                choice = {s, last};
              }
            }
          }
          t.value[t.index(i, j, m)] = best;
          t.choice[t.index(i, j, m)] = choice;
        }
      }
    }
    // The next level's single stages run on a whole component of this level.
    if (t.all_starts) {
      for (int i = 0; i < n; ++i) {
        for (int j = i; j < n; ++j) below[static_cast<std::size_t>(i) * n + j] = t.value[t.index(i, j, level.count)];
      }
    }
    tables.push_back(std::move(t));
  }

  PipeDreamPlan plan;
  plan.workers = 1;
  for (const TopologyLevel& level : topology) plan.workers *= level.count;
  plan.slowest_stage_s = tables.back().value[tables.back().index(0, n - 1, topology.back().count)];

  // Flatten: a stage replicated over m components of level k runs level k-1's best pipeline for
  // its layers on each of them, so its sub-stages are replicated m times more.
  struct Frame {
    int level, i, j, m, multiplier;
  };
  std::vector<Frame> todo{{levels - 1, 0, n - 1, topology.back().count, 1}};
  std::vector<PipeDreamStage> stages;
  while (!todo.empty()) {
    const Frame f = todo.back();
    todo.pop_back();
    if (f.level < 0) {
      stages.push_back({f.i, f.j + 1, f.multiplier, compute_prefix[f.j + 1] - compute_prefix[f.i]});
      continue;
    }
    const LevelTable& t = tables[f.level];
    const Choice c = t.choice[t.index(f.i, f.j, f.m)];
    const int below_count = f.level > 0 ? topology[f.level - 1].count : 1;
    if (c.split < 0) {
      todo.push_back({f.level - 1, f.i, f.j, below_count, f.multiplier * f.m});
    } else {
      // Push the final stage first so the head of the pipeline is flattened first (stack order).
      todo.push_back({f.level - 1, c.split + 1, f.j, below_count, f.multiplier * c.last_workers});
      todo.push_back({f.level, f.i, c.split, f.m - c.last_workers, f.multiplier});
    }
  }
  std::sort(stages.begin(), stages.end(),
            [](const PipeDreamStage& a, const PipeDreamStage& b) { return a.first_layer < b.first_layer; });
  plan.stages = std::move(stages);
  plan.in_flight = (plan.workers + plan.stages.front().replicas - 1) / plan.stages.front().replicas;
  return plan;
}

double pipedream_config_time(std::span<const PipeDreamLayer> layers, std::span<const PipeDreamStage> stages,
                             double bandwidth) {
  double worst = 0.0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    double compute = 0.0, params = 0.0;
    for (int l = stages[s].first_layer; l < stages[s].end_layer; ++l) {
      compute += layers[l].compute_s;
      params += layers[l].parameter_bytes;
    }
    const int r = stages[s].replicas;
    worst = std::max(worst, std::max(compute, 2.0 * (r - 1) * params / bandwidth) / r);
    if (s + 1 < stages.size()) {
      worst = std::max(worst, 2.0 * layers[stages[s].end_layer - 1].activation_bytes / bandwidth);
    }
  }
  return worst;
}

}  // namespace perseus::planner
