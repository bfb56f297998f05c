#include "perseus/cluster/policies.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "perseus/cluster/allocation_lp.hpp"
#include "perseus/cluster/pooled_requirements.hpp"
#include "perseus/cluster/energy_stage.hpp"
#include "perseus/cluster/linear_program.hpp"
#include "perseus/cluster/water_filling.hpp"

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
    case PolicyKind::kHierarchical: return "hierarchical";
  }
  return "?";
}

bool needs_steps(PolicyKind policy) {
  return policy == PolicyKind::kMakespan || policy == PolicyKind::kFinishTimeFairness ||
         policy == PolicyKind::kShortestJobFirst || policy == PolicyKind::kMinCostSlo;
}

bool needs_prices(PolicyKind policy) { return policy == PolicyKind::kMinCost || policy == PolicyKind::kMinCostSlo; }

std::string_view to_string(EntityPolicy policy) { return policy == EntityPolicy::kFifo ? "fifo" : "fairness"; }

std::vector<Entity> entities_of(const PolicySpec& spec) {
  return spec.entities.empty() ? std::vector<Entity>{{"all", 1.0, EntityPolicy::kFairness}} : spec.entities;
}

int find_entity(const std::vector<Entity>& entities, std::string_view name) {
  for (std::size_t e = 0; e < entities.size(); ++e)
    if (entities[e].name == name) return static_cast<int>(e);
  return -1;
}

int dealt_entity(std::size_t index, const PolicySpec& spec) {
  return static_cast<int>(index % std::max<std::size_t>(1, spec.entities.size()));
}

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
  if (s == "hierarchical") return PolicyKind::kHierarchical;
  throw InputError(fmt::format("unknown policy '{}': expected max-min-fairness (las), fifo, makespan, finish-time-fairness "
                               "(ftf), shortest-job-first (sjf), max-throughput, min-cost, min-cost-slo or hierarchical",
                               name));
}

double effective_throughput(const ThroughputMatrix& matrix, int job_type, const std::vector<double>& share) {
  double sum = 0.0;
  for (int j = 0; j < matrix.num_gpu_types(); ++j) sum += matrix.at(job_type, j) * share[static_cast<std::size_t>(j)];
  return sum;
}

double best_speed(const ThroughputMatrix& matrix, int job_type, const std::vector<int>& workers) {
  double best = 0.0;
  for (int j = 0; j < matrix.num_gpu_types(); ++j)
    if (workers[static_cast<std::size_t>(j)] >= matrix.job_types[static_cast<std::size_t>(job_type)].scale_factor)
      best = std::max(best, matrix.at(job_type, j));
  return best;
}

double slo_to_aim(double slo_left_s, double steps_left, double best_steps_per_s, double round_s) {
  for (const double aim : {slo_left_s - round_s, slo_left_s})
    if (aim > 0.0 && steps_left <= aim * best_steps_per_s) return aim;
  return Job::kNoSlo;
}

