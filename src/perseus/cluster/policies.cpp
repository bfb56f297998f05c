#include "perseus/cluster/policies.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "perseus/cluster/energy_stage.hpp"
#include "perseus/cluster/linear_program.hpp"

namespace perseus::cluster {

std::string_view to_string(PolicyKind policy) {
  switch (policy) {
    case PolicyKind::kMaxMinFairness: return "max-min-fairness";
    case PolicyKind::kFifo: return "fifo";
    case PolicyKind::kMakespan: return "makespan";
    case PolicyKind::kFinishTimeFairness: return "finish-time-fairness";
    case PolicyKind::kShortestJobFirst: return "shortest-job-first";
    case PolicyKind::kMaxThroughput: return "max-throughput";
    case PolicyKind::kMinCost: return "min-cost";
    case PolicyKind::kMinCostSlo: return "min-cost-slo";
  }
  return "?";
}

bool needs_steps(PolicyKind policy) {
  return policy == PolicyKind::kMakespan || policy == PolicyKind::kFinishTimeFairness ||
         policy == PolicyKind::kShortestJobFirst || policy == PolicyKind::kMinCostSlo;
}

bool needs_prices(PolicyKind policy) { return policy == PolicyKind::kMinCost || policy == PolicyKind::kMinCostSlo; }

std::vector<double> default_prices(const ThroughputMatrix& matrix) {
  std::vector<double> out;
  for (const std::string& gpu : matrix.gpu_types) {
    std::string g = gpu;
    for (char& c : g) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (g == "k80") out.push_back(0.90);
    else if (g == "p100") out.push_back(1.46);
    else if (g == "v100") out.push_back(3.06);
    else throw InputError(fmt::format("no default price for GPU type '{}': give --prices", gpu));
  }
  return out;
}

PolicyKind parse_policy(std::string_view name) {
  std::string s(name);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "max-min-fairness" || s == "las") return PolicyKind::kMaxMinFairness;
  if (s == "fifo") return PolicyKind::kFifo;
  if (s == "makespan") return PolicyKind::kMakespan;
  if (s == "finish-time-fairness" || s == "ftf") return PolicyKind::kFinishTimeFairness;
  if (s == "shortest-job-first" || s == "sjf") return PolicyKind::kShortestJobFirst;
  if (s == "max-throughput") return PolicyKind::kMaxThroughput;
  if (s == "min-cost") return PolicyKind::kMinCost;
  if (s == "min-cost-slo") return PolicyKind::kMinCostSlo;
  throw InputError(fmt::format("unknown policy '{}': expected max-min-fairness (las), fifo, makespan, finish-time-fairness "
                               "(ftf), shortest-job-first (sjf), max-throughput, min-cost or min-cost-slo",
                               name));
}

double effective_throughput(const ThroughputMatrix& matrix, int job_type, const std::vector<double>& share) {
  double sum = 0.0;
  for (int j = 0; j < matrix.num_gpu_types(); ++j) sum += matrix.at(job_type, j) * share[static_cast<std::size_t>(j)];
  return sum;
}

namespace {

int scale_of(const ThroughputMatrix& t, const Job& job) { return t.job_types[static_cast<std::size_t>(job.type)].scale_factor; }

void check(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers, PolicyKind policy) {
  if (static_cast<int>(workers.size()) != t.num_gpu_types())
    throw InputError(fmt::format("the cluster has {} GPU counts, the throughputs {} GPU types", workers.size(), t.num_gpu_types()));
  for (std::size_t j = 0; j < workers.size(); ++j)
    if (workers[j] < 0) throw InputError(fmt::format("{} GPUs of {}: must be zero or more", workers[j], t.gpu_types[j]));
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    const Job& job = jobs[m];
    if (job.type < 0 || job.type >= t.num_job_types()) throw InputError(fmt::format("job {}: no job type {}", m, job.type));
    if (!(job.weight >= 0.0) || !std::isfinite(job.weight))
      throw InputError(fmt::format("job {} ({}): weight {} must be zero or more", m, t.job_types[job.type].name(), job.weight));
    if (needs_steps(policy) && !(job.steps > 0.0))
      throw InputError(fmt::format("job {} ({}): the {} policy needs its steps left (> 0)", m, t.job_types[job.type].name(),
                                   to_string(policy)));
    if (!(job.elapsed_s >= 0.0)) throw InputError(fmt::format("job {}: elapsed time must be zero or more", m));
    if (!(job.slo_s > 0.0))
      throw InputError(fmt::format("job {} ({}): SLO {} s left must be > 0 (infinite: none)", m, t.job_types[job.type].name(),
                                   job.slo_s));
  }
}

