#include "perseus/cluster/simulator.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "perseus/cluster/rounds.hpp"

namespace perseus::cluster {
namespace {

void check(const ThroughputMatrix& matrix, const SimulationSpec& spec) {
  if (static_cast<int>(spec.workers.size()) != matrix.num_gpu_types())
    throw InputError(fmt::format("the cluster has {} GPU counts, the throughputs {} GPU types", spec.workers.size(),
                                 matrix.num_gpu_types()));
  check_round_length(spec.round_s);
  if (!(spec.restart_overhead_s >= 0.0) || spec.restart_overhead_s >= spec.round_s)
    throw InputError(fmt::format("restart overhead {} s: must be >= 0 and shorter than a round ({} s)", spec.restart_overhead_s,
                                 spec.round_s));
  if (spec.window_begin < 0 || (spec.window_end >= 0 && spec.window_end <= spec.window_begin))
    throw InputError(fmt::format("measured jobs [{}, {}): must be a non-empty range of arrival indices", spec.window_begin,
                                 spec.window_end));
}

// How one job of a lease used it: how long it ran (restart overhead not included), its share of
// the GPUs' time over that (a pair's time together counts half to each), whether it finished.
struct LeaseRun {
  int id = 0;
  double run_s = 0.0, gpu_time_s = 0.0;
  bool finished = false;
  double steps = 0.0;  // done in the lease
};

// A lease's one or two jobs (a fixed array: this runs for every lease of every round).
struct LeaseRuns {
  std::array<LeaseRun, 2> runs;
  std::size_t count = 1;
  const LeaseRun* begin() const { return runs.data(); }
  const LeaseRun* end() const { return runs.data() + count; }
};

// Advances the lease's job(s) through `avail_s` seconds of a round. Alone, a job runs at its
// allocation's speed on the type; a pair runs at the pair's shared speeds until one finishes, the
// other then alone on the GPUs for the rest of the round.
LeaseRuns run_lease(const Lease& l, double avail_s, const ThroughputMatrix& matrix, const std::vector<JobOutcome>& jobs,
                                std::vector<double>& steps_left, const std::vector<std::vector<double>>& speed) {
  const auto alone_rate = [&](int id) { return speed[static_cast<std::size_t>(id)][static_cast<std::size_t>(l.gpu_type)]; };
  if (l.partner < 0) {
    double& left = steps_left[static_cast<std::size_t>(l.job)];
    const double before = left, need_s = left / alone_rate(l.job);
    const double run_s = std::min(avail_s, need_s);
    left = need_s <= avail_s ? 0.0 : left - run_s * alone_rate(l.job);
    return {{LeaseRun{l.job, run_s, run_s, need_s <= avail_s, before - left}}, 1};
  }
  const int ids[2] = {l.job, l.partner};
  const auto rates = matrix.shared_speeds(jobs[static_cast<std::size_t>(l.job)].type, jobs[static_cast<std::size_t>(l.partner)].type,
                                          l.gpu_type);
  const double shared[2] = {rates ? rates->first : 0.0, rates ? rates->second : 0.0};
  double need[2];
  for (int i = 0; i < 2; ++i)
    need[i] = shared[i] > 0.0 ? steps_left[static_cast<std::size_t>(ids[i])] / shared[i] : std::numeric_limits<double>::infinity();
  const double together = std::min({avail_s, need[0], need[1]});
  LeaseRuns result{{}, 2};
  std::array<LeaseRun, 2>& out = result.runs;
  for (int i = 0; i < 2; ++i) {
    double& left = steps_left[static_cast<std::size_t>(ids[i])];
    out[i] = {ids[i], together, together / 2.0, need[i] <= together, left};
    left = out[i].finished ? 0.0 : left - together * shared[i];
    out[i].steps -= left;
  }
  for (int i = 0; i < 2; ++i) {
    if (out[i].finished || !out[1 - i].finished) continue;
    double& left = steps_left[static_cast<std::size_t>(ids[i])];
    const double rest = avail_s - together, need_s = left / alone_rate(ids[i]);
    const double run_s = std::min(rest, need_s);
    out[i].run_s += run_s, out[i].gpu_time_s += run_s;
    out[i].finished = need_s <= rest;
    const double before = left;
    left = out[i].finished ? 0.0 : left - run_s * alone_rate(ids[i]);
    out[i].steps += before - left;
  }
  return result;
}

}  // namespace

SimulationResult simulate(JobSource source, const ThroughputMatrix& matrix, const SimulationSpec& spec) {
  check(matrix, spec);
  const int J = matrix.num_gpu_types();
  SimulationResult out;
  RoundScheduler scheduler(spec.workers, spec.gpus_per_server);
  // A job that fits no GPU type would wait for ever.
  std::vector<double> fastest(static_cast<std::size_t>(matrix.num_job_types()), 0.0);  // 0: fits no type
  for (int m = 0; m < matrix.num_job_types(); ++m) fastest[static_cast<std::size_t>(m)] = best_speed(matrix, m, spec.workers);

  std::vector<int> active;             // ids, in arrival order
  std::vector<double> steps_left;      // by id
  std::vector<std::vector<double>> speed, power_w;  // by id, per type: the allocation in force
  // By id: steps/s on 1/n of the cluster (X_isolated, n the jobs active), the allocation in force.
  std::vector<double> isolated_speed;
  std::optional<TraceJob> pending = source();
  bool changed = true;
  double t = 0.0, gap_weighted = 0.0, gap_time = 0.0, allocation_start = 0.0;
  std::vector<double> busy_s(static_cast<std::size_t>(J), 0.0);
  std::unordered_map<int, int> last_round;  // id -> index of the last round it ran in
  int window_finished = 0;
  const auto in_window = [&](int id) { return id >= spec.window_begin && (spec.window_end < 0 || id < spec.window_end); };
  const auto report = [&] {
    if (!spec.progress) return;
    SimulationProgress p;
    p.time_s = t;
    p.arrived = static_cast<int>(out.jobs.size());
    p.finished = p.arrived - static_cast<int>(active.size());
    p.window_finished = window_finished;
    p.window_size = spec.window_end >= 0 ? spec.window_end - spec.window_begin : p.arrived - spec.window_begin;
    spec.progress(p);
  };
  const auto done = [&] {
    if (spec.window_end < 0) return !pending && active.empty();
    if (window_finished == spec.window_end - spec.window_begin) return true;
    return !pending && active.empty();  // the trace ended before the window did
  };
  const auto close_allocation = [&] {
    const double held = t - allocation_start;
    if (held > 0.0) gap_weighted += scheduler.allocation_gap() * held, gap_time += held;
  };

  while (!done() && t < spec.max_time_s) {
    if (active.empty() && pending && pending->arrival_s > t) t = pending->arrival_s;
    while (pending && pending->arrival_s <= t) {
      if (pending->type < 0 || pending->type >= matrix.num_job_types())
        throw InputError(fmt::format("job {}: no job type {}", out.jobs.size(), pending->type));
      if (fastest[static_cast<std::size_t>(pending->type)] <= 0.0)
        throw InputError(fmt::format("job {} ({}) can run on no GPU type of this cluster (it needs {} GPUs of a type it has a "
                                     "throughput on)",
                                     out.jobs.size(), matrix.job_types[static_cast<std::size_t>(pending->type)].name(),
                                     matrix.job_types[static_cast<std::size_t>(pending->type)].scale_factor));
      JobOutcome j;
      j.id = static_cast<int>(out.jobs.size());
      j.type = pending->type, j.arrival_s = pending->arrival_s, j.steps = pending->steps, j.weight = pending->weight;
      j.slo_s = pending->slo_s;
      // Jobs the trace gives no entity are dealt to the entities round-robin.
      j.entity = pending->entity >= 0 ? pending->entity : dealt_entity(static_cast<std::size_t>(j.id), spec.policy);
      j.gpu_s.assign(static_cast<std::size_t>(J), 0.0);
      j.measured = in_window(j.id);
      out.jobs.push_back(j);
      steps_left.push_back(pending->steps);
      speed.emplace_back();
      power_w.emplace_back();
      isolated_speed.push_back(0.0);
      active.push_back(j.id);
      changed = true;
      pending = source();
    }
    if (active.empty()) continue;

    if (changed) {
      close_allocation();
      std::vector<Job> jobs;
      std::vector<int> scales;
      for (int id : active) {
        const JobOutcome& o = out.jobs[static_cast<std::size_t>(id)];
        const double steps = steps_left[static_cast<std::size_t>(id)];
        const double slo = slo_to_aim(o.arrival_s + o.slo_s - t, steps, fastest[static_cast<std::size_t>(o.type)], spec.round_s);
        jobs.push_back({o.type, o.weight, steps, t - o.arrival_s, slo, o.entity});
        scales.push_back(matrix.job_types[static_cast<std::size_t>(o.type)].scale_factor);
      }
      const auto solve_start = std::chrono::steady_clock::now();
      Allocation a = allocate(jobs, matrix, spec.workers, spec.policy);
      out.policy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - solve_start).count();
      ++out.allocations;
      const std::vector<std::vector<double>> isolated = isolated_share(jobs, matrix, spec.workers);
      for (std::size_t k = 0; k < active.size(); ++k) {
        const auto id = static_cast<std::size_t>(active[k]);
        speed[id] = std::move(a.speed[k]);
        power_w[id] = std::move(a.power_w[k]);
        isolated_speed[id] = effective_throughput(matrix, jobs[k].type, isolated[k]);
      }
      std::vector<Combination> combinations;
      combinations.reserve(active.size() + a.pairs.size());
      for (std::size_t k = 0; k < active.size(); ++k) combinations.push_back({active[k], -1, scales[k], std::move(a.share[k])});
      for (SharedShare& p : a.pairs)
        combinations.push_back({active[static_cast<std::size_t>(p.first)], active[static_cast<std::size_t>(p.second)],
                                scales[static_cast<std::size_t>(p.first)], std::move(p.share)});
      if (!a.pairs.empty())  // singles come in id order already
        std::sort(combinations.begin(), combinations.end(),
                  [](const Combination& x, const Combination& y) { return std::tie(x.job, x.partner) < std::tie(y.job, y.partner); });
      scheduler.set_allocation(std::move(combinations));
      allocation_start = t;
      changed = false;
    }

    const std::vector<Lease> leases = scheduler.next_round();
    const int round_index = static_cast<int>(out.rounds.size());
    RoundRecord record{t, static_cast<int>(active.size()), std::vector<int>(static_cast<std::size_t>(J), 0), 0.0};
    std::vector<double> ran(leases.size(), 0.0);
    std::vector<int> finished;
    for (std::size_t k = 0; k < leases.size(); ++k) {
      const Lease& l = leases[k];
      const double overhead = l.renewed ? 0.0 : spec.restart_overhead_s;
      const LeaseRuns runs = run_lease(l, spec.round_s - overhead, matrix, out.jobs, steps_left, speed);
      for (const LeaseRun& r : runs) {
        JobOutcome& o = out.jobs[static_cast<std::size_t>(r.id)];
        const int scale = matrix.job_types[static_cast<std::size_t>(o.type)].scale_factor;
        const double held_s = overhead + r.run_s;
        ran[k] = std::max(ran[k], held_s);
        if (o.start_s < 0.0) o.start_s = t;
        const auto last = last_round.find(r.id);
        if (!l.renewed && last != last_round.end()) ++o.migrations;
        last_round[r.id] = round_index;
        ++o.rounds;
        o.isolated_s += r.steps / isolated_speed[static_cast<std::size_t>(r.id)];
        // A pair splits its GPUs' time (and the restart) evenly while both run.
        o.gpu_s[static_cast<std::size_t>(l.gpu_type)] += (overhead / static_cast<double>(runs.count) + r.gpu_time_s) * scale;
        // The restart overhead is spent loading, at the same power (an upper bound). Jobs that
        // share GPUs have no energy figures (policies.hpp).
        if (l.partner < 0) {
          const double joules = held_s * power_w[static_cast<std::size_t>(r.id)][static_cast<std::size_t>(l.gpu_type)];
          o.energy_j += joules;
          record.power_w += joules / spec.round_s;
        }
        if (r.finished) {
          o.completion_s = t + held_s;
          finished.push_back(r.id);
          window_finished += in_window(r.id) ? 1 : 0;
        }
      }
      const int scale = matrix.job_types[static_cast<std::size_t>(out.jobs[static_cast<std::size_t>(l.job)].type)].scale_factor;
      busy_s[static_cast<std::size_t>(l.gpu_type)] += ran[k] * scale;
      record.busy_gpus[static_cast<std::size_t>(l.gpu_type)] += scale;
      out.renewals += l.renewed ? 1 : 0;
      ++out.leases;
    }
    // Jobs that ran last round and not this one (leased jobs now say this round) were preempted.
    for (int id : active) {
      const auto last = last_round.find(id);
      if (last != last_round.end() && last->second == round_index - 1) ++out.jobs[static_cast<std::size_t>(id)].preemptions;
    }
    scheduler.finish_round(leases, ran, spec.round_s);
    out.rounds.push_back(std::move(record));
    t += spec.round_s;
    if (!finished.empty()) {
      std::sort(finished.begin(), finished.end());
      std::erase_if(active, [&](int id) { return std::binary_search(finished.begin(), finished.end(), id); });
      for (int id : finished) {
        last_round.erase(id);
        speed[static_cast<std::size_t>(id)] = {};
        power_w[static_cast<std::size_t>(id)] = {};
      }
      changed = true;
    }
    if (out.rounds.size() % 100 == 0) report();
  }
  close_allocation();
  out.end_s = t;
  out.allocation_gap = gap_time > 0.0 ? gap_weighted / gap_time : 0.0;
  out.utilisation.assign(static_cast<std::size_t>(J), 0.0);
  for (int j = 0; j < J; ++j)
    if (spec.workers[j] > 0 && t > 0.0) out.utilisation[j] = busy_s[j] / (spec.workers[j] * t);
  double jct_sum = 0.0, rho_sum = 0.0;
  for (const JobOutcome& o : out.jobs) {
    if (!o.measured) continue;
    ++out.window_jobs;
    out.energy_j += o.energy_j;
    if (!o.finished()) {
      ++out.window_unfinished;
      continue;
    }
    jct_sum += o.jct_s();
    rho_sum += o.finish_time_fairness();
    if (std::isfinite(o.slo_s)) ++out.slo_jobs, out.slo_violations += o.missed_slo() ? 1 : 0;
    if (!spec.policy.prices_per_hour.empty())
      for (int j = 0; j < J; ++j) out.cost += o.gpu_s[static_cast<std::size_t>(j)] / 3600.0 * spec.policy.prices_per_hour[j];
    out.makespan_s = std::max(out.makespan_s, o.completion_s);
  }
  const int finished_in_window = out.window_jobs - out.window_unfinished;
  out.average_jct_s = finished_in_window > 0 ? jct_sum / finished_in_window : 0.0;
  out.average_finish_time_fairness = finished_in_window > 0 ? rho_sum / finished_in_window : 0.0;
  report();
  return out;
}

}  // namespace perseus::cluster