namespace {

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
  if (spec.policy == PolicyKind::kHierarchical) {
    for (const Entity& e : spec.entities)
      if (!(e.weight > 0.0) || !std::isfinite(e.weight))
        throw InputError(fmt::format("entity '{}': weight {} must be > 0", e.name, e.weight));
    const int entities = static_cast<int>(entities_of(spec).size());
    for (std::size_t m = 0; m < jobs.size(); ++m)
      if (jobs[m].entity < 0 || jobs[m].entity >= entities)
        throw InputError(fmt::format("job {} ({}): entity {} is not one of the {} given", m, t.job_types[jobs[m].type].name(),
                                     jobs[m].entity, entities));
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
      // Jobs of one type and weight have the same row (group_jobs): the LP has at most
      // (job types x weights) x GPU types variables, whatever M.
      const JobClasses grouped =
          group_jobs(jobs, [](const Job& job, std::size_t) { return ClassKey{0, job.type, job.weight, 0}; });
      const std::vector<Job>& classes = grouped.classes;
      AllocationLp a(classes, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing, grouped.copies);
      const int level = a.lp.add_variable(0.0, kInfinity, 1.0);
      const auto normalising = normalising_factors(classes, t, workers, aware);
      for (std::size_t c = 0; c < classes.size(); ++c) {
        if (classes[c].weight <= 0.0) continue;
        const double factor = normalising[c] / classes[c].weight;
        auto row = a.terms(c, [&](const Term& term) { return term.seen * factor; });
        row.emplace_back(level, -1.0);
        a.lp.add_row(row, 0.0, kInfinity);
      }
      const auto s = solve_or_throw(a.lp, spec.policy);
      const auto spent = spend_the_rest(a, level, s, classes, t, aware);
      out.lp_solves = 2;
      return finish_with(classes, grouped.copies, a.chosen(spent), grouped.job_class, s.objective);
    }
    case PolicyKind::kHierarchical: {
      WaterFilling filled = water_fill(jobs, t, workers, spec);
      out.lp_solves = filled.lp_solves + filled.milp_solves;
      return finish_with(filled.grouped.classes, filled.grouped.copies, filled.chosen, filled.grouped.job_class,
                         filled.first_level);
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
          const double best = best_speed(t, jobs[m].type, workers);
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
      // tput(m, X) >= steps_m * r, maximise r = 1 / makespan. With space sharing, the jobs of each
      // type pooled (pooled_requirements.hpp) where that splits over the jobs.
      if (spec.space_sharing) {
        const std::vector<double> none(M, 0.0);
        std::vector<double> steps(M);
        for (std::size_t m = 0; m < M; ++m) steps[m] = jobs[m].steps;
        if (auto pooled = maximize_pooled_requirements(jobs, t, workers, none, steps, true)) {
          out.lp_solves = pooled->lp_solves;
          return finish(pooled->chosen, pooled->y > 0.0 ? 1.0 / pooled->y : kInfinity);
        }
      }
      // The rate counts the longest job's steps, so that the rows' coefficients are near 1: with
      // steps of 10^5-10^7 against rates of 10^-6, CLP's tolerances stopped 1.2% short of the
      // optimum at 2,048 jobs (4% with space sharing).
      double unit = 0.0;
      for (const Job& job : jobs) unit = std::max(unit, job.steps);
      AllocationLp a(jobs, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing);
      const int rate = a.lp.add_variable(0.0, kInfinity, 1.0);
      for (std::size_t m = 0; m < M; ++m) {
        auto row = a.terms(m, [](const Term& term) { return term.seen; });
        row.emplace_back(rate, -jobs[m].steps / unit);
        a.lp.add_row(row, 0.0, kInfinity);
      }
      const auto s = solve_or_throw(a.lp, spec.policy);
      const auto spent = spend_the_rest(a, rate, s, jobs, t, aware);
      out.lp_solves = 2;
      return finish(a.chosen(spent), s.objective > 0.0 ? unit / s.objective : kInfinity);
    }
    case PolicyKind::kFinishTimeFairness: {
      // Minimise max_m rho_m(X), rho_m = (t_m + s_m / tput_m(X)) / D_m: a ratio of affine
      // functions of X, (t_m tput_m + s_m) / (D_m tput_m), so a generalised fractional program.
      // Solved by the normalised Dinkelbach method (Crouzeix, Ferland and Schaible, 1985): from X_k
      // with R_k = max_m rho_m(X_k), the LP
      //   max y  s.t.  tput_m(X) >= need_m(R_k) + y c_m,   need_m(R) = s_m / (R D_m - t_m),
      //                c_m = D_m tput_m(X_k) / (R_k D_m - t_m)
      // has X_k feasible at y = 0: y = 0 proves R_k optimal, y > 0 gives X_{k+1} with
      // R_{k+1} < R_k, converging superlinearly (1 LP when no job has run yet, up to ~6 when
      // elapsed times differ). Bisection on R needed ~32 feasibility LPs, its first infeasible
      // ones the dearest. Each LP after the first starts from the last basis (only y's
      // coefficients and the rows' bounds change).
      const auto isolated = isolated_share(jobs, t, workers);
      std::vector<double> denominator(M), alone(M);
      for (std::size_t m = 0; m < M; ++m) {
        for (int j = 0; j < J; ++j) alone[m] += seen(t, jobs[m], j, aware) * isolated[m][j];
        denominator[m] = jobs[m].elapsed_s + jobs[m].steps / alone[m];
      }
      std::vector<double> tput = alone;  // the last X's throughputs (c_m's)
      constexpr double kConverged = 1e-9;  // y, a fraction of each job's throughput; and R's relative step
      // need_m(R) and c_m, for R and the throughputs of the last X.
      std::vector<double> need(M, 0.0), c(M, 0.0);
      const auto set_step = [&](double R) {
        for (std::size_t m = 0; m < M; ++m) {
          if (!std::isfinite(denominator[m])) continue;  // need 0: its row holds as built
          const double slack = R * denominator[m] - jobs[m].elapsed_s;
          need[m] = jobs[m].steps / slack, c[m] = denominator[m] * tput[m] / slack;
        }
      };
      // Whether to stop after a step that reached y = gain and X with worst rho `next` from R.
      const auto converged = [&](double R, double next, double gain) {
        // A floor under the optimum from this LP alone: an X with every rho_m <= R* runs each job
        // at need_m(R*) or more, so for some m need_m(R*) <= need_m(R) + y c_m (else that X
        // would reach a larger y), i.e. R* >= (t_m + s_m / (need_m(R) + y c_m)) / D_m. Where no
        // job has run yet the first step's floor is its R (every term alike): no LP to prove it.
        double floor = kInfinity;
        for (std::size_t m = 0; m < M; ++m)
          if (std::isfinite(denominator[m]))
            floor = std::min(floor, (jobs[m].elapsed_s + jobs[m].steps / (need[m] + gain * c[m])) / denominator[m]);
        return gain <= kConverged || floor >= std::min(R, next) * (1.0 - kConverged) || next >= R * (1.0 - kConverged);
      };
      const auto rho_of = [&](const std::vector<double>& throughput) {
        double worst = 0.0;
        for (std::size_t m = 0; m < M; ++m)
          if (std::isfinite(denominator[m]))
            worst = std::max(worst, (jobs[m].elapsed_s + jobs[m].steps / throughput[m]) / denominator[m]);
        return worst;
      };
      if (spec.space_sharing) {
        // The same steps on each type's jobs pooled (pooled_requirements.hpp), where that splits.
        double R = 1.0;
        bool pooled = true;
        int solves = 0;
        for (int step = 0; step < 50 && pooled; ++step) {
          set_step(R);
          const auto p = maximize_pooled_requirements(jobs, t, workers, need, c, false);
          if (!p) pooled = false;
          else {
            solves += p->lp_solves;
            const double next = rho_of(p->throughput);
            const bool done = converged(R, next, p->y);
            R = std::min(R, next);
            tput = p->throughput;
            if (done) break;
          }
        }
        // The last step's rows, y held: the rest goes on work.
        const auto spent = pooled ? maximize_pooled_requirements(jobs, t, workers, need, c, true) : std::nullopt;
        if (spent) {
          out.lp_solves = solves + spent->lp_solves;
          // Its own worst rho: the split over the jobs holds each requirement to 1e-6.
          return finish(spent->chosen, rho_of(spent->throughput));
        }
        tput = alone;  // the LP below starts again from X_isolated
      }
      AllocationLp a(jobs, t, workers, LinearProgram::Sense::kMaximize, aware, spec.space_sharing);
      const int y = a.lp.add_variable(0.0, kInfinity, 1.0);
      std::vector<int> demand(M);
      for (std::size_t m = 0; m < M; ++m)
        demand[m] = a.lp.add_row(a.terms(m, [](const Term& term) { return term.seen; }), 0.0, kInfinity);
      // max_m rho_m of an LP's X, its throughputs into `tput`.
      const auto worst_rho = [&](const LinearProgram::Solution& s) {
        for (std::size_t m = 0; m < M; ++m) {
          if (!std::isfinite(denominator[m])) continue;  // a job that runs nowhere
          tput[m] = 0.0;
          for (const auto& [variable, coefficient] : a.terms(m, [](const Term& term) { return term.seen; }))
            tput[m] += coefficient * s.values[static_cast<std::size_t>(variable)];
        }
        return rho_of(tput);
      };
      Chosen best{isolated, {}};
      double R = 1.0;  // X_isolated reaches rho = 1 for every job
      std::optional<LinearProgram::Solution> last;
      for (int step = 0; step < 50; ++step) {
        set_step(R);
        for (std::size_t m = 0; m < M; ++m) {
          if (!std::isfinite(denominator[m])) continue;
          a.lp.set_row_bounds(demand[m], need[m], kInfinity);
          a.lp.set_coefficient(demand[m], y, -c[m]);
        }
        ++out.lp_solves;
        auto s = last ? a.lp.resolve() : a.lp.solve();
        if (!s.optimal && last) s = a.lp.solve(), ++out.lp_solves;  // the warm start failed: once from scratch
        if (!s.optimal) break;
        const double next = worst_rho(s), gain = s.values[static_cast<std::size_t>(y)];
        last = std::move(s);
        const bool done = converged(R, next, gain);
        R = std::min(R, next);
        if (done) break;
      }
      if (last) {
        // The last LP's rows keep every rho_m <= R; with y held, the rest goes on work.
        const auto spent = spend_the_rest(a, y, *last, jobs, t, aware);
        ++out.lp_solves;
        best = a.chosen(spent);
        R = std::min(R, worst_rho(spent));
      }
      return finish(best, R);
    }
  }
  return out;
}

}  // namespace perseus::cluster