// The matrix a policy sees: T itself, or (agnostic) 1 wherever the job can run.
double seen(const ThroughputMatrix& t, const Job& job, int j, bool aware) {
  const double v = t.at(job.type, j);
  return aware ? v : (v > 0.0 ? 1.0 : 0.0);
}

// Pairs' time together per GPU type, by (first, second) job index, first < second.
using PairTimes = std::map<std::pair<std::size_t, std::size_t>, std::vector<double>>;

// Space sharing between job types a <= b on one GPU type, as an LP solution gives it: the time
// each job of an LP row spends in such pairs, on a's side and on b's (for a = b, one side, which
// sums to twice the time together).
struct PairGroup {
  int gpu_type = 0;
  std::vector<std::pair<std::size_t, double>> side_a, side_b;  // (row, time per job of the row)
};

// An LP's allocation: each row's time alone per type, and its space sharing.
struct Chosen {
  std::vector<std::vector<double>> share;
  std::vector<PairGroup> groups;
};

// Turns each group into pairs of jobs, each job of a row taking the row's time:
//   a != b: the north-west corner rule of the transportation problem from a's jobs to b's (both
//           sides sum to the time together): at most |a| + |b| - 1 pairs;
//   a = b:  the jobs' times laid end to end on a circle of length 2Z, the point x paired with
//           x + Z: as no job holds more than Z, no job meets itself; at most 2 |a| pairs.
// Either way every job gets exactly its time. Jobs are `members[row]`.
// O(sum over groups of the jobs on its sides).
PairTimes spread_pairs(const std::vector<PairGroup>& groups, const std::vector<std::vector<std::size_t>>& members,
                       std::size_t gpu_types) {
  constexpr double kTiny = 1e-12;  // pieces below this are the LP's rounding
  PairTimes out;
  const auto add = [&](std::size_t a, std::size_t b, int gpu, double time) {
    if (a == b || time <= kTiny) return;
    auto [it, added] = out.try_emplace({std::min(a, b), std::max(a, b)}, gpu_types, 0.0);
    it->second[static_cast<std::size_t>(gpu)] += time;
  };
  const auto jobs_of = [&](const std::vector<std::pair<std::size_t, double>>& side) {
    std::vector<std::pair<std::size_t, double>> jobs;
    for (const auto& [row, time] : side)
      for (std::size_t m : members[row]) jobs.emplace_back(m, std::max(0.0, time));
    return jobs;
  };
  for (const PairGroup& g : groups) {
    const auto a = jobs_of(g.side_a);
    if (!g.side_b.empty()) {
      const auto b = jobs_of(g.side_b);
      std::size_t i = 0, k = 0;
      double left_a = a.empty() ? 0.0 : a[0].second, left_b = b.empty() ? 0.0 : b[0].second;
      while (i < a.size() && k < b.size()) {
        const double q = std::min(left_a, left_b);
        add(a[i].first, b[k].first, g.gpu_type, q);
        left_a -= q, left_b -= q;
        if (left_a <= kTiny && ++i < a.size()) left_a = a[i].second;
        if (left_b <= kTiny && ++k < b.size()) left_b = b[k].second;
      }
      continue;
    }
    double total = 0.0;
    for (const auto& [m, time] : a) total += time;
    const double half = total / 2.0;
    // Walk [0, half) with p, and [half, total) with q, in step.
    std::size_t p = 0, q = 0;
    double end_p = a.empty() ? 0.0 : a[0].second, start_q = 0.0;
    while (q < a.size() && start_q + a[q].second <= half) start_q += a[q++].second;
    double end_q = q < a.size() ? start_q + a[q].second : total;
    for (double x = 0.0; x < half - kTiny && p < a.size() && q < a.size();) {
      const double next = std::min({end_p, end_q - half, half});
      add(a[p].first, a[q].first, g.gpu_type, next - x);
      x = next;
      if (end_p <= x + kTiny && ++p < a.size()) end_p += a[p].second;
      if (end_q - half <= x + kTiny && ++q < a.size()) end_q += a[q].second;
    }
  }
  return out;
}

// What one variable of the allocation LP gives one job: `part` of the job's time per unit of
// the variable, spent on `gpu_type` at `speed` steps/s (`seen`: as the policy sees it).
struct Term {
  int variable = 0;
  int gpu_type = 0;
  double part = 0.0;
  double speed = 0.0;
  double seen = 0.0;
};

// Space sharing between job types a <= b on one GPU type: Z, their time together, and for each LP
// row of type a (and of b) w, the time its copies spend in such pairs.
struct PairVariables {
  struct Side {
    std::size_t row;
    int variable;   // w, or Z itself when the row is its type's only one (w = factor Z)
    double factor;  // 1 for w
  };
  int gpu_type = 0;
  int together = 0;
  std::vector<Side> side_a, side_b;  // b empty when a = b
};

// The LP over X with its validity rows. X[m][j] = part[m][j] * variable x[m][j]; x[m][j] is -1
// where job m cannot run on type j.
//   aware:    a variable per (job, type), part 1; rows sum_j X[m][j] <= 1.
//   agnostic: one variable per job (its total share, <= 1), split over the types it can run in
//             proportion to their GPU counts (a scheduler that sees GPUs as alike lands on each
//             type that often), so the baseline does not depend on the vertex the simplex returns.
// Both: capacity rows sum_m scale_m X[m][j] <= workers[j].
// `copies[m]`: job m stands for that many identical jobs, each with the same X (capacity and the
// work objective count it that often).
// Space sharing adds, per pair of job types a <= b of one scale factor and GPU type where
// sharing beats taking turns (policies.hpp), a variable Z (the pairs' time together there, taking
// scale_factor GPUs per unit) and one w per row of type a or b (the time its copies spend in such
// pairs, at the shared speed): sum_{rows of a} w = Z = sum_{rows of b} w, or = 2 Z when a = b,
// where each job also holds at most Z (w <= copies Z), so that it never pairs with itself.
// spread_pairs turns that into pairs of jobs. Variables grow with rows x job types x GPU types,
// not with pairs of jobs.
struct AllocationLp {
  LinearProgram lp;
  std::vector<std::vector<int>> x;
  std::vector<std::vector<double>> part;
  std::vector<std::vector<Term>> job_terms;  // [row]: singles by type, then its pairs
  std::vector<PairVariables> pairs;
  std::vector<double> copies;
  AllocationLp(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers, LinearProgram::Sense sense,
               bool aware, bool space_sharing = false, std::vector<double> copies_of = {})
      : lp(sense), copies(std::move(copies_of)) {
    if (copies.empty()) copies.assign(jobs.size(), 1.0);
    const int J = t.num_gpu_types();
    x.assign(jobs.size(), std::vector<int>(static_cast<std::size_t>(J), -1));
    part.assign(jobs.size(), std::vector<double>(static_cast<std::size_t>(J), 0.0));
    job_terms.resize(jobs.size());
    std::vector<std::vector<std::pair<int, double>>> capacity(static_cast<std::size_t>(J));
    for (std::size_t m = 0; m < jobs.size(); ++m) {
      std::vector<int> types;
      double usable = 0.0;
      for (int j = 0; j < J; ++j)
        if (t.at(jobs[m].type, j) > 0.0 && workers[j] >= scale_of(t, jobs[m])) types.push_back(j), usable += workers[j];
      if (types.empty()) continue;
      if (aware) {
        std::vector<std::pair<int, double>> total;
        for (int j : types) {
          x[m][j] = lp.add_variable(0.0, 1.0);
          part[m][j] = 1.0;
          total.emplace_back(x[m][j], 1.0);
        }
        if (!space_sharing) lp.add_row(total, -kInfinity, 1.0);  // with pairs: below, once they are known
      } else {
        const int share = lp.add_variable(0.0, 1.0);
        for (int j : types) x[m][j] = share, part[m][j] = workers[j] / usable;
      }
      for (int j : types) {
        const double speed = t.at(jobs[m].type, j);
        job_terms[m].push_back({x[m][j], j, part[m][j], speed, aware ? speed : 1.0});
        capacity[j].emplace_back(x[m][j], part[m][j] * scale_of(t, jobs[m]) * copies[m]);
      }
    }
    if (space_sharing) {
      std::map<int, std::vector<std::size_t>> rows_of_type;
      std::map<int, double> copies_of_type;
      for (std::size_t m = 0; m < jobs.size(); ++m)
        if (!job_terms[m].empty()) rows_of_type[jobs[m].type].push_back(m), copies_of_type[jobs[m].type] += copies[m];
      for (const auto& [a, rows_a] : rows_of_type)
        for (auto it = rows_of_type.find(a); it != rows_of_type.end(); ++it) {
          const int b = it->first;
          const int scale = t.job_types[static_cast<std::size_t>(a)].scale_factor;
          if (scale != t.job_types[static_cast<std::size_t>(b)].scale_factor || (a == b && copies_of_type[a] < 2.0)) continue;
          for (int j = 0; j < J; ++j) {
            const double alone_a = t.at(a, j), alone_b = t.at(b, j);
            if (workers[j] < scale || alone_a <= 0.0 || alone_b <= 0.0) continue;
            const auto speeds = t.shared_speeds(a, b, j);
            if (!speeds || speeds->first <= 0.0 || speeds->second <= 0.0 ||
                speeds->first / alone_a + speeds->second / alone_b <= 1.0 + 1e-9)
              continue;
            PairVariables group{j, lp.add_variable(0.0, kInfinity), {}, {}};
            capacity[j].emplace_back(group.together, scale);
            // A type with one row (max-min fairness's classes, mostly) needs no w: its w is Z (2 Z
            // when a = b, where copies >= 2 already keeps each job within Z).
            const auto side = [&](const std::vector<std::size_t>& rows, double speed, double sides) {
              std::vector<PairVariables::Side> out;
              if (rows.size() == 1) {
                const std::size_t m = rows.front();
                job_terms[m].push_back({group.together, j, sides / copies[m], speed, speed});
                out.push_back({m, group.together, sides});
                return out;
              }
              std::vector<std::pair<int, double>> sum{{group.together, -sides}};
              for (std::size_t m : rows) {
                const int w = lp.add_variable(0.0, copies[m]);
                job_terms[m].push_back({w, j, 1.0 / copies[m], speed, speed});
                sum.emplace_back(w, 1.0);
                out.push_back({m, w, 1.0});
                if (a == b) lp.add_row({{w, 1.0}, {group.together, -copies[m]}}, -kInfinity, 0.0);
              }
              lp.add_row(sum, 0.0, 0.0);
              return out;
            };
            group.side_a = side(rows_a, speeds->first, a == b ? 2.0 : 1.0);
            if (a != b) group.side_b = side(it->second, speeds->second, 1.0);
            pairs.push_back(std::move(group));
          }
        }
      for (std::size_t m = 0; m < jobs.size(); ++m)
        if (!job_terms[m].empty()) lp.add_row(terms(m, [](const Term&) { return 1.0; }), -kInfinity, 1.0);
    }
    for (int j = 0; j < J; ++j)
      if (!capacity[j].empty()) lp.add_row(capacity[j], -kInfinity, workers[j]);
  }
  // sum over the job's terms of coefficient(term) x the time it gives the job, as terms over
  // variables. coefficient(term) = term.seen gives tput_seen(m, X).
  template <typename F>
  std::vector<std::pair<int, double>> terms(std::size_t m, F coefficient) const {
    std::vector<std::pair<int, double>> out;
    for (const Term& term : job_terms[m]) {
      const double c = coefficient(term) * term.part;
      if (!out.empty() && out.back().first == term.variable) out.back().second += c;
      else out.emplace_back(term.variable, c);
    }
    return out;
  }
  // Adds sum over the job's terms of coefficient(term) x time to the objective.
  template <typename F>
  void add_objective(std::size_t m, F coefficient) {
    for (const auto& [variable, c] : terms(m, coefficient)) lp.add_objective(variable, c);
  }
  std::vector<std::vector<double>> shares(const LinearProgram::Solution& s) const {
    std::vector<std::vector<double>> out(x.size(), std::vector<double>(x.empty() ? 0 : x.front().size(), 0.0));
    for (std::size_t m = 0; m < x.size(); ++m)
      for (std::size_t j = 0; j < x[m].size(); ++j)
        if (x[m][j] >= 0) out[m][j] = std::clamp(s.values[static_cast<std::size_t>(x[m][j])] * part[m][j], 0.0, 1.0);
    return out;
  }
  // The rows' shares alone and their space sharing.
  Chosen chosen(const LinearProgram::Solution& s) const {
    Chosen out{shares(s), {}};
    const auto value = [&](int variable) { return s.values[static_cast<std::size_t>(variable)]; };
    for (const PairVariables& p : pairs) {
      if (value(p.together) < kNoPair) continue;
      PairGroup g{p.gpu_type, {}, {}};
      for (const auto& side : p.side_a) g.side_a.emplace_back(side.row, side.factor * value(side.variable) / copies[side.row]);
      for (const auto& side : p.side_b) g.side_b.emplace_back(side.row, side.factor * value(side.variable) / copies[side.row]);
      out.groups.push_back(std::move(g));
    }
    return out;
  }
  // Below this a pair's time is the simplex's rounding, not an allocation.
  static constexpr double kNoPair = 1e-9;
};

// max_j T_seen[m][j]: the job's best speed as the policy sees it.
double fastest_seen(const ThroughputMatrix& t, const Job& job, bool aware) {
  double fastest = 0.0;
  for (int j = 0; j < t.num_gpu_types(); ++j) fastest = std::max(fastest, seen(t, job, j, aware));
  return fastest;
}

// Sets the objective to sum_m tput_seen(m, X) / max_j T_seen[m][j]: the work done, each job's
// best speed counting 1.
void maximize_work(AllocationLp& a, const std::vector<Job>& jobs, const ThroughputMatrix& t, bool aware) {
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    const double fastest = fastest_seen(t, jobs[m], aware);
    a.add_objective(m, [&](const Term& term) { return a.copies[m] * term.seen / fastest; });
  }
}

// The optimum of a policy's objective variable held (to kHold relative), the second LP spends what
// is left on work (maximize_work), so that no GPU idles while a job could use it. Warm from the
// first LP's basis; should CLP not prove the second optimal, the first's X stands.
constexpr double kHold = 1e-9;

LinearProgram::Solution spend_the_rest(AllocationLp& a, int objective_variable, const LinearProgram::Solution& first,
                                       const std::vector<Job>& jobs, const ThroughputMatrix& t, bool aware) {
  a.lp.set_objective(objective_variable, 0.0);
  a.lp.set_bounds(objective_variable, first.objective * (1.0 - kHold), kInfinity);
  maximize_work(a, jobs, t, aware);
  LinearProgram::Solution second = a.lp.resolve();
  return second.optimal ? second : first;
}

LinearProgram::Solution solve_or_throw(LinearProgram& lp, PolicyKind policy) {
  LinearProgram::Solution s = lp.solve();
  if (!s.optimal) throw SolveError(fmt::format("the {} LP was not solved to optimality", to_string(policy)));
  return s;
}

}  // namespace

std::vector<std::vector<double>> equal_share(const std::vector<Job>& jobs, const ThroughputMatrix& t,
                                             const std::vector<int>& workers) {
  const double total = std::accumulate(workers.begin(), workers.end(), 0.0);
  std::vector<std::vector<double>> out(jobs.size(), std::vector<double>(workers.size(), 0.0));
  for (std::size_t m = 0; m < jobs.size(); ++m)
    for (std::size_t j = 0; j < workers.size(); ++j)
      if (total > 0.0 && t.at(jobs[m].type, static_cast<int>(j)) > 0.0) out[m][j] = workers[j] / total;
  return out;
}

std::vector<std::vector<double>> isolated_share(const std::vector<Job>& jobs, const ThroughputMatrix& t,
                                                const std::vector<int>& workers) {
  // 1/n of every GPU type, as time: a job of scale s gets workers_j / (n s) of type j's time,
  // at most 1 in all.
  std::vector<std::vector<double>> out(jobs.size(), std::vector<double>(workers.size(), 0.0));
  const double n = static_cast<double>(jobs.size());
  for (std::size_t m = 0; m < jobs.size(); ++m) {
    double sum = 0.0;
    for (std::size_t j = 0; j < workers.size(); ++j)
      if (t.at(jobs[m].type, static_cast<int>(j)) > 0.0) sum += out[m][j] = workers[j] / (n * scale_of(t, jobs[m]));
    if (sum > 1.0)
      for (double& v : out[m]) v /= sum;
  }
  return out;
}

Allocation allocate(const std::vector<Job>& jobs, const ThroughputMatrix& t, const std::vector<int>& workers,
                    const PolicySpec& spec) {
  check(jobs, t, workers, spec.policy);
  if (needs_prices(spec.policy)) {
    if (static_cast<int>(spec.prices_per_hour.size()) != t.num_gpu_types())
      throw InputError(fmt::format("the {} policy needs a price per GPU type ({} given, {} types)", to_string(spec.policy),
                                   spec.prices_per_hour.size(), t.num_gpu_types()));
    for (std::size_t j = 0; j < spec.prices_per_hour.size(); ++j)
      if (!(spec.prices_per_hour[j] > 0.0) || !std::isfinite(spec.prices_per_hour[j]))
        throw InputError(fmt::format("price of {}: {} $/hour must be > 0", t.gpu_types[j], spec.prices_per_hour[j]));
  }
  if (spec.energy_slack) {
    const double slack = *spec.energy_slack;
    if (!(slack >= 0.0 && slack < 1.0))
      throw InputError(fmt::format("energy slack {}: must be at least 0 and below 1 (a share of each job's throughput)", slack));
    if (!t.has_energy())
      throw InputError("the energy stage needs energy per step for every job and GPU type (a throughput CSV with "
                       "joules_per_step, e.g. from `perseus cluster throughputs`)");
    if (needs_prices(spec.policy))
      throw InputError(fmt::format("the energy stage keeps throughput-based objectives; {} minimises cost", to_string(spec.policy)));
  }
  if (spec.space_sharing) {
    if (!spec.heterogeneity_aware)
      throw InputError("space sharing is heterogeneity-aware: an agnostic policy does not see how jobs sharing a GPU run");
    if (!t.has_space_sharing())
      throw InputError("space sharing needs the throughputs of jobs sharing a GPU (Gavel's simulation_throughputs.json has "
                       "them; a throughput CSV does not)");
    if (spec.energy_slack || t.has_energy())
      throw InputError("space sharing has no energy figures for jobs sharing a GPU: not with the energy stage or a matrix with "
                       "energy per step");
  }
  Allocation out;
  const int J = t.num_gpu_types();
  const bool aware = spec.heterogeneity_aware;
  const std::size_t M = jobs.size();
  if (M == 0) return out;
  // The energy stage (or the fastest points) on `stage_jobs`, each standing for `copies` jobs;
  // job m takes row `job_row[m]`, and the rows' pairs are spread over their jobs.
  auto finish_with = [&](const std::vector<Job>& stage_jobs, const std::vector<double>& copies, const Chosen& chosen,
                         const std::vector<std::size_t>& job_row, double objective) {
    EnergyStage stage = spec.energy_slack
                            ? minimize_energy(stage_jobs, copies, t, workers, chosen.share, *spec.energy_slack, aware)
                            : fastest_points(stage_jobs, t, chosen.share);
    out.lp_solves += spec.energy_slack ? 1 : 0;
    out.objective = objective;
    out.share.reserve(M), out.speed.reserve(M), out.power_w.reserve(M), out.throughput.reserve(M);
    for (std::size_t m = 0; m < M; ++m) {
      const std::size_t r = job_row[m];
      out.share.push_back(stage.share[r]);
      out.speed.push_back(stage.speed[r]);
      out.power_w.push_back(stage.power_w[r]);
      double tput = 0.0;
      for (int j = 0; j < J; ++j) {
        tput += stage.share[r][j] * stage.speed[r][j];
        out.power_w_total += stage.share[r][j] * stage.power_w[r][j];
      }
      out.throughput.push_back(tput);
    }
    // `out` is allocate()'s, captured: moved out, not copied (it is not used after).
    if (chosen.groups.empty()) return std::move(out);
    std::vector<std::vector<std::size_t>> members(stage_jobs.size());
    for (std::size_t m = 0; m < M; ++m) members[job_row[m]].push_back(m);
    for (auto& [key, share] : spread_pairs(chosen.groups, members, static_cast<std::size_t>(J))) {
      SharedShare pair{static_cast<int>(key.first), static_cast<int>(key.second), std::move(share)};
      for (int j = 0; j < J; ++j) {
        const auto speeds = t.shared_speeds(jobs[key.first].type, jobs[key.second].type, j);
        if (!speeds) continue;
        out.throughput[key.first] += pair.share[j] * speeds->first;
        out.throughput[key.second] += pair.share[j] * speeds->second;
      }
      out.pairs.push_back(std::move(pair));
    }
    return std::move(out);
  };
  std::vector<std::size_t> identity(M);
  std::iota(identity.begin(), identity.end(), std::size_t{0});
  auto finish = [&](const Chosen& chosen, double objective) { return finish_with(jobs, {}, chosen, identity, objective); };

  switch (spec.policy) {
    case PolicyKind::kMaxMinFairness: {
      // Jobs of one type and weight have the same row; averaging any optimal X over them keeps it
      // feasible and optimal (the LP is convex and symmetric in them), so one class stands for
      // them all: the LP has at most (job types x weights) x GPU types variables, whatever M.
      std::map<std::pair<int, double>, std::size_t> class_of;
      std::vector<Job> classes;
      std::vector<double> copies;
      std::vector<std::size_t> job_class(M);
      for (std::size_t m = 0; m < M; ++m) {
        const auto [it, added] = class_of.emplace(std::make_pair(jobs[m].type, jobs[m].weight), classes.size());
        if (added) classes.push_back(jobs[m]), copies.push_back(0.0);
        copies[it->second] += 1.0;
        job_class[m] = it->second;
      }
      AllocationLp a(classes, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing, copies);
      const int level = a.lp.add_variable(0.0, kInfinity, 1.0);
      const auto equal = equal_share(classes, t, workers);
      for (std::size_t c = 0; c < classes.size(); ++c) {
        if (classes[c].weight <= 0.0) continue;
        double normal = 0.0;
        for (int j = 0; j < J; ++j) normal += seen(t, classes[c], j, aware) * equal[c][j];
        const double factor = scale_of(t, classes[c]) / (classes[c].weight * normal);
        auto row = a.terms(c, [&](const Term& term) { return term.seen * factor; });
        row.emplace_back(level, -1.0);
        a.lp.add_row(row, 0.0, kInfinity);
      }
      const auto s = solve_or_throw(a.lp, spec.policy);
      const auto spent = spend_the_rest(a, level, s, classes, t, aware);
      out.lp_solves = 2;
      return finish_with(classes, copies, a.chosen(spent), job_class, s.objective);
    }
    case PolicyKind::kFifo:
    case PolicyKind::kShortestJobFirst: {
      // Jobs in order (arrival, or time left at their best speed), the first weighted M, the
      // last 1: the LP serves earlier jobs first wherever they gain.
      std::vector<std::size_t> order(M);
      std::iota(order.begin(), order.end(), std::size_t{0});
      if (spec.policy == PolicyKind::kShortestJobFirst) {
        std::vector<double> time_left(M);
        for (std::size_t m = 0; m < M; ++m) time_left[m] = jobs[m].steps / fastest_seen(t, jobs[m], true);
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return time_left[a] < time_left[b]; });
      }
      AllocationLp a(jobs, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing);
      for (std::size_t rank = 0; rank < M; ++rank) {
        const std::size_t m = order[rank];
        const double fastest = fastest_seen(t, jobs[m], aware), priority = static_cast<double>(M - rank);
        a.add_objective(m, [&](const Term& term) { return priority * term.seen / fastest; });
      }
      const auto s = solve_or_throw(a.lp, spec.policy);
      out.lp_solves = 1;
      return finish(a.chosen(s), s.objective);
    }
    case PolicyKind::kMaxThroughput: {
      AllocationLp a(jobs, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing);
      maximize_work(a, jobs, t, aware);
      const auto s = solve_or_throw(a.lp, spec.policy);
      out.lp_solves = 1;
      return finish(a.chosen(s), s.objective);
    }
    case PolicyKind::kMinCost:
    case PolicyKind::kMinCostSlo: {
      AllocationLp a(jobs, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing);
      for (std::size_t m = 0; m < M; ++m) {
        const double fastest = fastest_seen(t, jobs[m], aware);
        a.add_objective(m, [&](const Term& term) { return term.seen / (fastest * spec.prices_per_hour[term.gpu_type]); });
      }
      if (spec.policy == PolicyKind::kMinCostSlo) {
        for (std::size_t m = 0; m < M; ++m) {
          if (!std::isfinite(jobs[m].slo_s)) continue;
          const double need = jobs[m].steps / jobs[m].slo_s;
          // Alone on its best type the job reaches max_j T[m][j] (where it fits): below `need`, no
          // allocation meets the SLO.
          double best = 0.0;
          for (int j = 0; j < J; ++j)
            if (workers[j] >= scale_of(t, jobs[m])) best = std::max(best, t.at(jobs[m].type, j));
          if (best < need * (1.0 - 1e-9))
            throw InputError(fmt::format("job {} ({}): its SLO needs {:.4g} steps/s, more than its best GPU type gives ({:.4g})",
                                         m, t.job_types[jobs[m].type].name(), need, best));
          a.lp.add_row(a.terms(m, [](const Term& term) { return term.speed; }), need, kInfinity);
        }
      }
      const auto s = a.lp.solve();
      if (s.infeasible || (!s.optimal && spec.policy == PolicyKind::kMinCostSlo))
        throw InputError("the jobs' SLOs cannot all be met together on this cluster (each alone can): relax an SLO or add GPUs");
      if (!s.optimal) throw SolveError(fmt::format("the {} LP was not solved to optimality", to_string(spec.policy)));
      out.lp_solves = 1;
      return finish(a.chosen(s), s.objective);
    }
    case PolicyKind::kMakespan: {
      // tput(m, X) >= steps_m * r, maximise r = 1 / makespan.
      AllocationLp a(jobs, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing);
      const int rate = a.lp.add_variable(0.0, kInfinity, 1.0);
      for (std::size_t m = 0; m < M; ++m) {
        auto row = a.terms(m, [](const Term& term) { return term.seen; });
        row.emplace_back(rate, -jobs[m].steps);
        a.lp.add_row(row, 0.0, kInfinity);
      }
      const auto s = solve_or_throw(a.lp, spec.policy);
      const auto spent = spend_the_rest(a, rate, s, jobs, t, aware);
      out.lp_solves = 2;
      return finish(a.chosen(spent), s.objective > 0.0 ? 1.0 / s.objective : kInfinity);
    }
    case PolicyKind::kFinishTimeFairness: {
      // rho_m <= R  <=>  tput(m, X) >= steps_m / (R D_m - t_m): a feasibility LP per R, bisected.
      const auto isolated = isolated_share(jobs, t, workers);
      std::vector<double> denominator(M);
      double lo = 0.0;
      for (std::size_t m = 0; m < M; ++m) {
        double tput = 0.0;
        for (int j = 0; j < J; ++j) tput += seen(t, jobs[m], j, aware) * isolated[m][j];
        denominator[m] = jobs[m].elapsed_s + jobs[m].steps / tput;
        lo = std::max(lo, jobs[m].elapsed_s / denominator[m]);
      }
      Chosen best{isolated, {}};
      double hi = 1.0;  // X_isolated reaches rho = 1 for every job
      // One LP whose demand rows' bounds move with R: each step is a warm dual simplex from the
      // last basis (the objective never changes), not a solve from scratch.
      AllocationLp a(jobs, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing);
      std::vector<int> demand(M);
      for (std::size_t m = 0; m < M; ++m)
        demand[m] = a.lp.add_row(a.terms(m, [](const Term& term) { return term.seen; }), 0.0, kInfinity);
      bool solved = false;
      auto feasible = [&](double R) -> std::optional<Chosen> {
        for (std::size_t m = 0; m < M; ++m) {
          const double slack = R * denominator[m] - jobs[m].elapsed_s;
          if (slack <= 0.0) return std::nullopt;
          a.lp.set_row_bounds(demand[m], jobs[m].steps / slack, kInfinity);
        }
        ++out.lp_solves;
        const auto s = solved ? a.lp.resolve_rows() : a.lp.solve();
        solved = true;
        if (!s.optimal) return std::nullopt;
        return a.chosen(s);
      };
      for (int step = 0; step < 50 && hi - lo > 1e-9 * hi; ++step) {
        const double mid = 0.5 * (lo + hi);
        if (auto share = feasible(mid)) best = std::move(*share), hi = mid;
        else lo = mid;
      }
      if (hi < 1.0) {
        maximize_work(a, jobs, t, aware);
        for (std::size_t m = 0; m < M; ++m) a.lp.set_row_bounds(demand[m], jobs[m].steps / (hi * denominator[m] - jobs[m].elapsed_s), kInfinity);
        const auto s = a.lp.resolve();
        ++out.lp_solves;
        if (s.optimal) best = a.chosen(s);
      }
      return finish(best, hi);
    }
  }
  return out;
}

}  // namespace perseus::cluster
